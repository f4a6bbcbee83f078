public import FriensoProto

/// The social graph as a replica holds it. A value type: built from snapshot pages, changed by
/// events. Every event sets a fact (a pair present or absent, a flag on or off), so applying one
/// the state already reflects changes nothing: what lets snapshot pages be read at different times.
public struct GraphState: Sendable {
    private var friends = Adjacency()    // both directions
    private var blocks = Adjacency()     // blocker → blocked
    private var blockedBy = Adjacency()  // blocked → blocker (to list "blocked either way" at once)
    private var circles = Adjacency()    // owner → accepted member
    private var exchanges = Adjacency()  // both directions
    private var findableUsers: Set<UInt64> = []
    /// This state's own number, drawn when it is made (a replica that loads a snapshot afresh
    /// makes a new state): circle changes are counted from it.
    public let generation = UInt64.random(in: 1...UInt64.max)
    /// Circle changes applied to this state (accepted members, invited numbers), and for each
    /// owner the count at their circle's last change: what tells alerts' copy of a circle
    /// (`Alerts.CircleCopy`) that the copy may be out of date.
    public private(set) var circleChanges: UInt64 = 0
    private var circleChangedAt: [UInt64: UInt64] = [:]

    public init() {}

    /// A state from one page (tests, and a graph that fits one page).
    public init(snapshot: SocialV1.GraphSnapshotResponse) {
        load(snapshot)
        seal()
    }

    /// Adds a snapshot page. Call `seal()` after the last one.
    public mutating func load(_ page: SocialV1.GraphSnapshotResponse) {
        for (a, b) in zip(page.friendsA, page.friendsB) { friends.append(a, b); friends.append(b, a) }
        for (a, b) in zip(page.blockers, page.blocked) { blocks.append(a, b); blockedBy.append(b, a) }
        for (a, b) in zip(page.circleOwners, page.circleMembers) { circles.append(a, b) }
        for (a, b) in zip(page.exchangesA, page.exchangesB) { exchanges.append(a, b); exchanges.append(b, a) }
        findableUsers.formUnion(page.findable)
    }

    /// Sorts and trims what `load` appended.
    public mutating func seal() {
        friends.seal()
        blocks.seal()
        blockedBy.seal()
        circles.seal()
        exchanges.seal()
    }

    public mutating func apply(_ event: SocialV1.GraphEvent) {
        let (a, b) = (event.userA, event.userB)
        switch event.change {
        case .friendshipAdded: friends.insert(a, b); friends.insert(b, a)
        case .friendshipRemoved: friends.remove(a, b); friends.remove(b, a)
        case .blockAdded: blocks.insert(a, b); blockedBy.insert(b, a)
        case .blockRemoved: blocks.remove(a, b); blockedBy.remove(b, a)
        case .circleMemberAdded: circles.insert(a, b); circleChanged(a)
        case .circleMemberRemoved: circles.remove(a, b); circleChanged(a)
        case .circleInvitesChanged: circleChanged(a)
        case .findableOn: findableUsers.insert(a)
        case .findableOff: findableUsers.remove(a)
        case .exchangeAdded: exchanges.insert(a, b); exchanges.insert(b, a)
        case .exchangeRemoved: exchanges.remove(a, b); exchanges.remove(b, a)
        default: break // a change this build does not know: nothing to apply
        }
    }

    public func areFriends(_ a: UInt64, _ b: UInt64) -> Bool { friends.contains(a, b) }
    public func friends(of user: UInt64) -> [UInt64] { friends.neighbours(of: user) }
    public func friendCount(of user: UInt64) -> Int { friends.degree(of: user) }
    /// Whether either blocked the other.
    public func blocked(_ a: UInt64, _ b: UInt64) -> Bool { blocks.contains(a, b) || blocks.contains(b, a) }
    /// Everyone `user` blocked or was blocked by (usually nobody: one set per query beats a
    /// lookup per candidate).
    public func blockedEitherWay(_ user: UInt64) -> Set<UInt64> {
        Set(blocks.neighbours(of: user)).union(blockedBy.neighbours(of: user))
    }
    /// Accepted members of `owner`'s core circle, by id.
    public func circle(of owner: UInt64) -> [UInt64] { circles.neighbours(of: owner) }
    /// `circleChanges` when `owner`'s circle last changed in this state (0: not since it was made).
    public func circleChangedAt(_ owner: UInt64) -> UInt64 { circleChangedAt[owner] ?? 0 }

    private mutating func circleChanged(_ owner: UInt64) {
        circleChanges += 1
        circleChangedAt[owner] = circleChanges
    }
    public func isFindable(_ user: UInt64) -> Bool { findableUsers.contains(user) }
    public func exchanged(_ a: UInt64, _ b: UInt64) -> Bool { exchanges.contains(a, b) }
    public var friendshipCount: Int { friends.entryCount / 2 }
}
