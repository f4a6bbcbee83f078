import Dispatch
import Foundation
import FriensoTesting
import GRDB
@testable import Storage
import Synchronization
import Testing

private struct Refused: Error {}

private final class Releases: Sendable {
    let count = Atomic<Int>(0)
}

private final class Tracked: Sendable {
    let v: Int
    let releases: Releases
    init(v: Int, releases: Releases) { self.v = v; self.releases = releases }
    deinit { releases.count.add(1, ordering: .relaxed) }
}

/// `ServiceDatabase.read`'s synchronous overload (an async caller would get the async one).
private func readSynchronously(_ database: ServiceDatabase) throws -> Int? {
    try database.read { db in try Int.fetchOne(db, sql: "SELECT v FROM t") }
}

/// `InPlaceReaders`: a request's reads on read-only connections of their own, kept idle between
/// reads, instead of GRDB's pool (issue 16, item 75).
@Suite("storage: reads in place on connections of their own")
struct InPlaceReadersTests {
    func open(_ dir: TemporaryDirectory) throws -> ServiceDatabase {
        let database = try ServiceDatabase.open("\(dir.path)/reads.sqlite")
        try database.write { db in try db.execute(sql: "CREATE TABLE t (id INTEGER PRIMARY KEY, v INTEGER NOT NULL)") }
        return database
    }

    @Test func aRead_seesEveryCommitBeforeIt_onOneConnectionReused() async throws {
        let dir = try TemporaryDirectory("readers")
        defer { dir.remove() }
        let database = try open(dir)
        for i in 1...40 {
            try await database.write { db in try db.execute(sql: "INSERT INTO t (id, v) VALUES (?, ?)", arguments: [i, i * 10]) }
            let sum = try await database.read { db in try Int.fetchOne(db, sql: "SELECT sum(v) FROM t") }
            #expect(sum == 10 * i * (i + 1) / 2, "read \(i) sees the commit before it")
        }
        #expect(database.readers?.opened == 1, "one connection, kept between reads")
    }

    @Test func aReadThatThrows_leavesNoTransactionOpen_andItsConnectionServesTheNext() async throws {
        let dir = try TemporaryDirectory("readers")
        defer { dir.remove() }
        let database = try open(dir)
        await #expect(throws: Refused.self) {
            _ = try await database.read { db -> Int in
                _ = try Int.fetchOne(db, sql: "SELECT count(*) FROM t")
                throw Refused()
            }
        }
        try await database.write { db in try db.execute(sql: "INSERT INTO t (id, v) VALUES (1, 7)") }
        #expect(try await database.read { db in try Int.fetchOne(db, sql: "SELECT v FROM t") } == 7,
                "not stuck in the failed read's snapshot")
        #expect(database.readers?.opened == 1)
    }

    /// A read is one transaction (its `BEGIN` and `COMMIT` kept on the connection and stepped by
    /// hand: item 118): a commit made between two of its statements is not seen by the second,
    /// and the next read sees it. Without the transaction each statement would see the latest.
    @Test func aRead_isOneSnapshot_whileAWriteCommitsInTheMiddle() async throws {
        let dir = try TemporaryDirectory("readers")
        defer { dir.remove() }
        let database = try open(dir)
        try await database.write { db in try db.execute(sql: "INSERT INTO t (id, v) VALUES (1, 1)") }
        for round in 2...4 {
            let (before, after) = try await database.read { db -> (Int?, Int?) in
                let before = try Int.fetchOne(db, sql: "SELECT count(*) FROM t")
                try database.write { db in try db.execute(sql: "INSERT INTO t (id, v) VALUES (?, 1)", arguments: [round]) }
                return (before, try Int.fetchOne(db, sql: "SELECT count(*) FROM t"))
            }
            #expect(before == round - 1 && after == round - 1, "round \(round): \(String(describing: before)), \(String(describing: after))")
        }
        #expect(try await database.read { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM t") } == 4)
        #expect(database.readers?.opened == 1)
    }

    /// A read's result comes back whole whatever its type (item 115: made in a slot of
    /// `readHere`'s own, moved out): an object, released exactly once when the caller drops it; an
    /// optional that is nil; a value larger than a few words; by the synchronous read too.
    @Test func aReadsResult_ofAnyType_isMovedOutOnce() async throws {
        let dir = try TemporaryDirectory("readers")
        defer { dir.remove() }
        let database = try open(dir)
        try await database.write { db in try db.execute(sql: "INSERT INTO t (id, v) VALUES (1, 5)") }
        let releases = Releases()
        do {
            let object = try await database.read { db in Tracked(v: try Int.fetchOne(db, sql: "SELECT v FROM t") ?? -1, releases: releases) }
            #expect(object.v == 5)
            #expect(releases.count.load(ordering: .relaxed) == 0, "alive while the caller holds it")
        }
        #expect(releases.count.load(ordering: .relaxed) == 1, "released once")
        let none = try await database.read { db in try Int.fetchOne(db, sql: "SELECT v FROM t WHERE id = 2") }
        #expect(none == nil)
        let wide = try await database.read { db in
            (try String.fetchAll(db, sql: "SELECT 'x' || v FROM t"), 1, 2.5, "y", [UInt8](repeating: 7, count: 3), Optional(9))
        }
        #expect(wide.0 == ["x5"] && wide.1 == 1 && wide.2 == 2.5 && wide.3 == "y" && wide.4 == [7, 7, 7] && wide.5 == 9)
        #expect(try readSynchronously(database) == 5, "the synchronous read too")
    }

    /// With every allowed connection in a read, the next read is not held up: GRDB's pool serves it.
    @Test func withEveryConnectionBusy_aReadGoesToThePool() async throws {
        let dir = try TemporaryDirectory("readers")
        defer { dir.remove() }
        let database = try open(dir)
        try await database.write { db in try db.execute(sql: "INSERT INTO t (id, v) VALUES (1, 5)") }
        var configuration = Configuration()
        configuration.busyMode = .timeout(5)
        let readers = InPlaceReaders(path: "\(dir.path)/reads.sqlite", configuration: configuration, limit: 1)
        // One read held open on a thread of its own (never on the test's cooperative threads).
        let inside = Atomic<Bool>(false), release = DispatchSemaphore(value: 0), done = Atomic<Bool>(false)
        let holder = Thread {
            _ = try? readers.read { db -> Int? in
                inside.store(true, ordering: .releasing)
                release.wait()
                return try Int.fetchOne(db, sql: "SELECT v FROM t")
            }
            done.store(true, ordering: .releasing)
        }
        holder.start()
        try await eventually("the first read holds the only connection") { inside.load(ordering: .acquiring) }
        #expect(try readers.read { db in try Int.fetchOne(db, sql: "SELECT v FROM t") } == nil, "none idle, none more allowed")
        #expect(readers.opened == 1)
        release.signal()
        try await eventually("the held read ends") { done.load(ordering: .acquiring) }
        #expect(try readers.read { db in try Int.fetchOne(db, sql: "SELECT v FROM t") } == .some(5), "its connection is idle again")
        readers.close()
        #expect(readers.opened == 0)
    }

    /// Idle connections hold no snapshot: the WAL can be cut to nothing after reads (an erasure
    /// relies on it).
    @Test func idleConnections_leaveTheWALFreeToTruncate() async throws {
        let dir = try TemporaryDirectory("readers")
        defer { dir.remove() }
        let database = try open(dir)
        for i in 1...20 {
            try await database.write { db in try db.execute(sql: "INSERT INTO t (id, v) VALUES (?, ?)", arguments: [i, i]) }
            _ = try await database.read { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM t") }
        }
        try await database.truncateWAL()
        let size = try FileManager.default.attributesOfItem(atPath: "\(dir.path)/reads.sqlite-wal")[.size] as? Int
        #expect(size == 0)
        #expect(try await database.read { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM t") } == 20)
    }
}
