import Foundation
import FriensoTesting
import GRDB
import Storage
import Testing
import Synchronization
import Wire
import FriensoProto

private struct Refused: Error, Equatable {}

/// `ServiceDatabase.write` commits the mutations waiting together in one transaction, each in a
/// savepoint: one that throws takes only its own changes back.
@Suite("storage: group commit of mutations")
struct GroupCommitTests {
    func open(_ dir: TemporaryDirectory) throws -> ServiceDatabase {
        let database = try ServiceDatabase.open("\(dir.path)/items.sqlite")
        var migrator = DatabaseMigrator()
        migrator.registerMigration("items") { db in
            try db.execute(sql: "CREATE TABLE items (id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE)")
        }
        try database.migrate(migrator)
        return database
    }

    @Test func concurrentMutations_eachCommitsOrFailsAlone_andEveryAckIsOnDisk() async throws {
        let dir = try TemporaryDirectory("frienso-group-commit")
        defer { dir.remove() }
        let database = try open(dir)
        // 200 writers at once: every fifth refuses after writing a row (the row must not stay),
        // and "dup" names collide with a unique index (a SQLite error, not the caller's throw).
        let outcomes = await withTaskGroup(of: (Int, Bool).self) { group in
            for i in 0..<200 {
                group.addTask {
                    do {
                        try await database.write { db in
                            try db.run(sql: "INSERT INTO items (name) VALUES (?)", arguments: [i % 50 == 7 ? "dup" : "item \(i)"])
                            if i % 5 == 0 { throw Refused() }
                        }
                        return (i, true)
                    } catch {
                        return (i, false)
                    }
                }
            }
            var all: [Int: Bool] = [:]
            for await (i, ok) in group { all[i] = ok }
            return all
        }
        let acknowledged = Set(outcomes.filter(\.value).keys)
        #expect(acknowledged.allSatisfy { $0 % 5 != 0 }, "a mutation that threw is never acknowledged")
        #expect(acknowledged.filter { $0 % 50 == 7 }.count == 1, "one of the colliding names wins")
        let expected: Int = 200 - 40 - 3 // outside #expect: inside it, this literal arithmetic took the type checker 2.5 s
        #expect(acknowledged.count == expected)
        // A fresh connection (the acknowledged writes were committed, not just applied in memory).
        let reopened = try ServiceDatabase.open("\(dir.path)/items.sqlite")
        let names = try await reopened.read { db in try String.fetchAll(db, sql: "SELECT name FROM items") }
        #expect(names.count == acknowledged.count)
        #expect(!names.contains("item 0") && !names.contains("item 5"), "refused mutations left nothing behind")
        let groups = database.groupCommits
        #expect(groups.mutations == 200 && groups.batches <= groups.mutations)
    }

    /// A write nobody waits for (a reply's save) is handed to the batch with a callback instead of
    /// a suspended task (issue 16, item 37): the callback runs only after the batch holding its
    /// item committed, with that item's own result, and learns of a failed batch too.
    @Test func callbacks_runAfterTheirBatchCommitted_withTheirOwnResult_orTheBatchsFailure() async throws {
        struct Broken: Error {}
        final class Committed: Sendable {
            let items = Mutex<Set<Int>>([])
            func contains(_ i: Int) -> Bool { items.withLock { $0.contains(i) } }
        }
        let committed = Committed()
        let commits = GroupCommit<Int, Int>(label: "test-callbacks") { batch in
            if batch.contains(-1) { throw Broken() }
            committed.items.withLock { $0.formUnion(batch) }
            return batch.map { $0 * 10 }
        }
        let heard = await withTaskGroup(of: [(Int, Result<Int, any Error>, Bool)].self) { group in
            for i in 0..<100 {
                group.addTask {
                    if i % 2 == 0 {
                        // Half wait as mutations do, so callbacks and continuations share batches.
                        let value = try? await commits.submit(i)
                        return [(i, value.map { .success($0) } ?? .failure(Broken()), committed.contains(i))]
                    }
                    return [await withCheckedContinuation { (done: CheckedContinuation<(Int, Result<Int, any Error>, Bool), Never>) in
                        commits.submit(i) { result in done.resume(returning: (i, result, committed.contains(i))) }
                    }]
                }
            }
            var all: [(Int, Result<Int, any Error>, Bool)] = []
            for await part in group { all += part }
            return all
        }
        #expect(heard.count == 100)
        for (i, result, wasCommitted) in heard {
            #expect((try? result.get()) == i * 10, "item \(i) got its own result")
            #expect(wasCommitted, "item \(i) heard before its batch committed")
        }
        let failed = await withCheckedContinuation { (done: CheckedContinuation<Bool, Never>) in
            commits.submit(-1) { result in done.resume(returning: (try? result.get()) == nil) }
        }
        #expect(failed, "a callback learns that its batch failed")
        #expect(commits.items.load(ordering: .relaxed) == 100, "the failed batch is not counted as committed")
    }

    /// A write nobody waits for (a reply's save) lingers: it starts no batch of its own while
    /// the linger lasts, and rides in the one the next mutation starts; alone, it is committed
    /// once the linger is over (issue 16, item 55).
    @Test func lingeringItems_rideInTheNextBatch_orCommitAloneOnceTheLingerIsOver() async throws {
        let batches = Mutex<[[Int]]>([])
        func queue(linger: Duration) -> GroupCommit<Int, Int> {
            GroupCommit<Int, Int>(label: "test-linger", linger: linger) { batch in
                batches.withLock { $0.append(batch) }
                return batch
            }
        }
        // A linger longer than the test: the save can only have gone with the mutation's batch.
        let long = queue(linger: .seconds(600))
        async let saved: Int? = withCheckedContinuation { (done: CheckedContinuation<Int?, Never>) in
            long.submit(1, lingers: true) { done.resume(returning: try? $0.get()) }
        }
        // The save is queued before the mutation: wait (bounded) until it is waiting.
        for _ in 0..<10_000 where long.waiting == 0 { await Task.yield() }
        #expect(long.waiting == 1)
        let mutation = try await long.submit(2)
        #expect(mutation == 2)
        #expect(await saved == 1)
        #expect(batches.withLock { $0 } == [[1, 2]], "one batch: the save rode with the mutation")

        // Alone, it is committed after its linger, with nobody else to start a batch.
        batches.withLock { $0 = [] }
        let short = queue(linger: .milliseconds(5))
        let alone = await withCheckedContinuation { (done: CheckedContinuation<Int?, Never>) in
            short.submit(3, lingers: true) { done.resume(returning: try? $0.get()) }
        }
        #expect(alone == 3)
        #expect(batches.withLock { $0 } == [[3]])
        // Without a linger, the flag changes nothing: it starts its batch at once.
        let none = GroupCommit<Int, Int>(label: "test-no-linger") { $0 }
        let direct = await withCheckedContinuation { (done: CheckedContinuation<Int?, Never>) in
            none.submit(4, lingers: true) { done.resume(returning: try? $0.get()) }
        }
        #expect(direct == 4)
    }

    /// A reply saved on top of its claim takes no commit of its own: it rides in the write
    /// queue's next batch, with the mutations (issue 16: saves in batches of their own were a
    /// third of the writer's commits in alerts). Fails with `FRIENSO_REPLY_SAVES=own-batches`.
    @Test func savedReplies_rideInTheMutationsBatches_andAreDurable() async throws {
        let dir = try TemporaryDirectory("frienso-reply-saves")
        defer { dir.remove() }
        let path = "\(dir.path)/items.sqlite"
        var migrator = DatabaseMigrator()
        SQLiteReplyStore.migrate(&migrator)
        migrator.registerMigration("items") { db in
            try db.execute(sql: "CREATE TABLE items (id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE)")
        }
        let database = try ServiceDatabase.open(path)
        try database.migrate(migrator)
        let replies = SQLiteReplyStore(database: database)
        func reply(_ i: Int) -> Envelope {
            Envelope(version: WireProtocol.version, kind: .reply, requestId: UInt64(i), payload: Array("reply \(i)".utf8))
        }
        await withTaskGroup(of: Void.self) { group in
            for i in 0..<40 {
                group.addTask { _ = try? await database.write { db in try db.run(sql: "INSERT INTO items (name) VALUES (?)", arguments: ["item \(i)"]) } }
                group.addTask { await replies.save("key \(i)", StoredReply(digest: UInt64(i), reply: reply(i))) }
            }
        }
        let groups = database.groupCommits
        #expect(groups.mutations == 80, "the 40 saves went through the write queue with the 40 mutations: \(groups)")
        let reopened = SQLiteReplyStore(database: try ServiceDatabase.open(path))
        for i in 0..<40 {
            let stored = await reopened.load("key \(i)")
            #expect(stored == StoredReply(digest: UInt64(i), reply: reply(i)))
        }
    }

    /// Write transactions open and commit from the statement cache (issue 16, item 52), with
    /// GRDB's rules: committed on success, nothing kept after a throw, and a transaction SQLite
    /// ended inside (as on an I/O error or a full disk) is an error, never a commit. Both the
    /// synchronous path (geo's location writer) and the write queue's batches.
    @Test func writeTransactions_commitOnSuccess_keepNothingOnAThrow_andNeverCommitAnEndedOne() async throws {
        let dir = try TemporaryDirectory("frienso-write-transactions")
        defer { dir.remove() }
        let database = try open(dir)
        /// The synchronous path (a non-escaping closure, outside any task's context).
        func writeNow(_ updates: (Database) throws -> Void) throws { try database.write(updates) }
        try writeNow { db in try db.run(sql: "INSERT INTO items (name) VALUES ('kept')") }
        #expect(throws: Refused.self) {
            try writeNow { db in
                try db.run(sql: "INSERT INTO items (name) VALUES ('thrown')")
                throw Refused()
            }
        }
        #expect(throws: StoreInvariant.self) {
            try writeNow { db in
                try db.run(sql: "INSERT INTO items (name) VALUES ('ended')")
                try db.execute(sql: "ROLLBACK") // what SQLite does by itself on some errors
            }
        }
        try await database.write { db in try db.run(sql: "INSERT INTO items (name) VALUES ('queued')") }
        await #expect(throws: Refused.self) {
            try await database.write { db in
                try db.run(sql: "INSERT INTO items (name) VALUES ('queued and thrown')")
                throw Refused()
            }
        }
        // The writer is usable after each of them, and a fresh connection sees what committed.
        try writeNow { db in try db.run(sql: "INSERT INTO items (name) VALUES ('after')") }
        let reopened = try ServiceDatabase.open("\(dir.path)/items.sqlite")
        let names = try await reopened.read { db in try String.fetchAll(db, sql: "SELECT name FROM items ORDER BY id") }
        #expect(names == ["kept", "queued", "after"])
    }
}
