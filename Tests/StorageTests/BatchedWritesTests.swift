import Dispatch
import Foundation
import FriensoTesting
import GRDB
@testable import Storage
import Synchronization
import Testing

private struct Refused: Error, Equatable {}

/// `BatchedWrites` (geo's location updates): a stream's items ride in the service database's group
/// commit beside its other mutations, one entry per batch for all the items waiting, in a savepoint
/// of their own (issue 16, item 69).
@Suite("storage: batched writes in the group commit")
struct BatchedWritesTests {
    /// `GroupCommitTests`' database (`items`), and a table for the stream's rows.
    func open(_ dir: TemporaryDirectory) throws -> ServiceDatabase {
        let database = try GroupCommitTests().open(dir)
        try database.write { db in try db.execute(sql: "CREATE TABLE fixes (id INTEGER PRIMARY KEY, value INTEGER NOT NULL)") }
        return database
    }

    /// A database, a stream on it, and its writer held by a `Blocker`.
    func blocked(_ name: String, maxBatch: Int = 4_096) async throws -> (TemporaryDirectory, ServiceDatabase, Stream, Blocker) {
        let dir = try TemporaryDirectory("frienso-batched-writes-\(name)")
        let database = try open(dir)
        return (dir, database, Stream(database, maxBatch: maxBatch), try await Blocker(database))
    }

    /// Holds the write queue's commit thread inside a mutation until `release()`, so that what is
    /// submitted meanwhile waits for the next batch, all of it together.
    final class Blocker: Sendable {
        let released = DispatchSemaphore(value: 0)
        let task: Task<Void, any Error>

        init(_ database: ServiceDatabase) async throws {
            // Waited for on the commit queue's own thread, never on one of Swift's pool (the
            // tests' tasks need those to submit).
            let state = Flag(), released = released
            task = Task {
                try await database.write { db in
                    state.started.store(true, ordering: .releasing)
                    _ = released.wait(timeout: .now() + 30)
                    try db.run(sql: "INSERT INTO items (name) VALUES ('blocker')")
                }
            }
            try await eventually("the blocking mutation runs") { state.started.load(ordering: .acquiring) }
        }

        final class Flag: Sendable { let started = Atomic<Bool>(false) }

        func release() async throws {
            released.signal()
            try await task.value
        }
    }

    /// Writes each item as a row of `fixes` and answers its double; counts the batches it saw and
    /// whether `committed` ran before each answer.
    final class Stream: Sendable {
        final class Seen: Sendable {
            let batches = Mutex<[[Int]]>([])
            let committed = Mutex<Set<Int>>([])
        }
        let seen = Seen()
        let writes: BatchedWrites<Int, Int>

        init(_ database: ServiceDatabase, maxBatch: Int = 4_096) {
            let seen = seen
            writes = database.batchedWrites(label: "test", maxBatch: maxBatch) { items, db in
                seen.batches.withLock { $0.append(items) }
                for item in items { try db.run(sql: "INSERT INTO fixes (value) VALUES (?)", arguments: [item]) }
                if items.contains(13) { throw Refused() }
                return (items.map { $0 * 2 }, { seen.committed.withLock { $0.formUnion(items) } })
            }
        }

        /// Submits `items` concurrently. - Returns: each item's answer (or error), and whether its
        /// batch's `committed` had run when it was answered.
        func submitAll(_ items: [Int]) -> Task<[Int: (Result<Int, any Error>, Bool)], Never> {
            Task {
                await withTaskGroup(of: (Int, Result<Int, any Error>, Bool).self) { group in
                    for item in items {
                        group.addTask {
                            let result: Result<Int, any Error>
                            do { result = .success(try await self.writes.submit(item)) } catch { result = .failure(error) }
                            return (item, result, self.seen.committed.withLock { $0.contains(item) })
                        }
                    }
                    var all: [Int: (Result<Int, any Error>, Bool)] = [:]
                    for await (item, result, seen) in group { all[item] = (result, seen) }
                    return all
                }
            }
        }
    }

    @Test func itemsWaitingTogether_commitInOneBatch_withTheQueuesMutations_andAreDurable() async throws {
        let (dir, database, stream, blocker) = try await blocked("together")
        defer { dir.remove() }
        let before = database.groupCommits.batches
        let answers = stream.submitAll(Array(101...150)) // 13 would make the write throw
        let mutations = Task {
            try await withThrowingTaskGroup(of: Void.self) { group in
                for i in 0..<5 { group.addTask { try await database.write { db in try db.run(sql: "INSERT INTO items (name) VALUES (?)", arguments: ["m\(i)"]) } } }
                try await group.waitForAll()
            }
        }
        // Fifty items and one entry standing for them, and the five mutations, wait together.
        try await eventually("everything waits for the writer") { stream.writes.waiting == 50 && database.writes.waiting == 6 }
        try await blocker.release()
        try await mutations.value
        let all = await answers.value
        #expect(all.count == 50)
        for (item, (result, committedFirst)) in all {
            #expect((try? result.get()) == item * 2, "item \(item) is answered with its own output: \(result)")
            #expect(committedFirst, "item \(item)'s batch had run `committed` before the answer")
        }
        #expect(stream.seen.batches.withLock { $0.map(\.count) } == [50], "one batch for the fifty items")
        #expect(database.groupCommits.batches == before + 2, "the blocker's commit, then one for the items and the mutations")
        #expect(stream.writes.batches.load(ordering: .relaxed) == 1 && stream.writes.items.load(ordering: .relaxed) == 50)
        // What was acknowledged is in the file, seen from a fresh connection.
        let reopened = try ServiceDatabase.open("\(dir.path)/items.sqlite")
        let (fixes, items) = try await reopened.read { db in
            (try Int.fetchAll(db, sql: "SELECT value FROM fixes ORDER BY value"), try Int.fetchOne(db, sql: "SELECT count(*) FROM items") ?? 0)
        }
        #expect(fixes == Array(101...150))
        #expect(items == 6)
        // Alone, an item still commits (the stream schedules a new entry after each batch).
        #expect(try await stream.writes.submit(60) == 120)
    }

    @Test func aBatchWhoseWriteThrows_failsItsItemsOnly_andLeavesNoneOfItsRows() async throws {
        let (dir, database, stream, blocker) = try await blocked("throw")
        defer { dir.remove() }
        let answers = stream.submitAll([11, 12, 13])
        let mutation = Task { try await database.write { db in try db.run(sql: "INSERT INTO items (name) VALUES ('beside')") } }
        try await eventually("the items and the mutation wait") { stream.writes.waiting == 3 && database.writes.waiting == 2 }
        try await blocker.release()
        try await mutation.value
        for (item, (result, committed)) in await answers.value {
            #expect(throws: Refused.self, "item \(item) fails with its batch's error") { try result.get() }
            #expect(!committed)
        }
        #expect(try await stream.writes.submit(14) == 28, "the next batch commits")
        let (fixes, names) = try await database.read { db in
            (try Int.fetchAll(db, sql: "SELECT value FROM fixes ORDER BY value"), try String.fetchAll(db, sql: "SELECT name FROM items ORDER BY id"))
        }
        #expect(fixes == [14], "the failed batch's rows were rolled back with its savepoint")
        #expect(names == ["blocker", "beside"], "the mutation beside it committed")
    }

    @Test func moreThanMaxBatchWaiting_areWrittenInBatchesOfMaxBatch_inOrder() async throws {
        let (dir, _, stream, blocker) = try await blocked("max", maxBatch: 4)
        defer { dir.remove() }
        // Set once the submitting task saw all ten wait. The blocker is released only then: had
        // this test also watched the count itself, it could release the blocker the moment the
        // tenth item arrived, before the submitting task looked, and the batches would have taken
        // the items away under that task's eyes (it then waited for "item 10" in vain).
        let allWaiting = Atomic<Bool>(false)
        let answers = Task { () -> [Int] in
            var all: [Int] = []
            // Submitted in order, one after another's enqueue, so the batches' order is known.
            try await withThrowingTaskGroup(of: Int.self) { group in
                for item in 1...10 {
                    group.addTask { try await stream.writes.submit(item) }
                    try await eventually("item \(item) waits") { stream.writes.waiting == item }
                }
                allWaiting.store(true, ordering: .releasing)
                for try await output in group { all.append(output) }
            }
            return all.sorted()
        }
        try await eventually("ten items wait") { allWaiting.load(ordering: .acquiring) }
        try await blocker.release()
        #expect(try await answers.value == (1...10).map { $0 * 2 })
        #expect(stream.seen.batches.withLock { $0 } == [[1, 2, 3, 4], [5, 6, 7, 8], [9, 10]])
    }

    /// A batch that fails before it reaches the stream's entry (an earlier mutation ended its
    /// transaction) fails the items that entry stood for, and the stream keeps working.
    @Test func aBatchEndedBeforeTheEntry_failsTheWaitingItems_andTheNextOnesCommit() async throws {
        let (dir, database, stream, blocker) = try await blocked("ended")
        defer { dir.remove() }
        let ender = Task {
            try await database.write { db in
                try db.run(sql: "INSERT INTO items (name) VALUES ('ended')")
                try db.execute(sql: "ROLLBACK") // what SQLite does by itself on some errors
            }
        }
        try await eventually("the ending mutation waits first") { database.writes.waiting == 1 }
        let answers = stream.submitAll([21, 22])
        try await eventually("the items wait behind it") { stream.writes.waiting == 2 && database.writes.waiting == 2 }
        try await blocker.release()
        await #expect(throws: (any Error).self) { try await ender.value }
        for (item, (result, _)) in await answers.value {
            #expect(throws: StoreInvariant.self, "item \(item) fails with the batch") { try result.get() }
        }
        #expect(stream.writes.waiting == 0)
        #expect(try await stream.writes.submit(23) == 46, "a later item schedules a new entry and commits")
        let fixes = try await database.read { db in try Int.fetchAll(db, sql: "SELECT value FROM fixes") }
        #expect(fixes == [23])
    }
}
