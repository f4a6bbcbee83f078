import Foundation
import GRDB
import Storage
import Testing

/// SQLite's process-wide settings are made before anything opens a connection (a C constructor),
/// so this test bundle runs in the mode the services run in, and its storage tests exercise it.
@Suite("storage: SQLite's process-wide settings")
struct SQLiteSettingsTests {
    @Test func theProcessRunsInMultiThreadMode_unlessTheEnvironmentKeepsTheDefaults() throws {
        let kept = ProcessInfo.processInfo.environment["FRIENSO_SQLITE_MUTEXES"] == "serialized"
        #expect(SQLiteSettings.current == (kept ? .keptByEnvironment : .multiThread))
    }

    /// Connections used from many threads, one thread at a time each (as GRDB's pool hands
    /// them out), read and write correctly without SQLite's per-connection mutexes.
    @Test func aPoolUsedFromManyThreads_readsWhatItsWriterCommitted() async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("sqlite-settings-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: folder) }
        let database = try ServiceDatabase.open(folder.appendingPathComponent("t.sqlite").path)
        try await database.write { db in try db.execute(sql: "CREATE TABLE t (id INTEGER PRIMARY KEY, v INTEGER NOT NULL)") }
        try await withThrowingTaskGroup(of: Void.self) { group in
            for writer in 0..<8 {
                group.addTask {
                    for n in 0..<50 {
                        try await database.write { db in try db.run(sql: "INSERT INTO t (v) VALUES (?)", binding: writer * 1_000 + n) }
                    }
                }
            }
            for _ in 0..<8 {
                group.addTask {
                    for _ in 0..<50 {
                        let count = try await database.read { db in try Row.fetchOne(db, cached: "SELECT count(*) FROM t", arguments: []) { try $0[0] as Int } }
                        #expect((count ?? -1) >= 0)
                    }
                }
            }
            try await group.waitForAll()
        }
        let rows = try await database.read { db in try Row.fetchOne(db, cached: "SELECT count(*), sum(v) FROM t", arguments: []) { row in (try row[0] as Int, try row[1] as Int) } }
        let expected = (0..<8).reduce(0) { sum, w in sum + (0..<50).reduce(0) { $0 + w * 1_000 + $1 } }
        #expect(rows?.0 == 400)
        #expect(rows?.1 == expected)
    }
}
