import Foundation
import GRDB
public import FriensoProto
import Logging
public import Storage
public import SocialReplica
import Identity
public import Wire

/// The social graph: friend requests, friendships, blocks, the core circle, pokes and notices,
/// discovery, and the graph snapshot replicas load. One file per feature, each with its handlers
/// and its storage; profiles come from accounts (internal methods).
public final class SocialService: Sendable {
    public typealias API = SocialV1.SocialService
    typealias AccountsAPI = AccountsV1.AccountsService

    let store: any SocialStorage
    let accounts: any RPCCalling
    /// Geo, for the caller's latest fix when an exchange is added without a location (optional:
    /// without it, or when geo does not answer, the exchange is recorded without coordinates).
    let geo: (any RPCCalling)?
    let now: @Sendable () -> Int64
    let circleLimit: Int
    let publisher: any NumberedEventSink
    /// Profiles in memory (accounts' stream); nil: every profile is asked of accounts.
    let profileReplica: ProfileReplica?
    let friendLists: FriendListCache
    let pokeInterval: Int64
    let snapshotPageSize: Int
    public let replyStore: AnyReplyStore

    /// The stream graph events are numbered in.
    public static let graphStream = "graph"

    /// Opens (or creates) `<directory>/social.sqlite` (the embedded engine).
    /// - Parameter accounts: the accounts service (a `WireClient` in production), for profiles and usernames.
    /// - Parameters:
    ///   - publisher: where graph events go (run it next to the host); its epoch and numbering
    ///     are what `GraphSnapshot` reports.
    ///   - circleLimit: how many people a core circle holds.
    ///   - pokeInterval: the least time between two pokes of the same pair.
    ///   - snapshotPageSize: facts per `GraphSnapshot` page (100,000 fit well under a 4 MiB frame).
    ///   - profiles: a replica of accounts' profiles (run it beside the host); nil asks accounts.
    public convenience init(directory: String, accounts: any RPCCalling, publisher: any NumberedEventSink, circleLimit: Int = 3,
                            pokeInterval: Duration = .seconds(60), snapshotPageSize: Int = 100_000, geo: (any RPCCalling)? = nil,
                            profiles: ProfileReplica? = nil, now: (@Sendable () -> Int64)? = nil) throws {
        let friendLists = FriendListCache()
        let store = try SQLiteSocialStore(path: "\(directory)/social.sqlite",
                                          onCommit: Self.announcer(friendLists: friendLists, publisher: publisher))
        self.init(store: store, friendLists: friendLists, accounts: accounts, publisher: publisher, circleLimit: circleLimit,
                  pokeInterval: pokeInterval, snapshotPageSize: snapshotPageSize, geo: geo, profiles: profiles, now: now)
    }

    /// Opens social's storage on `engine` (its migrations run first), as `init(directory:…)`.
    /// On PostgreSQL the graph events go to the database's event log (`PostgresEventLog`), in the
    /// mutations' transactions, and `publisher` relays them: any number of instances publish one
    /// stream, and each drops the cached friend lists another instance's changes touched as it
    /// relays them (within the log's poll interval).
    public static func open(_ engine: StorageEngine, accounts: any RPCCalling, publisher: any ServiceEventSink, circleLimit: Int = 3,
                            pokeInterval: Duration = .seconds(60), snapshotPageSize: Int = 100_000, geo: (any RPCCalling)? = nil,
                            profiles: ProfileReplica? = nil, now: (@Sendable () -> Int64)? = nil) async throws -> SocialService {
        switch engine {
        case .sqlite(let directory):
            return try SocialService(directory: directory, accounts: accounts, publisher: publisher, circleLimit: circleLimit,
                                     pokeInterval: pokeInterval, snapshotPageSize: snapshotPageSize, geo: geo, profiles: profiles, now: now)
        case .postgres(let database):
            let friendLists = FriendListCache()
            let log = try await PostgresEventLog.open(database, streams: [graphStream], publisher: publisher) { _, payload in
                if let event = try? SocialV1.GraphEvent(serializedBytes: payload) { friendLists.touched([event.userA, event.userB]) }
            }
            let store = try await PostgresSocialStore.open(database, onCommit: announcer(friendLists: friendLists, publisher: log))
            return SocialService(store: store, friendLists: friendLists, accounts: accounts, publisher: log, circleLimit: circleLimit,
                                 pokeInterval: pokeInterval, snapshotPageSize: snapshotPageSize, geo: geo, profiles: profiles, now: now)
        }
    }

    init(store: any SocialStorage, friendLists: FriendListCache, accounts: any RPCCalling, publisher: any NumberedEventSink,
         circleLimit: Int, pokeInterval: Duration, snapshotPageSize: Int, geo: (any RPCCalling)?,
         profiles: ProfileReplica?, now: (@Sendable () -> Int64)?) {
        self.store = store
        self.friendLists = friendLists
        profileReplica = profiles
        self.geo = geo
        self.snapshotPageSize = max(1, snapshotPageSize)
        self.circleLimit = max(1, circleLimit)
        self.pokeInterval = pokeInterval.wholeMilliseconds
        self.publisher = publisher
        self.accounts = accounts
        self.now = now ?? { WallClock.milliseconds() }
        replyStore = AnyReplyStore(store.replies)
    }

    /// What a store does with a commit's graph events (in commit order, before the change is
    /// acknowledged): no cached friend list outlives it, and the replicas hear of it.
    static func announcer(friendLists: FriendListCache, publisher: any NumberedEventSink) -> @Sendable ([SocialV1.GraphEvent]) -> Void {
        { events in
            let users = events.flatMap { [$0.userA, $0.userB] }
            friendLists.touched(users)
            PostgresEventLog.alsoAfterCommit { friendLists.touched(users) }
            for event in events {
                publisher.emit(topic: graphStream, method: "social.GraphEvent", payload: event.serializedBytes())
            }
        }
    }

    // MARK: Users, through accounts

    /// The id of the user named by id or username; NOT_FOUND when there is none.
    func resolve(userID: UInt64, username: String, _ context: RequestContext) async throws -> UInt64 {
        switch (userID, username.isEmpty) {
        case (0, true): throw RPCError.invalidArgument("name the user by user_id or username")
        case (let id, true):
            guard try await profiles([id], context)[id] != nil else { throw RPCError.notFound("no user \(id)") }
            return id
        case (0, false):
            guard username.count <= 64 else { throw RPCError.invalidArgument("username: too long") }
            let found = try await accounts.call(AccountsAPI.findUsers, AccountsV1.FindUsersRequest(usernames: [username]),
                                                options: CallOptions(deadline: context.downstreamBudget))
            guard let profile = found.profiles.first else { throw RPCError.notFound("no user named \"\(username)\"") }
            return profile.userId
        default:
            throw RPCError.invalidArgument("give user_id or username, not both")
        }
    }

    func profiles(_ ids: Set<UInt64>, _ context: RequestContext) async throws -> [UInt64: SocialV1.UserRef] {
        guard !ids.isEmpty else { return [:] }
        guard let lookup = replicaLookup(ids) else { return try await askAccounts(ids, context) }
        // A user whose event has not arrived yet (just registered), or no such user: accounts says.
        guard !lookup.missing.isEmpty else { return lookup.found }
        return lookup.found.merging(try await askAccounts(lookup.missing, context)) { $1 }
    }

    static func ref(_ p: AccountsV1.Profile) -> SocialV1.UserRef {
        SocialV1.UserRef(userId: p.userId, username: p.username, firstName: p.firstName, lastName: p.lastName,
                         profilePictureMediaId: p.profilePictureMediaId)
    }

    /// Every one of `ids` from the replica, or nil (not ready, or someone not replicated yet).
    func replicatedProfiles(_ ids: Set<UInt64>) -> [UInt64: SocialV1.UserRef]? {
        guard let (found, missing) = replicaLookup(ids), missing.isEmpty else { return nil }
        return found
    }

    /// What the replica has of `ids`, and whom it lacks; nil until it has loaded.
    private func replicaLookup(_ ids: Set<UInt64>) -> (found: [UInt64: SocialV1.UserRef], missing: Set<UInt64>)? {
        guard let replica = profileReplica, replica.isReady else { return nil }
        return replica.read { directory in
            var found: [UInt64: SocialV1.UserRef] = [:], missing = Set<UInt64>()
            found.reserveCapacity(ids.count)
            for id in ids {
                if let profile = directory[id] { found[id] = Self.ref(profile) } else { missing.insert(id) }
            }
            return (found, missing)
        }
    }

    private func askAccounts(_ ids: Set<UInt64>, _ context: RequestContext) async throws -> [UInt64: SocialV1.UserRef] {
        var result: [UInt64: SocialV1.UserRef] = [:]
        let all = Array(ids)
        for start in stride(from: 0, to: all.count, by: 500) {
            let batch = Array(all[start..<min(start + 500, all.count)])
            let reply = try await accounts.call(AccountsAPI.getProfiles, AccountsV1.GetProfilesRequest(userIds: batch),
                                                options: CallOptions(deadline: context.downstreamBudget))
            for p in reply.profiles { result[p.userId] = Self.ref(p) }
        }
        return result
    }
}

/// Every rpc of the contract has its handler (or the build fails): see `MethodRouter.register(all:)`.
extension SocialService: FriensoService, SocialV1.SocialService.Handler {
    /// The generated routes, with friend lists answered as the cache keeps them: encoded.
    public func router() -> MethodRouter {
        var router = MethodRouter()
        router.register(all: self)
        router.replace(API.listFriends) { _, context in try await self.encodedFriendList(context) }
        // Before their one write they only read (who the user named): no read of the reply store
        // first (issue 16, item 54; `MethodRouter.claimFirst`).
        router.claimFirst(API.sendFriendRequest)
        router.claimFirst(API.respondToFriendRequest)
        router.claimFirst(API.cancelFriendRequest)
        return router
    }
}
