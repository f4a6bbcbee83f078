import Foundation
import GRDB
import Storage

/// A deleted account's photos on SQLite, and what the store holds.
extension SQLiteMediaStore {
    func erase(_ user: UInt64, traces: [String]) async throws -> Int {
        try await writing { db, released -> Int in
            var erased = 0
            for id in try String.fetchAll(db, sql: "SELECT id FROM media WHERE owner = ?", arguments: [user]) {
                try self.deleteItem(db, id, into: &released)
                erased += 1
            }
            let parts = try String.fetchAll(db, sql: "SELECT id FROM uploads WHERE owner = ? AND media_id IS NULL", arguments: [user])
            released += parts.map(self.partPath)
            for sql in ["DELETE FROM uploads WHERE owner = ?1", "DELETE FROM profile_pictures WHERE user = ?1", "DELETE FROM check_in_photos WHERE user = ?1"] {
                try db.execute(sql: sql, arguments: [user])
                erased += db.changesCount
            }
            erased += try SQLiteReplyStore.eraseReplies(db, of: user, mentioning: traces)
            return erased
        }.0
    }

    /// The rows are zeroed in the file (`secure_delete`); the WAL's older frames may still hold them.
    func scrubErased() async throws {
        try await database.truncateWAL()
    }

    func contents() async throws -> StoredContents {
        let references = try await database.read { db in
            Dictionary(uniqueKeysWithValues: try Row.fetchAll(db, sql: "SELECT sha256, refs FROM blobs") { try ($0[0] as String, $0[1] as Int) })
        }
        let fm = FileManager.default
        let blobs = (fm.enumerator(atPath: blobDirectory)?.allObjects as? [String] ?? []).filter { $0.contains("/") }
        let parts = (try? fm.contentsOfDirectory(atPath: uploadDirectory)) ?? []
        return StoredContents(references: references, byteCopies: blobs.count, uploadsHoldingBytes: parts.count)
    }
}
