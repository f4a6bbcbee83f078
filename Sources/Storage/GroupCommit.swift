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
    /// How a waiter hears its item's outcome: a suspended caller is resumed (`submit(_:)`), or a
    /// callback runs on the commit's queue (for a write nobody waits for, so no task is made for it).
    private typealias Answer = @Sendable (Swift.Result<Result, any Error>) -> Void

    /// The items waiting and their answers, side by side. Not one array of (item, answer) pairs:
    /// copying or freeing an element of a generic struct goes through the runtime's metadata for
    /// its fields, several lookups per item; these arrays' elements are the caller's own item type
    /// and plain closures (`docs/benchmarks.md`, issue 16, item 44).
    private struct State {
        var items: [Item] = []
        var answers: [Answer] = []
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
            enqueue(item) { continuation.resume(with: $0) }
        }
    }

    /// Submits `item` without waiting: `done` runs on the commit's queue once its batch committed
    /// (or failed). It must be short and must not block.
    public func submit(_ item: Item, then done: @escaping @Sendable (Swift.Result<Result, any Error>) -> Void) {
        enqueue(item, done)
    }

    private func enqueue(_ item: Item, _ answer: @escaping Answer) {
        let start = state.withLock { s -> Bool in
            s.items.append(item)
            s.answers.append(answer)
            guard !s.draining else { return false }
            s.draining = true
            return true
        }
        if start { queue.async { self.drain() } }
    }

    private func drain() {
        while true {
            let (items, answers, left) = state.withLock { s -> ([Item], [Answer], Int) in
                // Usually everything waiting fits: the arrays are handed over whole, and the next
                // ones start at their size (one allocation each, not one per doubling).
                let items: [Item], answers: [Answer]
                if s.items.count <= maxBatch {
                    (items, answers) = (s.items, s.answers)
                    s.items.removeAll(keepingCapacity: true)
                    s.answers.removeAll(keepingCapacity: true)
                } else {
                    (items, answers) = (Array(s.items.prefix(maxBatch)), Array(s.answers.prefix(maxBatch)))
                    s.items.removeFirst(maxBatch)
                    s.answers.removeFirst(maxBatch)
                }
                if items.isEmpty { s.draining = false }
                return (items, answers, s.items.count)
            }
            waitingGauge.record(left)
            if items.isEmpty { return }
            do {
                let started = ContinuousClock.now
                let results = try commit(items)
                let took = started.duration(to: .now).components
                batches.add(1, ordering: .relaxed)
                self.items.add(items.count, ordering: .relaxed)
                let nanos = Int(took.seconds) * 1_000_000_000 + Int(took.attoseconds / 1_000_000_000)
                commitNanos.add(nanos, ordering: .relaxed)
                sizes.record(items.count)
                durations.recordNanoseconds(Int64(nanos))
                for (answer, result) in zip(answers, results) { answer(.success(result)) }
            } catch {
                failures.increment()
                for answer in answers { answer(.failure(error)) }
            }
        }
    }
}
