import CoreMetrics
import Dispatch
import Wire
public import Synchronization

/// Group commit: callers submit items and wait; one serial queue writes everything waiting as a
/// single batch (one transaction, one fsync), then answers all of them. Under load, batches
/// grow by themselves to whatever arrived during the previous commit.
///
/// The commit runs on its own dispatch queue, never on Swift's cooperative pool (it blocks on
/// SQLite and fsync).
///
/// An item submitted with `lingers` (a write nobody waits for: a reply's save on top of its
/// claim) does not start a commit by itself: it waits up to `linger` for an item that does, and
/// rides in that batch; a batch of lingering items alone is committed once the linger is over.
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
        /// Waiting items that may not linger (a batch starts for them).
        var urgent = 0
        var draining = false
        /// A commit of lingering items alone is scheduled (`lingerEnded`).
        var lingerArmed = false
    }

    private let state = Mutex(State())
    /// Batches committed, items in them, and nanoseconds spent committing (for the benchmark).
    public let batches = Atomic<Int>(0), items = Atomic<Int>(0), commitNanos = Atomic<Int>(0)
    private let queue: DispatchQueue
    private let maxBatch: Int
    private let linger: DispatchTimeInterval?
    private let commit: @Sendable ([Item]) throws -> [Result]
    /// `frienso_group_commit_items{queue}` (a histogram of batch sizes),
    /// `frienso_group_commit_duration_seconds{queue}`, `frienso_group_commit_waiting{queue}` (items
    /// waiting for the next batch) and `frienso_group_commit_failures_total{queue}`.
    private let sizes: Recorder, durations: CoreMetrics.Timer, waitingGauge: Gauge, failures: Counter

    /// - Parameter commit: writes a batch and returns one result per item, in order; a throw
    ///   fails every item of the batch (none of them is acknowledged).
    ///   `linger`: how long an item submitted with `lingers` may wait for a batch started by
    ///   another; nil: it starts one at once, as every item does.
    public init(label: String, maxBatch: Int = 4_096, linger: Duration? = nil, commit: @escaping @Sendable ([Item]) throws -> [Result]) {
        queue = DispatchQueue(label: label)
        let dimensions = [("queue", label)]
        sizes = Recorder(label: "frienso_group_commit_items", dimensions: dimensions, aggregate: true)
        durations = CoreMetrics.Timer(label: "frienso_group_commit_duration_seconds", dimensions: dimensions)
        waitingGauge = Gauge(label: "frienso_group_commit_waiting", dimensions: dimensions)
        failures = Counter(label: "frienso_group_commit_failures_total", dimensions: dimensions)
        self.maxBatch = maxBatch
        self.linger = linger.map { .nanoseconds(Int($0.wholeNanoseconds)) }
        self.commit = commit
    }

    /// Items waiting for a batch (tests).
    public var waiting: Int { state.withLock { $0.items.count } }

    public func submit(_ item: Item) async throws -> Result {
        try await withCheckedThrowingContinuation { continuation in
            enqueue(item) { continuation.resume(with: $0) }
        }
    }

    /// Submits `item` without waiting: `done` runs on the commit's queue once its batch committed
    /// (or failed). It must be short and must not block. With `lingers`, the item waits for a
    /// batch another item starts, up to the queue's `linger`.
    public func submit(_ item: Item, lingers: Bool = false, then done: @escaping @Sendable (Swift.Result<Result, any Error>) -> Void) {
        enqueue(item, lingers: lingers, done)
    }

    private enum Start { case none, drain, armLinger }

    private func enqueue(_ item: Item, lingers: Bool = false, _ answer: @escaping Answer) {
        let lingers = lingers && linger != nil
        let start = state.withLock { s -> Start in
            s.items.append(item)
            s.answers.append(answer)
            if !lingers { s.urgent += 1 }
            guard !s.draining else { return .none }
            if lingers {
                guard !s.lingerArmed else { return .none }
                s.lingerArmed = true
                return .armLinger
            }
            s.draining = true
            return .drain
        }
        switch start {
        case .none: break
        case .drain: queue.async { self.drain() }
        case .armLinger: queue.asyncAfter(deadline: .now() + (linger ?? .never)) { self.lingerEnded() }
        }
    }

    /// The linger of the oldest waiting item is over: whatever waits is committed now.
    private func lingerEnded() {
        let start = state.withLock { s -> Bool in
            s.lingerArmed = false
            guard !s.draining, !s.items.isEmpty else { return false }
            s.draining = true
            return true
        }
        if start { drain(all: true) }
    }

    /// - Parameter all: commit lingering items too when nothing else waits (their linger is over).
    private func drain(all: Bool = false) {
        var all = all
        while true {
            let (items, answers, left, armLinger) = state.withLock { s -> ([Item], [Answer], Int, Bool) in
                // Lingering items alone wait for the next batch that something else starts.
                if s.urgent == 0, !all, !s.items.isEmpty {
                    s.draining = false
                    defer { s.lingerArmed = true }
                    return ([], [], s.items.count, !s.lingerArmed)
                }
                let (items, answers, more) = takeWaiting(&s.items, &s.answers, max: maxBatch)
                // Which of those were urgent is not kept: what is left counts as urgent (it may
                // have been waiting through a whole batch already).
                s.urgent = more ? s.items.count : 0
                if items.isEmpty { s.draining = false }
                return (items, answers, s.items.count, false)
            }
            all = false
            waitingGauge.record(left)
            if armLinger { queue.asyncAfter(deadline: .now() + (linger ?? .never)) { self.lingerEnded() } }
            if items.isEmpty { return }
            do {
                let started = ContinuousClock.now
                let results = try commit(items)
                let took = started.duration(to: .now)
                batches.add(1, ordering: .relaxed)
                self.items.add(items.count, ordering: .relaxed)
                let nanos = Int(took.wholeNanoseconds)
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

/// The first `max` of the waiting items and their answers, taken out of the two arrays.
/// Usually everything waiting fits: the arrays are handed over whole, and the next ones start at
/// their size (one allocation each, not one per doubling). - Returns: also whether some are left.
@inlinable
func takeWaiting<Item, Answer>(_ items: inout [Item], _ answers: inout [Answer], max: Int) -> (items: [Item], answers: [Answer], left: Bool) {
    guard items.count > max else {
        defer {
            items.removeAll(keepingCapacity: true)
            answers.removeAll(keepingCapacity: true)
        }
        return (items, answers, false)
    }
    defer {
        items.removeFirst(max)
        answers.removeFirst(max)
    }
    return (Array(items.prefix(max)), Array(answers.prefix(max)), true)
}
