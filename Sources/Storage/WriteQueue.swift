public import GRDB

/// Group commit for a service's mutations: every `ServiceDatabase.write` made while a commit is
/// under way waits, and the next batch runs them all in one transaction, each in a savepoint of
/// its own, then commits once (one fsync) and answers them all. A mutation that throws rolls
/// back its savepoint only and gets its own error; the others commit. Nobody is answered
/// before the commit that makes their write durable. Alone, a write costs what it did: a batch
/// of one. The batching itself is `GroupCommit`'s.
@usableFromInline
final class WriteQueue: Sendable {
    /// One caller's mutation: runs in its savepoint and keeps its own outcome (`OutcomeBox`).
    @usableFromInline struct Pending: @unchecked Sendable {
        @usableFromInline var run: (Database) -> Void
        /// After the batch committed, in batch order (events that follow commit order).
        @usableFromInline var committed: () -> Void = {}
        /// Waits for a batch a mutation starts, up to the queue's linger (a reply's save).
        @usableFromInline var lingers = false

        @usableFromInline init(run: @escaping (Database) -> Void, committed: @escaping () -> Void = {}, lingers: Bool = false) {
            self.run = run
            self.committed = committed
            self.lingers = lingers
        }
    }

    private let commits: GroupCommit<Pending, Void>

    /// Batches committed, and the mutations in them (for the benchmark).
    var counts: (batches: Int, mutations: Int) {
        (commits.batches.load(ordering: .relaxed), commits.items.load(ordering: .relaxed))
    }

    /// Entries waiting for the next batch (tests).
    var waiting: Int { commits.waiting }

    /// - Parameter linger: how long a write that `lingers` waits for a mutation's batch.
    init(pool: DatabasePool, linger: Duration?) {
        commits = GroupCommit(label: "service-database-writes", maxBatch: 256, linger: linger) { batch in
            try pool.writeWithoutTransaction { db in
                try CachedTransactions.transaction(db) {
                    for pending in batch {
                        pending.run(db)
                        // Some failures (I/O, disk full) make SQLite roll the whole transaction
                        // back: what the batch did so far is gone, so it fails as a whole.
                        guard db.isInsideTransaction else {
                            throw StoreInvariant("a write failed and SQLite ended the transaction: nothing in this batch was committed")
                        }
                    }
                    return .commit
                }
            }
            for pending in batch { pending.committed() }
            return batch.map { _ in () }
        }
    }

    /// Returns once the batch holding `pending` committed; throws when the batch failed as a whole.
    @usableFromInline
    func submit(_ pending: Pending) async throws {
        try await commits.submit(pending)
    }

    /// Queues `pending` without waiting: `done` runs on the commit's queue after its batch.
    @usableFromInline
    func submit(_ pending: Pending, then done: @escaping @Sendable (Result<Void, any Error>) -> Void) {
        commits.submit(pending, lingers: pending.lingers, then: done)
    }
}

/// A mutation's outcome, kept between its savepoint and the batch's commit.
@usableFromInline
final class OutcomeBox<T: Sendable>: @unchecked Sendable {
    @usableFromInline var outcome: Result<T, any Error>?
    @usableFromInline init() {}
}
