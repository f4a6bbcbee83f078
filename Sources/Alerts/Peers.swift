public import FriensoProto
public import Logging
public import Wire
public import SocialReplica
public import Places

/// A member of someone's core circle as alerts reaches them: a user, or an invited phone number.
public enum CircleContact: Sendable, Hashable {
    case user(UInt64)
    case phone(String)

    /// The member's user id (nil for an invited phone number).
    public var user: UInt64? { if case .user(let id) = self { id } else { nil } }
}

/// What alerts asks of the other services. `RemotePeers` calls them; tests use a stand-in.
public protocol AlertsPeers: Sendable {
    /// The accepted members of `owner`'s core circle and the invited phone numbers, in circle
    /// order, from social (`AlertsService.circle(of:)` falls back to the replica).
    func circleFromSocial(of owner: UInt64) async throws -> [CircleContact]
    /// The accepted members by the graph replica (no invited numbers: they are not replicated).
    func circleFromReplica(of owner: UInt64) -> [CircleContact]
    /// Whole circles of up to `owners` owners after `afterOwner`, by owner (social's
    /// `CircleSnapshot`); `next` 0 after the last page.
    func circles(afterOwner: UInt64, owners: Int) async throws -> (circles: [(owner: UInt64, contacts: [CircleContact])], next: UInt64)
    /// The graph replica's count of circle changes (`CircleCopy`); nil: no replica, or not loaded.
    func circleClock(of owner: UInt64) -> CircleClock?
    /// Geo's places after `afterID`, by id (`PlacesSnapshot`), with the distance within which one
    /// names where someone is; `next` 0 after the last page.
    func places(afterID: UInt64, limit: Int) async throws -> (places: [PlaceRecord], next: UInt64, within: Double)
    /// Pending coreFriend requests addressed to `member`: who asked, and when.
    func circleRequests(for member: UInt64) async throws -> [(owner: UInt64, atMs: Int64)]
    func respondToCircleRequest(member: UInt64, owner: UInt64, accept: Bool) async throws
    /// Social's notices after `id` (pokes, coreFriend requests, invitations), oldest first.
    func notices(after id: UInt64, limit: Int) async throws -> [SocialV1.Notice]
    /// Geo's place events after `id` (a friend arrived at or left a place), oldest first, each with its viewer.
    func placeEvents(after id: UInt64, limit: Int) async throws -> [(event: GeoV1.PlaceAlertEvent, viewer: UInt64)]
    /// Where `user` is, for a helpNow (geo): with `phoneFix` (the phone's own fix, sent with the
    /// raise), that fix with the place geo names at or near it; without, geo's latest fix, or
    /// `known == false`.
    func latestLocation(of user: UInt64, phoneFix: AlertsV1.AlertLocation?) async throws -> AlertsV1.AlertLocation
    /// Names (accounts); unknown ids are left out.
    func people(_ ids: Set<UInt64>) async throws -> [UInt64: AlertsV1.Person]
    /// Phone numbers (accounts); unknown ids are left out.
    func phones(_ ids: Set<UInt64>) async throws -> [UInt64: String]
    /// Whether `password` is `user`'s (accounts), for ending a check-in timer.
    func verifyPassword(user: UInt64, password: String) async throws -> Bool
}

/// The other services over Wire. The circle comes from social, or from the replica of the
/// social graph (`circleFromReplica`: accepted members only) when social does not answer.
public struct RemotePeers: AlertsPeers {
    let accounts: WireClient
    let social: WireClient
    let geo: WireClient
    let replicaCircle: @Sendable (UInt64) -> [UInt64]
    let replicaClock: @Sendable (UInt64) -> CircleClock?
    /// Names from memory (accounts' profiles stream); nil: asked of accounts.
    let profiles: ProfileReplica?
    let logger: Logger
    /// Each call's deadline: short, because a helpNow waits for them.
    let deadline: Duration

    public init(accounts: WireClient, social: WireClient, geo: WireClient, deadline: Duration = .seconds(1), logger: Logger,
                profiles: ProfileReplica? = nil, replicaCircle: @escaping @Sendable (UInt64) -> [UInt64],
                replicaClock: @escaping @Sendable (UInt64) -> CircleClock? = { _ in nil }) {
        self.profiles = profiles
        self.replicaClock = replicaClock
        self.accounts = accounts
        self.social = social
        self.geo = geo
        self.deadline = deadline
        self.logger = logger
        self.replicaCircle = replicaCircle
    }

    private func options() -> CallOptions { CallOptions(deadline: deadline, idempotent: true) }

    public func circleFromReplica(of owner: UInt64) -> [CircleContact] { replicaCircle(owner).map { CircleContact.user($0) } }

    public func circleClock(of owner: UInt64) -> CircleClock? { replicaClock(owner) }

    public func places(afterID: UInt64, limit: Int) async throws -> (places: [PlaceRecord], next: UInt64, within: Double) {
        let page = try await geo.call(GeoV1.GeoService.placesSnapshot, GeoV1.PlacesSnapshotRequest(afterId: afterID, limit: UInt32(limit)),
                                      options: CallOptions(deadline: .seconds(30), idempotent: true))
        return (page.places.map(PlaceRecord.init), page.nextAfterId, page.withinM)
    }

    public func circles(afterOwner: UInt64, owners: Int) async throws -> (circles: [(owner: UInt64, contacts: [CircleContact])], next: UInt64) {
        let page = try await social.call(SocialV1.SocialService.circleSnapshot, SocialV1.CircleSnapshotRequest(afterOwner: afterOwner, limit: UInt32(owners)),
                                         options: CallOptions(deadline: .seconds(30), idempotent: true))
        var circles: [(owner: UInt64, contacts: [CircleContact])] = []
        for entry in page.entries {
            let contact: CircleContact = entry.member != 0 ? .user(entry.member) : .phone(entry.phone)
            if circles.last?.owner == entry.owner { circles[circles.count - 1].contacts.append(contact) } else { circles.append((entry.owner, [contact])) }
        }
        return (circles, page.nextAfterOwner)
    }

    public func circleFromSocial(of owner: UInt64) async throws -> [CircleContact] {
        let members = try await social.call(SocialV1.SocialService.circleOf, SocialV1.CircleOfRequest(ownerUserId: owner), options: options()).members
        var contacts: [CircleContact] = []
        for member in members {
            if member.state == .accepted, let user = member.user {
                contacts.append(.user(user.userId))
            } else if member.state == .invited, !member.phone.isEmpty {
                contacts.append(.phone(member.phone))
            }
        }
        return contacts
    }

    public func circleRequests(for member: UInt64) async throws -> [(owner: UInt64, atMs: Int64)] {
        try await social.call(SocialV1.SocialService.circleRequestsFor, SocialV1.CircleRequestsForRequest(memberUserId: member), options: options())
            .requests.map { ($0.owner?.userId ?? 0, $0.addedAtMs) }
    }

    public func respondToCircleRequest(member: UInt64, owner: UInt64, accept: Bool) async throws {
        _ = try await social.call(SocialV1.SocialService.answerCircleRequest,
                                  SocialV1.AnswerCircleRequestRequest(memberUserId: member, ownerUserId: owner, action: accept ? .accept : .reject),
                                  options: options())
    }

    public func notices(after id: UInt64, limit: Int) async throws -> [SocialV1.Notice] {
        try await social.call(SocialV1.SocialService.listNotices, SocialV1.ListNoticesRequest(afterId: id, limit: UInt32(limit)),
                              options: CallOptions(deadline: .seconds(5))).notices
    }

    public func placeEvents(after id: UInt64, limit: Int) async throws -> [(event: GeoV1.PlaceAlertEvent, viewer: UInt64)] {
        let reply = try await geo.call(GeoV1.GeoService.listPlaceEvents, GeoV1.ListPlaceEventsRequest(afterId: id, limit: UInt32(limit)),
                                       options: CallOptions(deadline: .seconds(5)))
        guard reply.events.count == reply.viewers.count else { throw RPCError.internal("geo's place events came without their viewers") }
        return Array(zip(reply.events, reply.viewers))
    }

    public func latestLocation(of user: UInt64, phoneFix: AlertsV1.AlertLocation?) async throws -> AlertsV1.AlertLocation {
        var request = GeoV1.LatestLocationRequest(userId: user)
        if let phoneFix { (request.hasPoint, request.latitude, request.longitude) = (true, phoneFix.latitude, phoneFix.longitude) }
        let latest = try await geo.call(GeoV1.GeoService.latestLocation, request, options: options())
        if var phoneFix {
            phoneFix.placeName = latest.placeName
            return phoneFix
        }
        guard latest.found, let fix = latest.fix else { return AlertsV1.AlertLocation() }
        return AlertsV1.AlertLocation(known: true, latitude: fix.latitude, longitude: fix.longitude, accuracyM: fix.accuracyM,
                                      fixTimeMs: fix.deviceTimeMs, placeName: latest.placeName)
    }

    /// From the profile replica when it has them all (a helpNow names its circle without a call
    /// to accounts, even while accounts restarts); otherwise the rest from accounts.
    public func people(_ ids: Set<UInt64>) async throws -> [UInt64: AlertsV1.Person] {
        guard !ids.isEmpty else { return [:] }
        var found: [UInt64: AlertsV1.Person] = [:]
        var missing = ids
        if let profiles, profiles.isReady {
            profiles.read { directory in
                for id in ids {
                    guard let p = directory[id] else { continue }
                    found[id] = Self.person(p)
                    missing.remove(id)
                }
            }
        }
        guard !missing.isEmpty else { return found }
        let asked = try await accounts.call(AccountsV1.AccountsService.getProfiles, AccountsV1.GetProfilesRequest(userIds: Array(missing)),
                                            options: options()).profiles
        for p in asked { found[p.userId] = Self.person(p) }
        return found
    }

    static func person(_ p: AccountsV1.Profile) -> AlertsV1.Person {
        AlertsV1.Person(userId: p.userId, username: p.username, firstName: p.firstName, lastName: p.lastName)
    }

    public func phones(_ ids: Set<UInt64>) async throws -> [UInt64: String] {
        guard !ids.isEmpty else { return [:] }
        let contacts = try await accounts.call(AccountsV1.AccountsService.contactDetails, AccountsV1.ContactDetailsRequest(userIds: Array(ids)),
                                               options: CallOptions(deadline: .seconds(5))).contacts
        return Dictionary(contacts.compactMap { c in c.profile.map { ($0.userId, c.phone) } }, uniquingKeysWith: { a, _ in a })
    }

    public func verifyPassword(user: UInt64, password: String) async throws -> Bool {
        try await accounts.call(AccountsV1.AccountsService.verifyPassword, AccountsV1.VerifyPasswordRequest(userId: user, password: password),
                                options: CallOptions(deadline: .seconds(5), idempotent: true)).valid
    }
}
