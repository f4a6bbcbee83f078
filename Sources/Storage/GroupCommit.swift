import CoreMetrics
import Dispatch
public import Synchronization

/// Group commit: callers submit items and wait; one serial queue writes everything waiting as a
/// single batch (one transaction, one fsync), then answers all of them. Under load, batches
/// grow by themselves to whatever arrived during the previous commit.
///
/// The commit runs on its own dispatch queue, never on Swift's cooperative pool (it blocks on
/// SQLite and fsync).
public final class GroupCommit<Item: Sendable, Result: Sendable>: Sendable {
    private struct Waiter: @unchecked Sendable {
        var item: Item
        var answer: Answer
    }

    /// How a waiter hears its item's outcome: a suspended caller is resumed; a callback runs on
    /// the commit's queue (for a write nobody waits for, so no task is made for it).
    private enum Answer {
        case resume(CheckedContinuation<Result, any Error>)
        case call(@Sendable (Swift.Result<Result, any Error>) -> Void)

        func callAsFunction(_ outcome: Swift.Result<Result, any Error>) {
            switch self {
            case .resume(let continuation): continuation.resume(with: outcome)
            case .call(let done): done(outcome)
            }
        }
    }

    private struct State {
        var waiting: [Waiter] = []
        var draining = false
    }

    private let state = Mutex(State())
    /// Batches committed, items in them, and nanoseconds spent committing (for the benchmark).
    public let batches = Atomic<Int>(0), items = Atomic<Int>(0), commitNanos = Atomic<Int>(0)
    private let queue: DispatchQueue
    private let maxBatch: Int
    private let commit: @Sendable ([Item]) throws -> [Result]
    /// `frienso_group_commit_items{queue}` (a histogram of batch sizes),
    /// `frienso_group_commit_duration_seconds{queue}`, `frienso_group_commit_waiting{queue}` (items
    /// waiting for the next batch) and `frienso_group_commit_failures_total{queue}`.
    private let sizes: Recorder, durations: CoreMetrics.Timer, waitingGauge: Gauge, failures: Counter

    /// - Parameter commit: writes a batch and returns one result per item, in order; a throw
    ///   fails every item of the batch (none of them is acknowledged).
    public init(label: String, maxBatch: Int = 4_096, commit: @escaping @Sendable ([Item]) throws -> [Result]) {
        queue = DispatchQueue(label: label)
        let dimensions = [("queue", label)]
        sizes = Recorder(label: "frienso_group_commit_items", dimensions: dimensions, aggregate: true)
        durations = CoreMetrics.Timer(label: "frienso_group_commit_duration_seconds", dimensions: dimensions)
        waitingGauge = Gauge(label: "frienso_group_commit_waiting", dimensions: dimensions)
        failures = Counter(label: "frienso_group_commit_failures_total", dimensions: dimensions)
        self.maxBatch = maxBatch
        self.commit = commit
    }

    public func submit(_ item: Item) async throws -> Result {
        try await withCheckedThrowingContinuation { continuation in
            enqueue(Waiter(item: item, answer: .resume(continuation)))
        }
    }

    /// Submits `item` without waiting: `done` runs on the commit's queue once its batch committed
    /// (or failed). It must be short and must not block.
    public func submit(_ item: Item, then done: @escaping @Sendable (Swift.Result<Result, any Error>) -> Void) {
        enqueue(Waiter(item: item, answer: .call(done)))
    }

    private func enqueue(_ waiter: Waiter) {
        let start = state.withLock { s -> Bool in
            s.waiting.append(waiter)
            guard !s.draining else { return false }
            s.draining = true
            return true
        }
        if start { queue.async { self.drain() } }
    }

    private func drain() {
        while true {
            let (batch, left) = state.withLock { s -> ([Waiter], Int) in
                let take = Array(s.waiting.prefix(maxBatch))
                s.waiting.removeFirst(take.count)
                if take.isEmpty { s.draining = false }
                return (take, s.waiting.count)
            }
            waitingGauge.record(left)
            if batch.isEmpty { return }
            do {
                let started = ContinuousClock.now
                let results = try commit(batch.map { $0.item })
                let took = started.duration(to: .now).components
                batches.add(1, ordering: .relaxed)
                items.add(batch.count, ordering: .relaxed)
                let nanos = Int(took.seconds) * 1_000_000_000 + Int(took.attoseconds / 1_000_000_000)
                commitNanos.add(nanos, ordering: .relaxed)
                sizes.record(batch.count)
                durations.recordNanoseconds(Int64(nanos))
                for (waiter, result) in zip(batch, results) { waiter.answer(.success(result)) }
            } catch {
                failures.increment()
                for waiter in batch { waiter.answer(.failure(error)) }
            }
        }
    }
}
