public import FriensoProto
public import Logging
public import ServiceLifecycle
import Synchronization
public import Wire

/// The social graph as a Clone stream: `graph` events applied to `GraphState`.
public enum GraphModel: CloneModel {
    public static let stream = "graph"
    public static func decode(_ payload: [UInt8]) -> SocialV1.GraphEvent? { try? SocialV1.GraphEvent(serializedBytes: payload) }
    public static func apply(_ event: SocialV1.GraphEvent, to state: inout GraphState) { state.apply(event) }
    public static func describe(_ state: GraphState) -> Logger.Metadata { ["friendships": "\(state.friendshipCount)"] }
}

/// A replica's count of circle changes (`GraphState.circleChanges`, in its `generation`), with
/// where it stood when one owner's circle last changed.
public struct CircleClock: Sendable, Equatable {
    public var generation: UInt64
    public var changes: UInt64
    public var ownerChangedAt: UInt64

    public init(generation: UInt64, changes: UInt64, ownerChangedAt: UInt64) {
        self.generation = generation
        self.changes = changes
        self.ownerChangedAt = ownerChangedAt
    }
}

/// A Clone replica of the social graph, for geo, alerts, media and accounts: `CloneReplica` over
/// social's `graph` stream and its `GraphSnapshot` pages.
public final class SocialGraphReplica: Service, Sendable {
    public typealias Status = CloneReplica<GraphModel>.Status
    @usableFromInline let replica: CloneReplica<GraphModel>

    /// - Parameters:
    ///   - social: a client to social's request endpoint (GraphSnapshot is internal).
    ///   - eventsEndpoint: social's PUB endpoint.
    ///   - eventsSecurity: how to authenticate to it (the member's keyring).
    public init(social: WireClient, eventsEndpoint: String, eventsSecurity: ClientSecurity = .plaintext, logger: Logger,
                checkInterval: Duration = .seconds(5), context: ZMQContext = .shared, reactor: Reactor = .shared) {
        replica = CloneReplica(
            initial: GraphState(), eventsEndpoint: eventsEndpoint, eventsSecurity: eventsSecurity, logger: logger,
            checkInterval: checkInterval, context: context, reactor: reactor,
            snapshot: { try await Self.fetchSnapshot(from: social) },
            head: {
                let head = try await social.call(SocialV1.SocialService.graphSnapshot, SocialV1.GraphSnapshotRequest(sequenceOnly: true),
                                                 options: CallOptions(deadline: .seconds(2)))
                return CloneHead(epoch: head.epoch, sequence: head.sequence)
            })
    }

    // MARK: Reading

    /// Reads the current state (a copy-free borrow). Inlinable, so that the replica's read is
    /// specialized for the graph (`CloneReplica.read`).
    @inlinable
    public func read<T>(_ body: (GraphState) -> T) -> T { replica.read(body) }
    public func areFriends(_ a: UInt64, _ b: UInt64) -> Bool { read { $0.areFriends(a, b) } }
    public func friends(of user: UInt64) -> [UInt64] { read { $0.friends(of: user) } }
    public func blocked(_ a: UInt64, _ b: UInt64) -> Bool { read { $0.blocked(a, b) } }
    public func circle(of owner: UInt64) -> [UInt64] { read { $0.circle(of: owner) } }
    public func isFindable(_ user: UInt64) -> Bool { read { $0.isFindable(user) } }
    public func exchanged(_ a: UInt64, _ b: UInt64) -> Bool { read { $0.exchanged(a, b) } }
    public var status: Status { replica.status }
    /// Where the replica's count of circle changes stands, and where it stood at `owner`'s last
    /// one (`GraphState.circleChanges`); nil until the first snapshot is loaded.
    public func circleClock(of owner: UInt64) -> CircleClock? {
        guard isReady else { return nil }
        return read { CircleClock(generation: $0.generation, changes: $0.circleChanges, ownerChangedAt: $0.circleChangedAt(owner)) }
    }

    /// Returns once the first snapshot is loaded.
    public func ready() async { await replica.ready() }
    /// Whether the first snapshot is loaded.
    public var isReady: Bool { replica.isReady }

    public func run() async throws { try await replica.run() }

    /// Every page of a snapshot, loaded into a new state. The first page's epoch and sequence
    /// are the state's; a page from another epoch (social restarted mid-way) starts over.
    public static func fetchSnapshot(from social: WireClient) async throws -> (GraphState, CloneHead) {
        let options = CallOptions(deadline: .seconds(30))
        restart: while true {
            var page = try await social.call(SocialV1.SocialService.graphSnapshot, SocialV1.GraphSnapshotRequest(), options: options)
            let head = CloneHead(epoch: page.epoch, sequence: page.sequence)
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
        replica.inject(event)
    }
}
