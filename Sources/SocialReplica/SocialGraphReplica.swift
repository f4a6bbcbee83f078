import FriensoProto
public import Logging
public import ServiceLifecycle
import Synchronization
public import Wire

/// A Clone replica of the social graph, for geo, alerts and the gateway.
///
/// Subscribes to social's `graph` stream first, then fetches `social.GraphSnapshot`, drops events
/// the snapshot already contains, applies the rest in order, and fetches a new snapshot on a gap
/// or a new epoch (social restarted). A periodic `sequence_only` check notices a restart or lost
/// events even when no new event arrives.
public final class SocialGraphReplica: Service, Sendable {
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

    private let social: WireClient
    private let eventsEndpoint: String
    private let eventsSecurity: ClientSecurity
    private let checkInterval: Duration
    private let logger: Logger
    private let context: ZMQContext
    private let reactor: Reactor
    private let state = Mutex(GraphState())
    private let statusBox = Mutex(Status(epoch: 0, sequence: 0, snapshots: 0))
    private let inputs: AsyncStream<Input>
    private let feed: AsyncStream<Input>.Continuation
    private let loaded = OneShot<Void>()

    /// - Parameters:
    ///   - social: a client to social's request endpoint (GraphSnapshot is internal).
    ///   - eventsEndpoint: social's PUB endpoint.
    ///   - eventsSecurity: how to authenticate to it (the member's keyring).
    public init(social: WireClient, eventsEndpoint: String, eventsSecurity: ClientSecurity = .plaintext, logger: Logger,
                checkInterval: Duration = .seconds(5), context: ZMQContext = .shared, reactor: Reactor = .shared) {
        self.social = social
        self.eventsEndpoint = eventsEndpoint
        self.eventsSecurity = eventsSecurity
        self.checkInterval = checkInterval
        self.logger = logger
        self.context = context
        self.reactor = reactor
        (inputs, feed) = AsyncStream.makeStream(of: Input.self)
    }

    // MARK: Reading

    /// Reads the current state (a copy-free borrow).
    public func read<T>(_ body: (GraphState) -> T) -> T { state.withLock { body($0) } }
    public func areFriends(_ a: UInt64, _ b: UInt64) -> Bool { read { $0.areFriends(a, b) } }
    public func friends(of user: UInt64) -> [UInt64] { read { $0.friends(of: user) } }
    public func blocked(_ a: UInt64, _ b: UInt64) -> Bool { read { $0.blocked(a, b) } }
    public func circle(of owner: UInt64) -> [UInt64] { read { $0.circle(of: owner) } }
    public func isFindable(_ user: UInt64) -> Bool { read { $0.isFindable(user) } }
    public func exchanged(_ a: UInt64, _ b: UInt64) -> Bool { read { $0.exchanged(a, b) } }
    public var status: Status { statusBox.withLock { $0 } }

    /// Returns once the first snapshot is loaded.
    public func ready() async { await loaded.value }

    // MARK: Running

    public func run() async throws {
        let subscriber = Subscriber(endpoint: eventsEndpoint, prefixes: ["graph"], logger: logger, security: eventsSecurity,
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
                guard let event = try? SocialV1.GraphEvent(serializedBytes: published.envelope.payload) else {
                    logger.warning("undecodable graph event", metadata: ["sequence": "\(published.envelope.sequence)"])
                    continue
                }
                switch tracker.check(published.envelope, stream: "graph") {
                case .apply:
                    state.withLock { $0.apply(event) }
                    statusBox.withLock { $0.sequence = published.envelope.sequence }
                case .stale:
                    continue
                case .resync:
                    logger.info("graph stream gap or new epoch: resyncing", metadata: [
                        "got": "\(published.envelope.epoch):\(published.envelope.sequence)", "had": "\(status.epoch):\(status.sequence)"])
                    await resync(&tracker)
                }
            case .check:
                guard let head = try? await social.call(SocialV1.SocialService.graphSnapshot, SocialV1.GraphSnapshotRequest(sequenceOnly: true),
                                                        options: CallOptions(deadline: .seconds(2), idempotent: true)) else { continue }
                let current = status
                if head.epoch != current.epoch {
                    logger.info("social restarted: resyncing")
                    await resync(&tracker)
                } else if head.sequence > current.sequence {
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
                let (fresh, head) = try await Self.fetchSnapshot(from: social)
                state.withLock { $0 = fresh }
                statusBox.withLock { $0 = Status(epoch: head.epoch, sequence: head.sequence, snapshots: $0.snapshots + 1) }
                tracker.reset(epoch: head.epoch, stream: "graph", sequence: head.sequence)
                logger.info("graph snapshot loaded", metadata: [
                    "epoch": "\(head.epoch)", "sequence": "\(head.sequence)", "friendships": "\(fresh.friendshipCount)"])
                loaded.fulfil(())
                return
            } catch {
                logger.warning("graph snapshot failed; retrying", metadata: ["error": "\(error)", "in": "\(pause)"])
                try? await Task.sleep(for: pause)
                pause = min(pause * 2, .seconds(5))
            }
        }
    }

    public struct SnapshotHead: Sendable {
        public var epoch: UInt64
        public var sequence: UInt64
    }

    /// Every page of a snapshot, loaded into a new state. The first page's epoch and sequence
    /// are the state's; a page from another epoch (social restarted mid-way) starts over.
    public static func fetchSnapshot(from social: WireClient) async throws -> (GraphState, SnapshotHead) {
        let options = CallOptions(deadline: .seconds(30), idempotent: true)
        restart: while true {
            var page = try await social.call(SocialV1.SocialService.graphSnapshot, SocialV1.GraphSnapshotRequest(), options: options)
            let head = SnapshotHead(epoch: page.epoch, sequence: page.sequence)
            var fresh = GraphState()
            while true {
                fresh.load(page)
                guard !page.nextCursor.isEmpty else { break }
                page = try await social.call(SocialV1.SocialService.graphSnapshot, SocialV1.GraphSnapshotRequest(cursor: page.nextCursor),
                                             options: options)
                if page.epoch != head.epoch { continue restart }
            }
            fresh.seal()
            return (fresh, head)
        }
    }

    /// Feeds an event as if it came from the stream (tests: a gap, a stale or a foreign event).
    func inject(_ event: PublishedEvent) {
        feed.yield(.event(event))
    }
}
