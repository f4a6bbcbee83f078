public import FriensoProto

/// The social graph as a replica holds it. A value type: built from a snapshot, changed by events.
public struct GraphState: Sendable {
    private(set) var friends: [UInt64: Set<UInt64>] = [:]
    private(set) var blocks: Set<Pair> = []
    private(set) var circles: [UInt64: Set<UInt64>] = [:]

    struct Pair: Hashable, Sendable {
        var from: UInt64
        var to: UInt64
    }

    public init() {}

    public init(snapshot: SocialV1.GraphSnapshotResponse) {
        for (a, b) in zip(snapshot.friendsA, snapshot.friendsB) { link(a, b) }
        for (a, b) in zip(snapshot.blockers, snapshot.blocked) { blocks.insert(Pair(from: a, to: b)) }
        for (a, b) in zip(snapshot.circleOwners, snapshot.circleMembers) { circles[a, default: []].insert(b) }
    }

    public mutating func apply(_ event: SocialV1.GraphEvent) {
        let (a, b) = (event.userA, event.userB)
        switch event.change {
        case .friendshipAdded: link(a, b)
        case .friendshipRemoved:
            friends[a]?.remove(b)
            friends[b]?.remove(a)
            if friends[a]?.isEmpty == true { friends[a] = nil }
            if friends[b]?.isEmpty == true { friends[b] = nil }
        case .blockAdded: blocks.insert(Pair(from: a, to: b))
        case .blockRemoved: blocks.remove(Pair(from: a, to: b))
        case .circleMemberAdded: circles[a, default: []].insert(b)
        case .circleMemberRemoved:
            circles[a]?.remove(b)
            if circles[a]?.isEmpty == true { circles[a] = nil }
        default: break // a change this build does not know: nothing to apply
        }
    }

    private mutating func link(_ a: UInt64, _ b: UInt64) {
        friends[a, default: []].insert(b)
        friends[b, default: []].insert(a)
    }

    public func areFriends(_ a: UInt64, _ b: UInt64) -> Bool { friends[a]?.contains(b) ?? false }
    public func friends(of user: UInt64) -> Set<UInt64> { friends[user] ?? [] }
    /// Whether either blocked the other.
    public func blocked(_ a: UInt64, _ b: UInt64) -> Bool {
        blocks.contains(Pair(from: a, to: b)) || blocks.contains(Pair(from: b, to: a))
    }
    public func circle(of owner: UInt64) -> Set<UInt64> { circles[owner] ?? [] }
    public var friendshipCount: Int { friends.values.reduce(0) { $0 + $1.count } / 2 }
}
