import Foundation
import GRDB
public import FriensoProto
import Logging
public import Storage
import Identity
public import Wire

/// Friend requests, friendships and blocks. Profiles come from accounts (internal methods).
public final class SocialService: Sendable {
    public typealias API = SocialV1.SocialService
    typealias AccountsAPI = AccountsV1.AccountsService

    let store: SocialStore
    let accounts: WireClient
    /// Geo, for the caller's latest fix when an exchange is added without a location (optional:
    /// without it, or when geo does not answer, the exchange is recorded without coordinates).
    let geo: WireClient?
    let now: @Sendable () -> Int64
    let circleLimit: Int
    private let publisher: Publisher
    private let pokeInterval: Int64
    private let snapshotPageSize: Int
    public let replyStore: SQLiteReplyStore

    /// The stream graph events are numbered in.
    public static let graphStream = "graph"

    /// Opens (or creates) `<directory>/social.sqlite`.
    /// - Parameter accounts: a client to the accounts service, for profiles and usernames.
    /// - Parameters:
    ///   - publisher: where graph events go (run it next to the host); its epoch and numbering
    ///     are what `GraphSnapshot` reports.
    ///   - circleLimit: how many people a core circle holds.
    ///   - pokeInterval: the least time between two pokes of the same pair.
    ///   - snapshotPageSize: facts per `GraphSnapshot` page (100,000 fit well under a 4 MiB frame).
    public init(directory: String, accounts: WireClient, publisher: Publisher, circleLimit: Int = 3,
                pokeInterval: Duration = .seconds(60), snapshotPageSize: Int = 100_000, geo: WireClient? = nil,
                now: (@Sendable () -> Int64)? = nil) throws {
        self.geo = geo
        self.snapshotPageSize = max(1, snapshotPageSize)
        self.circleLimit = max(1, circleLimit)
        self.pokeInterval = pokeInterval.wholeMilliseconds
        self.publisher = publisher
        store = try SocialStore(path: "\(directory)/social.sqlite") { events in
            for event in events {
                publisher.publish(topic: Self.graphStream, method: "social.GraphEvent", payload: event.serializedBytes())
            }
        }
        self.accounts = accounts
        self.now = now ?? { WallClock.milliseconds() }
        replyStore = SQLiteReplyStore(database: store.database)
    }



    // MARK: Requests

    public func sendFriendRequest(_ request: SocialV1.SendFriendRequestRequest, _ context: RequestContext) async throws -> SocialV1.SendFriendRequestResponse {
        let caller = try context.requireCaller()
        let target = try await resolve(userID: request.userId, username: request.username, context)
        switch try await store.send(from: caller, to: target, now: now()) {
        case .created(let record), .existing(let record):
            return SocialV1.SendFriendRequestResponse(request: try await view(record, context))
        case .collapsed(let record):
            context.logger.info("mutual requests collapsed into a friendship", metadata: ["users": "\(caller),\(target)"])
            return SocialV1.SendFriendRequestResponse(request: try await view(record, context), becameFriends: true)
        }
    }

    public func respondToFriendRequest(_ request: SocialV1.RespondToFriendRequestRequest, _ context: RequestContext) async throws -> SocialV1.RespondToFriendRequestResponse {
        let caller = try context.requireCaller()
        guard request.requestId != 0 else { throw RPCError.invalidArgument("request_id: required") }
        guard [.accept, .reject, .dismiss].contains(request.action) else { throw RPCError.invalidArgument("action: accept, reject or dismiss") }
        let record = try await store.respond(caller: caller, requestID: request.requestId, action: request.action, now: now())
        return SocialV1.RespondToFriendRequestResponse(request: try await view(record, context))
    }

    public func cancelFriendRequest(_ request: SocialV1.CancelFriendRequestRequest, _ context: RequestContext) async throws -> SocialV1.CancelFriendRequestResponse {
        let caller = try context.requireCaller()
        guard request.requestId != 0 else { throw RPCError.invalidArgument("request_id: required") }
        let record = try await store.cancel(caller: caller, requestID: request.requestId, now: now())
        return SocialV1.CancelFriendRequestResponse(request: try await view(record, context))
    }

    public func listFriendRequests(_ request: SocialV1.ListFriendRequestsRequest, _ context: RequestContext) async throws -> SocialV1.ListFriendRequestsResponse {
        let caller = try context.requireCaller()
        let (incoming, outgoing) = try await store.pendingRequests(of: caller, includeDismissed: request.includeDismissed)
        let users = try await profiles(Set((incoming + outgoing).flatMap { [$0.from, $0.to] }), context)
        return SocialV1.ListFriendRequestsResponse(
            incoming: incoming.map { Self.view($0, users) }, outgoing: outgoing.map { Self.view($0, users) })
    }

    // MARK: Friends

    public func listFriends(_ request: SocialV1.ListFriendsRequest, _ context: RequestContext) async throws -> SocialV1.ListFriendsResponse {
        let caller = try context.requireCaller()
        let edges = try await store.friends(of: caller)
        let users = try await profiles(Set(edges.map(\.id)), context)
        let friends = edges.map { SocialV1.Friend(user: users[$0.id] ?? SocialV1.UserRef(userId: $0.id), sinceMs: $0.since) }
        return SocialV1.ListFriendsResponse(friends: friends.sorted { ($0.user?.username ?? "") < ($1.user?.username ?? "") })
    }

    public func removeFriend(_ request: SocialV1.RemoveFriendRequest, _ context: RequestContext) async throws -> SocialV1.RemoveFriendResponse {
        let caller = try context.requireCaller()
        let other = try await resolve(userID: request.userId, username: request.username, context)
        try await store.removeFriend(caller, other)
        return SocialV1.RemoveFriendResponse()
    }

    // MARK: Blocks

    public func block(_ request: SocialV1.BlockRequest, _ context: RequestContext) async throws -> SocialV1.BlockResponse {
        let caller = try context.requireCaller()
        let other = try await resolve(userID: request.userId, username: request.username, context)
        let result = try await store.block(caller, other, now: now())
        return SocialV1.BlockResponse(removedFriendship: result.removedFriendship, removedRequests: UInt32(result.removedRequests))
    }

    public func unblock(_ request: SocialV1.UnblockRequest, _ context: RequestContext) async throws -> SocialV1.UnblockResponse {
        let caller = try context.requireCaller()
        let other = try await resolve(userID: request.userId, username: request.username, context)
        try await store.unblock(caller, other)
        return SocialV1.UnblockResponse()
    }

    public func listBlocked(_ request: SocialV1.ListBlockedRequest, _ context: RequestContext) async throws -> SocialV1.ListBlockedResponse {
        let caller = try context.requireCaller()
        let ids = try await store.blocked(by: caller)
        let users = try await profiles(Set(ids), context)
        return SocialV1.ListBlockedResponse(users: ids.map { users[$0] ?? SocialV1.UserRef(userId: $0) })
    }

    // MARK: Pokes

    public func poke(_ request: SocialV1.PokeRequest, _ context: RequestContext) async throws -> SocialV1.PokeResponse {
        let caller = try context.requireCaller()
        let target = try await resolve(userID: request.userId, username: request.username, context)
        let at = now()
        let id = try await store.poke(from: caller, to: target, now: at, interval: pokeInterval)
        let me = try await profiles([caller], context)[caller] ?? SocialV1.UserRef(userId: caller)
        let poke = SocialV1.Poke(pokeId: id, from: me, toUserId: target, createdAtMs: at)
        let payload = poke.serializedBytes()
        publisher.publish(topic: "viewer.\(target)", method: "social.Poke", payload: payload) // live, through the gateway
        wakeNoticeReaders()
        return SocialV1.PokeResponse(poke: poke)
    }

    // MARK: Notices (delivered by the alerts service)

    /// The stream that tells notice readers (alerts) to pull: the notices themselves are in the
    /// database, so a reader that missed this event still gets them on its next pull.
    public static let noticeStream = "notices"

    func wakeNoticeReaders() {
        publisher.publish(topic: Self.noticeStream, method: "social.Notice", payload: [])
    }

    public func listNotices(_ request: SocialV1.ListNoticesRequest, _ context: RequestContext) async throws -> SocialV1.ListNoticesResponse {
        let limit = request.limit == 0 ? 500 : Int(request.limit)
        guard (1...1000).contains(limit) else { throw RPCError.invalidArgument("limit: 1-1000") }
        var notices = try await store.notices(after: request.afterId, limit: limit)
        let users = try await profiles(Set(notices.compactMap { $0.from?.userId }), context)
        for i in notices.indices {
            if let id = notices[i].from?.userId, let user = users[id] { notices[i].from = user }
        }
        return SocialV1.ListNoticesResponse(notices: notices)
    }

    // MARK: Replication

    /// A page of the graph. The first page is read on the writer queue, where every committed
    /// change has already been published, so its sequence number is exact; later pages may
    /// include later events, which the replica's replay makes harmless (see the proto).
    public func graphSnapshot(_ request: SocialV1.GraphSnapshotRequest, _ context: RequestContext) async throws -> SocialV1.GraphSnapshotResponse {
        let publisher = publisher, sequenceOnly = request.sequenceOnly, limit = snapshotPageSize
        let cursor = try SocialStore.SnapshotCursor(request.cursor)
        let read: @Sendable (Database) throws -> SocialV1.GraphSnapshotResponse = { db in
            var page = SocialV1.GraphSnapshotResponse(epoch: publisher.epoch, sequence: publisher.lastSequence(stream: Self.graphStream))
            guard !sequenceOnly else { return page }
            page.nextCursor = try SocialStore.snapshotPage(db, after: cursor, limit: limit, into: &page)?.text ?? ""
            return page
        }
        // Only the first page's number must match its data exactly; later pages are read from
        // the reader pool so a large snapshot does not hold up writes.
        return cursor == .start ? try await store.onWriterQueue(read) : try await store.database.read(read)
    }

    // MARK: Search

    public func searchUsers(_ request: SocialV1.SearchUsersRequest, _ context: RequestContext) async throws -> SocialV1.SearchUsersResponse {
        let caller = try context.requireCaller()
        let query = request.query.trimmingCharacters(in: .whitespaces)
        guard (1...50).contains(query.count) else { throw RPCError.invalidArgument("query: 1-50 characters") }
        let pageSize = request.pageSize == 0 ? 20 : Int(request.pageSize)
        guard pageSize <= 50 else { throw RPCError.invalidArgument("page_size: at most 50") }
        guard request.pageToken.isEmpty || (request.pageToken.hasPrefix("u:") && request.pageToken.count <= 66) else {
            throw RPCError.invalidArgument("page_token: not a token from a previous page")
        }
        var after = String(request.pageToken.dropFirst(2))
        var excluded = try await store.excludedFromDiscovery(for: caller)
        excluded.insert(caller)
        var users: [SocialV1.UserRef] = []
        var exhausted = false
        // Filtering can empty a batch; a few rounds fill the page (bounded, so a pathological
        // prefix cannot keep the handler busy).
        for _ in 0..<10 where users.count < pageSize && !exhausted {
            let batch = try await accounts.call(AccountsAPI.searchUsers,
                                                AccountsV1.SearchUsersRequest(prefix: query, afterUsername: after, limit: 100),
                                                options: CallOptions(deadline: context.downstreamBudget, idempotent: true))
            for profile in batch.profiles {
                after = profile.username
                if excluded.contains(profile.userId) { continue }
                users.append(SocialV1.UserRef(userId: profile.userId, username: profile.username, firstName: profile.firstName,
                                              lastName: profile.lastName, profilePictureMediaId: profile.profilePictureMediaId))
                if users.count == pageSize { break }
            }
            exhausted = !batch.more && (users.count < pageSize || after == batch.profiles.last?.username)
        }
        let next = exhausted ? "" : "u:\(after)"
        return SocialV1.SearchUsersResponse(users: users, nextPageToken: next)
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
                                                options: CallOptions(deadline: context.downstreamBudget, idempotent: true))
            guard let profile = found.profiles.first else { throw RPCError.notFound("no user named \"\(username)\"") }
            return profile.userId
        default:
            throw RPCError.invalidArgument("give user_id or username, not both")
        }
    }

    func profiles(_ ids: Set<UInt64>, _ context: RequestContext) async throws -> [UInt64: SocialV1.UserRef] {
        guard !ids.isEmpty else { return [:] }
        var result: [UInt64: SocialV1.UserRef] = [:]
        let all = Array(ids)
        for start in stride(from: 0, to: all.count, by: 500) {
            let batch = Array(all[start..<min(start + 500, all.count)])
            let reply = try await accounts.call(AccountsAPI.getProfiles, AccountsV1.GetProfilesRequest(userIds: batch),
                                                options: CallOptions(deadline: context.downstreamBudget, idempotent: true))
            for p in reply.profiles {
                result[p.userId] = SocialV1.UserRef(userId: p.userId, username: p.username, firstName: p.firstName,
                                                    lastName: p.lastName, profilePictureMediaId: p.profilePictureMediaId)
            }
        }
        return result
    }

    private func view(_ record: RequestRecord, _ context: RequestContext) async throws -> SocialV1.FriendRequest {
        Self.view(record, try await profiles([record.from, record.to], context))
    }

    private static func view(_ record: RequestRecord, _ users: [UInt64: SocialV1.UserRef]) -> SocialV1.FriendRequest {
        SocialV1.FriendRequest(
            requestId: record.id, from: users[record.from] ?? SocialV1.UserRef(userId: record.from),
            to: users[record.to] ?? SocialV1.UserRef(userId: record.to), state: record.state, dismissed: record.dismissed,
            createdAtMs: record.createdAtMs, updatedAtMs: record.updatedAtMs)
    }
}

/// Every rpc of the contract has its handler (or the build fails): see `MethodRouter.register(all:)`.
extension SocialService: FriensoService, SocialV1.SocialService.Handler {}
