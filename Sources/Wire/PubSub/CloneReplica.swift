import CoreMetrics
public import Logging
public import ServiceLifecycle
public import Synchronization

/// Where a Clone stream stands: the publisher's epoch (one per start) and the last sequence
/// number a snapshot or an event covered.
public struct CloneHead: Sendable, Equatable {
    public var epoch: UInt64
    public var sequence: UInt64

    public init(epoch: UInt64, sequence: UInt64) {
        self.epoch = epoch
        self.sequence = sequence
    }
}

/// What one replicated stream is: its state, its events and how one applies.
public protocol CloneModel: Sendable {
    associatedtype State: Sendable
    associatedtype Event: Sendable
    /// The stream (and the topic subscribed to).
    static var stream: String { get }
    static func decode(_ payload: [UInt8]) -> Event?
    static func apply(_ event: Event, to state: inout State)
    /// A few words on a loaded state for the log ("friendships": "12").
    static func describe(_ state: State) -> Logger.Metadata
}

/// A Clone replica (the ZeroMQ guide's pattern) of one publisher's stream: subscribes first, then
/// loads a snapshot, drops the events the snapshot already contains, applies the rest in order,
/// and loads a new snapshot on a gap or a new epoch (the publisher restarted). A periodic head
/// check (`sequence only`) notices a restart or lost events even when no new event arrives.
/// The state is read under a lock, copy-free.
public final class CloneReplica<Model: CloneModel>: Service, Sendable {
    public struct Status: Sendable, Equatable {
        public var epoch: UInt64
        public var sequence: UInt64
        /// Snapshots loaded (the first one included).
        public var snapshots: Int
    }

    enum Input: Sendable {
        case event(PublishedEvent)
        case check
    }

    public typealias Snapshot = @Sendable () async throws -> (Model.State, CloneHead)
    public typealias Head = @Sendable () async throws -> CloneHead

    private let eventsEndpoint: String
    private let eventsSecurity: ClientSecurity
    private let checkInterval: Duration
    private let logger: Logger
    private let context: ZMQContext
    private let reactor: Reactor
    private let snapshot: Snapshot
    private let head: Head
    @usableFromInline let state: Mutex<Model.State>
    @usableFromInline let statusBox = Mutex(Status(epoch: 0, sequence: 0, snapshots: 0))
    /// `frienso_replica_lag_events{stream}`: how many events the publisher had sent that this
    /// replica had not applied, at the last check; `frienso_replica_snapshots_total{stream}`:
    /// snapshots loaded (the first, then one per gap or publisher restart).
    private let lagGauge = Gauge(label: "frienso_replica_lag_events", dimensions: [("stream", Model.stream)])
    private let snapshotCounter = Counter(label: "frienso_replica_snapshots_total", dimensions: [("stream", Model.stream)])
    private let inputs: AsyncStream<Input>
    private let feed: AsyncStream<Input>.Continuation
    private let loaded = OneShot<Void>()

    /// - Parameters:
    ///   - initial: the state until the first snapshot is loaded.
    ///   - eventsEndpoint: the publisher's PUB endpoint; `eventsSecurity` how to authenticate to it.
    ///   - snapshot: loads a whole snapshot and the head it was taken at.
    ///   - head: the publisher's current head, without data.
    public init(initial: Model.State, eventsEndpoint: String, eventsSecurity: ClientSecurity = .plaintext, logger: Logger,
                checkInterval: Duration = .seconds(5), context: ZMQContext = .shared, reactor: Reactor = .shared,
                snapshot: @escaping Snapshot, head: @escaping Head) {
        state = Mutex(initial)
        self.eventsEndpoint = eventsEndpoint
        self.eventsSecurity = eventsSecurity
        self.checkInterval = checkInterval
        self.logger = logger
        self.context = context
        self.reactor = reactor
        self.snapshot = snapshot
        self.head = head
        (inputs, feed) = AsyncStream.makeStream(of: Input.self)
    }

    /// Reads the current state (a copy-free borrow). Inlinable, as `status` is, so that a
    /// service's read is specialized for its state: unspecialized, every read asked the Swift
    /// runtime for the lock's and the result's metadata (`docs/benchmarks.md`, issue 16, item 135).
    @inlinable
    public func read<T>(_ body: (Model.State) -> T) -> T { state.withLock { body($0) } }
    @inlinable
    public var status: Status { statusBox.withLock { $0 } }
    /// Whether the first snapshot is loaded.
    public var isReady: Bool { status.snapshots > 0 }

    /// Returns once the first snapshot is loaded.
    public func ready() async { await loaded.value }

    public func run() async throws {
        let subscriber = Subscriber(endpoint: eventsEndpoint, prefixes: [Model.stream], logger: logger, security: eventsSecurity,
                                    context: context, reactor: reactor)
        let feed = feed, checkInterval = checkInterval
        await withTaskGroup(of: Void.self) { group in
            group.addTask {
                for await event in subscriber.events { feed.yield(.event(event)) }
            }
            group.addTask {
                while !Task.isCancelled {
                    try? await Task.sleep(for: checkInterval)
                    feed.yield(.check)
                }
            }
            await cancelWhenGracefulShutdown { await self.consume() }
            subscriber.stop()
            feed.finish()
            group.cancelAll()
        }
    }

    /// The one place that changes the tracker and the state.
    private func consume() async {
        var tracker = SequenceTracker()
        // The sequence we had at the last check that found us behind.
        var behindAt: UInt64?
        await resync(&tracker)
        for await input in inputs {
            switch input {
            case .event(let published):
                guard let event = Model.decode(published.envelope.payload) else {
                    logger.warning("undecodable \(Model.stream) event", metadata: ["sequence": "\(published.envelope.sequence)"])
                    continue
                }
                switch tracker.check(published.envelope, stream: Model.stream) {
                case .apply:
                    state.withLock { Model.apply(event, to: &$0) }
                    statusBox.withLock { $0.sequence = published.envelope.sequence }
                case .stale:
                    continue
                case .resync:
                    logger.info("\(Model.stream) stream gap or new epoch: resyncing", metadata: [
                        "got": "\(published.envelope.epoch):\(published.envelope.sequence)", "had": "\(status.epoch):\(status.sequence)"])
                    await resync(&tracker)
                }
            case .check:
                guard let now = try? await head() else { continue }
                let current = status
                lagGauge.record(now.epoch == current.epoch && now.sequence > current.sequence ? Int64(now.sequence - current.sequence) : 0)
                if now.epoch != current.epoch {
                    logger.info("the \(Model.stream) publisher restarted: resyncing")
                    await resync(&tracker)
                } else if now.sequence > current.sequence {
                    // Behind: events may be on their way. Behind with no progress for a whole
                    // interval: they were lost. (Behind but advancing is a busy stream, not a loss.)
                    if behindAt == current.sequence {
                        await resync(&tracker)
                        behindAt = nil
                    } else {
                        behindAt = current.sequence
                    }
                } else {
                    behindAt = nil
                }
            }
            if Task.isCancelled { return }
        }
    }

    /// Loads a snapshot, retrying with backoff until it succeeds or the task is cancelled.
    private func resync(_ tracker: inout SequenceTracker) async {
        var pause = Duration.milliseconds(100)
        while !Task.isCancelled {
            do {
                let (fresh, head) = try await snapshot()
                let described = Model.describe(fresh)
                state.withLock { $0 = fresh }
                statusBox.withLock { $0 = Status(epoch: head.epoch, sequence: head.sequence, snapshots: $0.snapshots + 1) }
                snapshotCounter.increment()
                tracker.reset(epoch: head.epoch, stream: Model.stream, sequence: head.sequence)
                logger.info("\(Model.stream) snapshot loaded", metadata: described.merging([
                    "epoch": "\(head.epoch)", "sequence": "\(head.sequence)"]) { a, _ in a })
                loaded.fulfil(())
                return
            } catch {
                logger.warning("\(Model.stream) snapshot failed; retrying", metadata: ["error": "\(error)", "in": "\(pause)"])
                try? await Task.sleep(for: pause)
                pause = min(pause * 2, .seconds(5))
            }
        }
    }

    /// Feeds an event as if it came from the stream (tests: a gap, a stale or a foreign event).
    public func inject(_ event: PublishedEvent) {
        feed.yield(.event(event))
    }
}
