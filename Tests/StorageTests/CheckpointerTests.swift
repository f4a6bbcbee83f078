import Foundation
import FriensoTesting
import GRDB
@testable import Storage
import Testing

/// The WAL is checkpointed by a connection of its own, never inside a commit; nothing is lost.
@Suite("storage: WAL checkpoints off the commit path")
struct CheckpointerTests {
    @Test func aGrowingWAL_isCheckpointedInTheBackground_andEveryRowStays() async throws {
        let dir = try TemporaryDirectory("frienso-checkpoint")
        defer { dir.remove() }
        let path = "\(dir.path)/blobs.sqlite"
        let database = try ServiceDatabase.open(path)
        var migrator = DatabaseMigrator()
        migrator.registerMigration("blobs") { db in try db.execute(sql: "CREATE TABLE blobs (id INTEGER PRIMARY KEY, data BLOB NOT NULL)") }
        try database.migrate(migrator)
        #expect(try await database.read { db in try Int.fetchOne(db, sql: "PRAGMA wal_autocheckpoint") } == 0,
                "the hook replaced SQLite's checkpoint inside the commit")
        // Statement journals (a savepoint per mutation in a group commit) stay in memory.
        #expect(try await database.read { db in try Int.fetchOne(db, sql: "PRAGMA temp_store") } == 2)
        #expect(try await database.write { db in try Int.fetchOne(db, sql: "PRAGMA temp_store") } == 2)
        // Every commit is fsynced before it is acknowledged.
        #expect(try await database.write { db in try Int.fetchOne(db, sql: "PRAGMA synchronous") } == 2)
        #expect(try Self.synchronousOfTheBlockingWritePath(database) == 2)
        // About 3,000 pages of WAL: past the threshold a few times over.
        for batch in 0..<30 {
            try await database.write { db in
                for i in 0..<50 {
                    try db.run(sql: "INSERT INTO blobs (id, data) VALUES (?, ?)", arguments: [batch * 50 + i, Data(repeating: UInt8(i), count: 8_000)])
                }
            }
        }
        try await eventually("a checkpoint ran") { database.checkpoints > 0 }
        // The database file holds the rows now, not only the WAL: a checkpoint of our own finds
        // little or nothing left to copy, and a fresh connection reads everything.
        let fresh = try DatabaseQueue(path: path)
        #expect(try await fresh.read { db in try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM blobs") } == 1_500)
        #expect(try await fresh.read { db in try Int.fetchOne(db, sql: "SELECT SUM(length(data)) FROM blobs") } == 12_000_000)
        let size = try FileManager.default.attributesOfItem(atPath: path)[.size] as? Int ?? 0
        #expect(size > 8_000_000, "the pages were copied into the database file (\(size) bytes)")
    }

    /// Geo's group commit writes through the blocking path.
    static func synchronousOfTheBlockingWritePath(_ database: ServiceDatabase) throws -> Int? {
        try database.write { db in try Int.fetchOne(db, sql: "PRAGMA synchronous") }
    }

    /// A checkpoint is asked for once per 1,000 new WAL frames, not after every commit while the
    /// WAL stays long (SQLite starts it over only when no reader holds its old frames).
    @Test func aCheckpointIsAskedForOncePerThousandNewFrames_andAgainAfterTheWALStartsOver() {
        let signal = Checkpointer.Signal()
        let asked = [10, 999, 1_000, 1_001, 1_500, 1_999, 2_000, 2_400, 40, 900, 1_000, 1_999, 2_000].map(signal.due)
        #expect(asked == [false, false, true, false, false, false, true, false, false, false, true, false, true])
    }
}
