import Foundation
import FriensoTesting
import GRDB
@testable import Storage
import Synchronization
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
        // A WAL a burst made larger is cut back to 64 MiB when the log starts over.
        #expect(try await database.write { db in try Int.fetchOne(db, sql: "PRAGMA journal_size_limit") } == 67_108_864)
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

    /// Under a steady load (commits back to back, a reader always on the newest frames) a
    /// passive checkpoint never catches up and SQLite never starts the log over: the WAL grew
    /// without bound (30–40 MB a second in `stack`). Past `walRestartPages` the checkpointer
    /// restarts it on the writer, so the file stays bounded. Fails with `FRIENSO_WAL_RESTART=off`.
    @Test func underSteadyReadsAndWrites_theWALIsRestarted_andStaysBounded() async throws {
        let dir = try TemporaryDirectory("frienso-wal-restart")
        defer { dir.remove() }
        let path = "\(dir.path)/blobs.sqlite"
        let database = try ServiceDatabase.open(path, walRestartPages: 1_500)
        var migrator = DatabaseMigrator()
        migrator.registerMigration("blobs") { db in try db.execute(sql: "CREATE TABLE blobs (id INTEGER PRIMARY KEY, data BLOB NOT NULL)") }
        try database.migrate(migrator)
        // A reader on a thread of its own (not the cooperative pool the test's writes need),
        // reading back to back: some read transaction keeps landing on the newest frames.
        let reader = SteadyReader(database)
        defer { reader.stop() }
        // 500 rows of two pages each, then each rewritten 32 times: about 32,000 WAL frames in
        // all (20 times the restart threshold) over a 4 MB table.
        for batch in 0..<10 {
            try await database.write { db in
                for i in 0..<50 {
                    try db.run(sql: "INSERT INTO blobs (id, data) VALUES (?, ?)", arguments: [batch * 50 + i, Data(repeating: 0, count: 8_000)])
                }
            }
        }
        var largest = 0
        for batch in 0..<320 {
            try await database.write { db in
                for i in 0..<50 {
                    try db.run(sql: "UPDATE blobs SET data = ? WHERE id = ?", arguments: [Data(repeating: UInt8(batch % 256), count: 8_000), (batch % 10) * 50 + i])
                }
            }
            largest = max(largest, (try? FileManager.default.attributesOfItem(atPath: "\(path)-wal")[.size] as? Int) ?? 0)
        }
        #expect(reader.stop() > 0, "the reader read")
        #expect(database.checkpointer.restartsRun.load(ordering: .relaxed) >= 2, "the WAL was restarted, again and again")
        // A restart is asked for past 1,500 frames, by a checkpoint asked for every 1,000, and
        // the writes go on while it waits its turn: 2,200–5,100 frames on two busy cores. Well
        // under 12,000 frames of 4 KiB (about 32,000 without restarts).
        #expect(largest < 12_000 * 4_120, "the WAL reached \(largest) bytes")
        let fresh = try DatabaseQueue(path: path)
        #expect(try await fresh.read { db in try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM blobs") } == 500)
        // Every row holds its last rewrite: row r was last written by batch 310 + r / 50.
        let rows = try fresh.read { db in try Row.fetchAll(db, sql: "SELECT id, data FROM blobs") }
        let stale = rows.filter { row in
            let id: Int = row["id"], data: Data = row["data"]
            return data != Data(repeating: UInt8((310 + id / 50) % 256), count: 8_000)
        }
        #expect(stale.isEmpty, "rows \(stale.prefix(5).map { $0["id"] as Int }) lost their last rewrite")
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

/// Reads back to back on a thread of its own until stopped.
private final class SteadyReader: Sendable {
    private let running = Atomic<Bool>(true)
    private let reads = Atomic<Int>(0)
    private let finished = DispatchSemaphore(value: 0)

    init(_ database: ServiceDatabase) {
        let thread = Thread { [self] in
            while running.load(ordering: .relaxed) {
                _ = try? database.read { db in try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM blobs") }
                reads.add(1, ordering: .relaxed)
            }
            finished.signal()
        }
        thread.start()
    }

    /// Stops the thread and waits for it (once); returns the reads made.
    @discardableResult func stop() -> Int {
        if running.exchange(false, ordering: .relaxed) { finished.wait() }
        return reads.load(ordering: .relaxed)
    }
}
