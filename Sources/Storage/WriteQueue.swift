import Dispatch
import GRDB
import Synchronization

/// Group commit for a service's mutations: every `ServiceDatabase.write` made while a commit is
/// under way waits, and the next batch runs them all in one transaction, each in a savepoint of
/// its own, then commits once (one fsync) and answers them all. A mutation that throws rolls
/// back its savepoint only and gets its own error; the others commit. Nobody is answered
/// before the commit that makes their write durable.
///
/// Under load this turns one fsync per mutation into one per batch (alerts committed each
/// helpNow on its own; geo's location updates were the only batched writes). Alone, a write
/// costs what it did: a batch of one.
final class WriteQueue: Sendable {
    /// One caller's mutation: `run` executes it in its savepoint and keeps its outcome;
    /// `finish` answers the caller once the batch committed (nil) or failed as a whole.
    struct Pending: @unchecked Sendable {
        var run: (Database) -> Void
        var finish: ((any Error)?) -> Void
    }

    private struct State {
        var waiting: [Pending] = []
        var draining = false
    }

    private let state = Mutex(State())
    private let queue = DispatchQueue(label: "service-database-writes")
    private let pool: DatabasePool
    private let maxBatch = 256
    /// Batches and mutations committed (for the benchmark).
    let batches = Atomic<Int>(0), mutations = Atomic<Int>(0)

    init(pool: DatabasePool) {
        self.pool = pool
    }

    func submit(_ pending: Pending) {
        let start = state.withLock { s -> Bool in
            s.waiting.append(pending)
            guard !s.draining else { return false }
            s.draining = true
            return true
        }
        if start { queue.async { self.drain() } }
    }

    private func drain() {
        while true {
            let batch = state.withLock { s -> [Pending] in
                let take = Array(s.waiting.prefix(maxBatch))
                s.waiting.removeFirst(take.count)
                if take.isEmpty { s.draining = false }
                return take
            }
            if batch.isEmpty { return }
            do {
                try pool.writeWithoutTransaction { db in
                    try db.inTransaction(.immediate) {
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
                batches.add(1, ordering: .relaxed)
                mutations.add(batch.count, ordering: .relaxed)
                for pending in batch { pending.finish(nil) }
            } catch {
                for pending in batch { pending.finish(error) }
            }
        }
    }
}

/// A mutation's outcome, kept between its savepoint and the batch's commit.
final class OutcomeBox<T: Sendable>: @unchecked Sendable {
    var outcome: Result<T, any Error>?
}
