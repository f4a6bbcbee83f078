import Foundation
import PostgresNIO
import Storage
import Wire

/// A deleted account's photos on PostgreSQL, and what the store holds.
extension PostgresMediaStore {
    // MARK: A deleted account

    func erase(_ user: UInt64, traces: [String]) async throws -> Int {
        try await database.write { connection in
            try await self.lockOwner(user, on: connection)
            let owner = Int64(user)
            var erased = 0
            var ids: [String] = []
            for try await id in try await connection.prepared("SELECT id FROM media WHERE owner = \(owner)", logger: self.logger).decode(String.self) {
                ids.append(id)
            }
            for id in ids {
                if try await self.deleteItem(id, on: connection) != nil { erased += 1 }
            }
            for query: PostgresQuery in ["DELETE FROM uploads WHERE owner = \(owner) RETURNING 1",
                                         "DELETE FROM profile_pictures WHERE user_id = \(owner) RETURNING 1",
                                         "DELETE FROM check_in_photos WHERE user_id = \(owner) RETURNING 1"] {
                erased += try await PostgresServiceDatabase.count(connection.prepared(query, logger: self.logger))
            }
            erased += try await PostgresReplyStore.eraseReplies(connection, of: user, mentioning: traces, logger: self.logger)
            return erased
        }
    }

    /// Deleted rows stay in the table files as dead versions until a vacuum removes them.
    func scrubErased() async throws {
        try await database.read { connection in
            try await connection.query(PostgresQuery(unsafeSQL: "VACUUM \(Self.tables.joined(separator: ", "))"), logger: self.logger)
        }
    }

    func contents() async throws -> StoredContents {
        try await database.read { connection in
            var references: [String: Int] = [:]
            for try await (sha, refs) in try await connection.prepared("SELECT sha256, refs FROM blobs", logger: self.logger).decode((String, Int64).self) {
                references[sha] = Int(refs)
            }
            let counts = try await connection.prepared("SELECT COUNT(DISTINCT sha256), COUNT(DISTINCT upload_id) FROM chunks", logger: self.logger)
            for try await (photos, uploads) in counts.decode((Int64, Int64).self) {
                return StoredContents(references: references, byteCopies: Int(photos), uploadsHoldingBytes: Int(uploads))
            }
            return StoredContents(references: references, byteCopies: 0, uploadsHoldingBytes: 0)
        }
    }
}
