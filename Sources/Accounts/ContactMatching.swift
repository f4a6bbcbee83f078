import Foundation
import GRDB
import Identity
import Storage

/// Contact matching (recommendations) and linked external accounts: their storage.
/// A user a contact list matched, and by what.
struct ContactMatch: Sendable {
    var user: UserRecord
    var phone = false
    var email = false
    var external = false
}

/// Matches gathered by either engine: by a phone or email hash among `wanted`, or by a linked id.
struct ContactMatches {
    private var found: [UInt64: ContactMatch] = [:]
    let wanted: Set<Data>

    init(hashes: [[UInt8]]) { wanted = Set(hashes.map { Data($0) }) }

    mutating func add(_ user: UserRecord, phoneHash: Data?, emailHash: Data?) {
        var entry = found[user.id] ?? ContactMatch(user: user)
        if let phoneHash, wanted.contains(phoneHash) { entry.phone = true }
        if let emailHash, wanted.contains(emailHash) { entry.email = true }
        found[user.id] = entry
    }

    mutating func addLinked(_ user: UserRecord) {
        var entry = found[user.id] ?? ContactMatch(user: user)
        entry.external = true
        found[user.id] = entry
    }

    /// By user id.
    var matches: [ContactMatch] { found.values.sorted { $0.user.id < $1.user.id } }
}

extension SQLiteAccountsStore {

    /// Users whose phone or email hash is among `hashes`, or who linked one of `externalIDs`; by id.
    func matchContacts(hashes: [[UInt8]], externalIDs: [ExternalID]) async throws -> [ContactMatch] {
        try await database.read { db in
            var found = ContactMatches(hashes: hashes)
            for chunk in stride(from: 0, to: hashes.count, by: 400) {
                let part = hashes[chunk..<min(chunk + 400, hashes.count)].map { Data($0) }
                let marks = Array(repeating: "?", count: part.count).joined(separator: ",")
                let rows = try Row.fetchAll(db, sql: "SELECT \(UserRecord.columns), phone_sha256, email_sha256 FROM users WHERE phone_sha256 IN (\(marks)) OR email_sha256 IN (\(marks))",
                                            arguments: StatementArguments(part + part)) { row in try (UserRecord(row: row), row[9] as Data?, row[10] as Data?) }
                for (user, phoneHash, emailHash) in rows { found.add(user, phoneHash: phoneHash, emailHash: emailHash) }
            }
            for link in externalIDs {
                guard let user = try Row.fetchOne(db, cached: """
                    SELECT \(UserRecord.columns) FROM external_ids JOIN users ON users.id = external_ids.user_id
                    WHERE provider = ? AND external_id = ?
                    """, binding: link.provider, link.id, as: UserRecord.init(row:)) else { continue }
                found.addLinked(user)
            }
            return found.matches
        }
    }

    /// Links an external id to `userID`. - Throws: ALREADY_EXISTS when another user linked it.
    func link(userID: UInt64, _ link: ExternalID, now: Int64) async throws -> [ExternalID] {
        try await database.write { db in
            // The caller's account may be gone (found by the fuzz tests: the insert below then
            // failed its foreign key and answered INTERNAL).
            guard try Int.fetchOne(db, cached: "SELECT 1 FROM users WHERE id = ?", arguments: [userID]) != nil else {
                throw AccountRefusal.noAccount(userID)
            }
            if let owner = try UInt64.fetchOne(db, cached: "SELECT user_id FROM external_ids WHERE provider = ? AND external_id = ?",
                                               arguments: [link.provider, link.id]), owner != userID {
                throw AccountRefusal.linkedElsewhere(provider: link.provider, id: link.id)
            }
            try db.run(sql: "INSERT OR IGNORE INTO external_ids (provider, external_id, user_id, linked_at_ms) VALUES (?, ?, ?, ?)",
                           arguments: [link.provider, link.id, userID, now])
            return try Self.links(db, userID: userID)
        }
    }

    /// - Throws: NOT_FOUND when the caller has not linked it.
    func unlink(userID: UInt64, _ link: ExternalID) async throws -> [ExternalID] {
        try await database.write { db in
            try db.run(sql: "DELETE FROM external_ids WHERE provider = ? AND external_id = ? AND user_id = ?",
                           arguments: [link.provider, link.id, userID])
            guard db.changesCount == 1 else { throw AccountRefusal.notLinked(provider: link.provider, id: link.id) }
            return try Self.links(db, userID: userID)
        }
    }

    private static func links(_ db: Database, userID: UInt64) throws -> [ExternalID] {
        try Row.fetchAll(db, cached: "SELECT provider, external_id FROM external_ids WHERE user_id = ? ORDER BY provider, external_id",
                         binding: userID) { try ExternalID(provider: $0["provider"], id: $0["external_id"]) }
    }

    /// - Throws: ALREADY_EXISTS naming the field that is taken.
}
