/// A user's sharing settings as geo keeps them.
public struct Sharing: Sendable, Equatable {
    public var shareWithFriends = true
    public var ghost = false
    public var proximityAlerts = false
    public var proximityMetres = 200.0

    public init(shareWithFriends: Bool = true, ghost: Bool = false, proximityAlerts: Bool = false, proximityMetres: Double = 200) {
        self.shareWithFriends = shareWithFriends
        self.ghost = ghost
        self.proximityAlerts = proximityAlerts
        self.proximityMetres = proximityMetres
    }
}

/// The one place that decides whether `viewer` may see `subject`'s location.
public enum Visibility {
    /// What the decision looks at, gathered by the caller (so this stays a pure function).
    public struct Facts: Sendable {
        public var friends: Bool
        /// Either blocked the other.
        public var blocked: Bool
        public var subject: Sharing
        /// The latest expiry of a grant from the subject to the viewer (watchMe/helpNow), if any.
        public var grantExpiresAtMs: Int64?

        public init(friends: Bool, blocked: Bool, subject: Sharing, grantExpiresAtMs: Int64? = nil) {
            self.friends = friends
            self.blocked = blocked
            self.subject = subject
            self.grantExpiresAtMs = grantExpiresAtMs
        }
    }

    public enum Reason: String, Sendable {
        case yourself, grant, friend, notFriends = "not friends", blocked, ghost, notShared = "not shared with friends"
    }

    /// - Returns: whether the location is visible, and why.
    ///   A live grant wins over everything else (it is how helpNow reaches a circle even from
    ///   someone in ghost mode); otherwise a block hides, then friendship with sharing on and
    ///   ghost off shows.
    public static func decide(viewer: UInt64, subject: UInt64, _ facts: Facts, nowMs: Int64) -> (visible: Bool, reason: Reason) {
        if viewer == subject { return (true, .yourself) }
        if let expiry = facts.grantExpiresAtMs, expiry > nowMs { return (true, .grant) }
        if facts.blocked { return (false, .blocked) }
        if !facts.friends { return (false, .notFriends) }
        if facts.subject.ghost { return (false, .ghost) }
        if !facts.subject.shareWithFriends { return (false, .notShared) }
        return (true, .friend)
    }
}
