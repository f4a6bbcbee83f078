import FriensoProto
import Foundation
import Identity
import Logging
import NIOCore
import PostgresNIO
import Storage
import Wire

/// Contact matching and linked external accounts on PostgreSQL (the SQLite side: `ContactMatching.swift`).
extension PostgresAccountsStore {
    func matchContacts(hashes: [[UInt8]], externalIDs: [ExternalID]) async throws -> [ContactMatch] {
        try await database.read { connection in
            var found = ContactMatches(hashes: hashes)
            for chunk in stride(from: 0, to: hashes.count, by: 400) {
                let part = hashes[chunk..<min(chunk + 400, hashes.count)].map { ByteBuffer(bytes: $0) }
                let rows = try await connection.prepared("""
                    SELECT \(unescaped: Self.userColumns), phone_sha256, email_sha256 FROM users
                    WHERE phone_sha256 = ANY(\(part)) OR email_sha256 = ANY(\(part))
                    """, logger: logger)
                for try await row in rows {
                    let columns = try row.decode((Int64, String, String, String, String, String, String, String, Int64, Data?, Data?).self)
                    found.add(Self.user((columns.0, columns.1, columns.2, columns.3, columns.4, columns.5, columns.6, columns.7, columns.8)),
                              phoneHash: columns.9, emailHash: columns.10)
                }
            }
            for link in externalIDs {
                guard let user = try await Self.users(connection.prepared("""
                    SELECT \(unescaped: Self.userColumns.split(separator: ", ").map { "users.\($0)" }.joined(separator: ", "))
                    FROM external_ids JOIN users ON users.id = external_ids.user_id
                    WHERE provider = \(link.provider) AND external_id = \(link.id)
                    """, logger: logger)).first else { continue }
                found.addLinked(user)
            }
            return found.matches
        }
    }

    func link(userID: UInt64, _ link: ExternalID, now: Int64) async throws -> [ExternalID] {
        try await database.write { connection in
            guard try await PostgresServiceDatabase.first(connection.prepared("SELECT 1::bigint FROM users WHERE id = \(Int64(userID))", logger: logger), Int64.self) != nil else {
                throw AccountRefusal.noAccount(userID)
            }
            if let owner = try await PostgresServiceDatabase.first(connection.prepared(
                "SELECT user_id FROM external_ids WHERE provider = \(link.provider) AND external_id = \(link.id)", logger: logger), Int64.self),
               UInt64(owner) != userID {
                throw AccountRefusal.linkedElsewhere(provider: link.provider, id: link.id)
            }
            try await connection.prepared("""
                INSERT INTO external_ids (provider, external_id, user_id, linked_at_ms) VALUES (\(link.provider), \(link.id), \(Int64(userID)), \(now))
                ON CONFLICT DO NOTHING
                """, logger: logger)
            return try await Self.links(connection, userID: userID, logger: logger)
        }
    }

    func unlink(userID: UInt64, _ link: ExternalID) async throws -> [ExternalID] {
        try await database.write { connection in
            let removed = try await PostgresServiceDatabase.count(connection.prepared("""
                DELETE FROM external_ids WHERE provider = \(link.provider) AND external_id = \(link.id) AND user_id = \(Int64(userID)) RETURNING 1
                """, logger: logger))
            guard removed == 1 else { throw AccountRefusal.notLinked(provider: link.provider, id: link.id) }
            return try await Self.links(connection, userID: userID, logger: logger)
        }
    }

    static func links(_ connection: PostgresConnection, userID: UInt64, logger: Logger) async throws -> [ExternalID] {
        var links: [ExternalID] = []
        let rows = try await connection.prepared("""
            SELECT provider, external_id FROM external_ids WHERE user_id = \(Int64(userID)) ORDER BY provider COLLATE "C", external_id COLLATE "C"
            """, logger: logger)
        for try await (provider, id) in rows.decode((String, String).self) { links.append(ExternalID(provider: provider, id: id)) }
        return links
    }
}
