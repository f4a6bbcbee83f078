import CoreMetrics
import Wire
public import GRDB
public import Synchronization

/// Writes of one kind that a service makes in batches of its own (geo's location updates: the
/// batch decides which fixes become the latest and writes their history rows together), riding
/// in the service database's group commit beside its other mutations: one transaction and one
/// fsync for both, where a queue of their own took a commit of its own and waited for the
/// database's writer between the other queue's commits (`docs/benchmarks.md`, issue 16, item 69).
///
/// Items wait here; while any wait, one entry of the write queue stands for them all. When the
/// write queue's batch reaches that entry, it takes every item waiting at that moment (up to
/// `maxBatch`) and hands them to `write`, in a savepoint of their own: a throw there rolls back
/// those items only and fails each with the error, and the queue's other mutations commit. Items
/// that arrive meanwhile wait for the next batch. Nobody is answered before the commit that makes
/// their item durable; `write`'s `committed` part runs after that commit, in commit order, before
/// the answers.
///
/// Its methods are inlinable, so that they are specialized for the service's item and output
/// types in the service's module: unspecialized, each item's append, answer and `Result` asked
/// the Swift runtime for generic metadata (about 3,000 instructions an update in geo;
/// `docs/benchmarks.md`, issue 16, item 135).
public final class BatchedWrites<Item: Sendable, Output: Sendable>: Sendable {
    /// Writes `items` inside the batch's transaction. - Returns: one output per item, in order,
    /// and what to do once they committed (on the commit queue: keep it short).
    public typealias Write = @Sendable (_ items: [Item], _ db: Database) throws -> (outputs: [Output], committed: @Sendable () -> Void)

    @usableFromInline typealias Answer = @Sendable (Result<Output, any Error>) -> Void

    @usableFromInline struct State {
        @usableFromInline var items: [Item] = []
        @usableFromInline var answers: [Answer] = []
        /// An entry of the write queue stands for the waiting items (at most one at a time).
        @usableFromInline var scheduled = false
        @usableFromInline init() {}
    }

    @usableFromInline let state = Mutex(State())
    @usableFromInline let queue: WriteQueue
    @usableFromInline let maxBatch: Int
    @usableFromInline let write: Write
    /// Batches written, items in them, and nanoseconds from a batch's start to its commit (for
    /// the benchmark, as `GroupCommit`'s).
    public let batches = Atomic<Int>(0), items = Atomic<Int>(0), commitNanos = Atomic<Int>(0)
    /// `frienso_batched_writes_items{stream}`: how many items each batch carried.
    private let sizes: Recorder

    init(label: String, queue: WriteQueue, maxBatch: Int, write: @escaping Write) {
        self.queue = queue
        self.maxBatch = maxBatch
        self.write = write
        sizes = Recorder(label: "frienso_batched_writes_items", dimensions: [("stream", label)], aggregate: true)
    }

    /// Items waiting for a batch (tests).
    var waiting: Int { state.withLock { $0.items.count } }

    /// Returns once the batch holding `item` committed.
    @inlinable
    public func submit(_ item: Item) async throws -> Output {
        try await withCheckedThrowingContinuation { continuation in
            enqueue(item) { continuation.resume(with: $0) }
        }
    }

    /// Submits `item` without waiting: `done` runs on the commit's queue once the batch holding
    /// it committed (or failed). It must be short and must not block.
    @inlinable
    public func submit(_ item: Item, then done: @escaping @Sendable (Result<Output, any Error>) -> Void) {
        enqueue(item, done)
    }

    @inlinable
    func enqueue(_ item: Item, _ answer: @escaping Answer) {
        let schedule = state.withLock { s -> Bool in
            s.items.append(item)
            s.answers.append(answer)
            guard !s.scheduled else { return false }
            s.scheduled = true
            return true
        }
        if schedule { scheduleEntry() }
    }

    /// What the write queue's entry did, kept from its run to its answer.
    @usableFromInline final class Taken: @unchecked Sendable {
        @usableFromInline var answers: [Answer] = []
        @usableFromInline var outcome: Result<[Output], any Error>?
        @usableFromInline var committed: (@Sendable () -> Void)?
        @usableFromInline var started: ContinuousClock.Instant?
        @usableFromInline init() {}
    }

    @inlinable
    func scheduleEntry() {
        let taken = Taken()
        queue.submit(WriteQueue.Pending(
            run: { db in self.run(taken, db) },
            committed: { taken.committed?() }
        )) { result in self.answer(taken, result) }
    }

    @inlinable
    func run(_ taken: Taken, _ db: Database) {
        taken.started = .now
        let (items, answers, more) = state.withLock { s -> ([Item], [Answer], Bool) in
            let taken = takeWaiting(&s.items, &s.answers, max: maxBatch)
            s.scheduled = taken.left // still scheduled when some are left: the next entry stands for them
            return taken
        }
        // Into the write queue's next batch (this one is under way).
        if more { scheduleEntry() }
        taken.answers = answers
        guard !items.isEmpty else { taken.outcome = .success([]); return }
        taken.outcome = Result {
            var outputs: [Output] = []
            try CachedTransactions.savepoint(db) {
                let written = try write(items, db)
                guard written.outputs.count == items.count else {
                    throw StoreInvariant("a batch of \(items.count) items wrote \(written.outputs.count) outputs")
                }
                outputs = written.outputs
                taken.committed = written.committed
                return .commit
            }
            return outputs
        }
    }

    /// The write queue's batch committed (or failed as a whole).
    @inlinable
    func answer(_ taken: Taken, _ batch: Result<Void, any Error>) {
        guard let started = taken.started else {
            // The batch failed before it reached this entry (it could not begin): the items it
            // stood for are still waiting, and they fail with it, as the batch's own did.
            let (answers, _) = state.withLock { s -> ([Answer], Void) in
                let answers = s.answers
                s.items.removeAll()
                s.answers.removeAll()
                s.scheduled = false
                return (answers, ())
            }
            let error = batch.failure ?? StoreInvariant("the batch ended without running its writes")
            for answer in answers { answer(.failure(error)) }
            return
        }
        switch (batch, taken.outcome ?? .failure(StoreInvariant("the batch's writes did not run"))) {
        case (.failure(let error), _), (.success, .failure(let error)):
            for answer in taken.answers { answer(.failure(error)) }
        case (.success, .success(let outputs)):
            guard !outputs.isEmpty else { return }
            count(batchOf: outputs.count, startedAt: started)
            // As many answers as outputs (`run` checked the count); by index, not `zip`, whose iterator is generic.
            for i in 0..<min(outputs.count, taken.answers.count) { taken.answers[i](.success(outputs[i])) }
        }
    }
}

extension BatchedWrites {
    /// A committed batch of `size` items, in the counters and the metric.
    @usableFromInline
    func count(batchOf size: Int, startedAt started: ContinuousClock.Instant) {
        batches.add(1, ordering: .relaxed)
        items.add(size, ordering: .relaxed)
        commitNanos.add(Int(started.duration(to: .now).wholeNanoseconds), ordering: .relaxed)
        sizes.record(size)
    }
}

extension Result {
    @usableFromInline var failure: Failure? {
        if case .failure(let error) = self { return error }
        return nil
    }
}
