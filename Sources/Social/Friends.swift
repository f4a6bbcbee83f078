import Foundation
public import FriensoProto
import GRDB
import Storage
import Synchronization
public import Wire

/// Friend requests, friendships and blocks: the handlers, then the rules and their storage.
extension SocialService {
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
        try SocialV1.ListFriendsResponse(serializedBytes: try await encodedFriendList(context))
    }

    /// The caller's friend list, encoded: from the cache when neither their friendships nor any
    /// replicated profile changed since it was made (the router answers these bytes as they are).
    func encodedFriendList(_ context: RequestContext) async throws -> [UInt8] {
        let caller = try context.requireCaller()
        // Versions first, then the data: a change committed meanwhile makes the entry stale at once.
        let graph = friendLists.graphVersion(of: caller)
        let profilesVersion = profileReplica.flatMap { $0.isReady ? $0.read(\.version) : nil }
        if let profilesVersion, let cached = friendLists.get(caller, graph: graph, profiles: profilesVersion) { return cached }
        let edges = try await store.friends(of: caller)
        let ids = Set(edges.map(\.id))
        let fromReplica = replicatedProfiles(ids)
        let users: [UInt64: SocialV1.UserRef]
        if let fromReplica { users = fromReplica } else { users = try await profiles(ids, context) }
        let friends = edges.map { SocialV1.Friend(user: users[$0.id] ?? SocialV1.UserRef(userId: $0.id), sinceMs: $0.since) }
        let encoded = SocialV1.ListFriendsResponse(friends: friends.sorted { ($0.user?.username ?? "") < ($1.user?.username ?? "") })
            .serializedBytes()
        // Kept only when every name came from the replica (its version covers them).
        if let profilesVersion, fromReplica != nil { friendLists.put(caller, graph: graph, profiles: profilesVersion, encoded) }
        return encoded
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

    func view(_ record: RequestRecord, _ context: RequestContext) async throws -> SocialV1.FriendRequest {
        Self.view(record, try await profiles([record.from, record.to], context))
    }

    static func view(_ record: RequestRecord, _ users: [UInt64: SocialV1.UserRef]) -> SocialV1.FriendRequest {
        SocialV1.FriendRequest(
            requestId: record.id, from: users[record.from] ?? SocialV1.UserRef(userId: record.from),
            to: users[record.to] ?? SocialV1.UserRef(userId: record.to), state: record.state, dismissed: record.dismissed,
            createdAtMs: record.createdAtMs, updatedAtMs: record.updatedAtMs)
    }
}

/// Each user's friend list as last answered (encoded), kept while neither their friendships (a graph event
/// naming them, counted after it committed and before the change is acknowledged) nor any
/// replicated profile (the directory's version) changed since: a list of 200 is then one lookup.
final class FriendListCache: Sendable {
    private struct Entry {
        var graph: UInt64
        var profiles: UInt64
        /// The encoded `ListFriendsResponse`.
        var response: [UInt8]
    }
    private struct State {
        var clock: UInt64 = 0
        var graphVersions: [UInt64: UInt64] = [:]
        var lists: [UInt64: Entry] = [:]
    }
    private let state = Mutex(State())
    private let capacity: Int

    init(capacity: Int = 50_000) {
        self.capacity = capacity
    }

    func graphVersion(of user: UInt64) -> UInt64 { state.withLock { $0.graphVersions[user] ?? 0 } }

    /// Their friendships changed (committed).
    func touched(_ users: [UInt64]) {
        state.withLock { s in
            s.clock += 1
            for user in users { s.graphVersions[user] = s.clock; s.lists[user] = nil }
        }
    }

    func get(_ user: UInt64, graph: UInt64, profiles: UInt64) -> [UInt8]? {
        state.withLock { s in
            guard let entry = s.lists[user], entry.graph == graph, entry.profiles == profiles else { return nil }
            return entry.response
        }
    }

    func put(_ user: UInt64, graph: UInt64, profiles: UInt64, _ response: [UInt8]) {
        state.withLock { s in
            if s.lists.count >= capacity { s.lists.removeAll(keepingCapacity: true) }
            s.lists[user] = Entry(graph: graph, profiles: profiles, response: response)
        }
    }
}

// MARK: - Storage

/// Why a friend request, a friendship, a block or a poke is refused: the social rules as values
/// (the service maps each to a status, `SocialService+Refusals.swift`).
enum FriendRefusal: Error, Equatable {
    case requestToYourself
    case requestAcrossBlock
    case alreadyFriends
    case noRequest(UInt64)
    case notAddressedToYou(UInt64)
    case answeredAlready(UInt64, SocialV1.RequestState)
    case unknownAction
    case notYourRequest(UInt64)
    case noLongerPending(UInt64)
    case notFriends(UInt64)
    case blockYourself
    case notBlocked(UInt64)
    case pokeYourself
    case pokeStranger
    case pokedRecently(agoMs: Int64, waitMs: Int64)
}

/// A friend request row.
struct RequestRecord: Sendable {
    var id: UInt64
    var from: UInt64
    var to: UInt64
    var state: SocialV1.RequestState
    var dismissed: Bool
    var createdAtMs: Int64
    var updatedAtMs: Int64

    init(id: UInt64, from: UInt64, to: UInt64, state: SocialV1.RequestState, dismissed: Bool, createdAtMs: Int64, updatedAtMs: Int64) {
        self.id = id
        self.from = from
        self.to = to
        self.state = state
        self.dismissed = dismissed
        self.createdAtMs = createdAtMs
        self.updatedAtMs = updatedAtMs
    }

    init(row: CurrentRow) throws {
        id = try row["id"]
        from = try row["from_user"]
        to = try row["to_user"]
        state = try SocialV1.RequestState(rawValue: row["state"])
        dismissed = try row["dismissed"]
        createdAtMs = try row["created_at_ms"]
        updatedAtMs = try row["updated_at_ms"]
    }
}

struct BlockOutcome: Sendable {
    var removedFriendship: Bool
    var removedRequests: Int
}

/// What sending a request did.
enum SendOutcome: Sendable {
    case created(RequestRecord)
    /// The same request was already pending.
    case existing(RequestRecord)
    /// The other user had already asked: their request is now accepted and you are friends.
    case collapsed(RequestRecord)
}

extension SQLiteSocialStore {
    static func request(_ db: Database, id: UInt64) throws -> RequestRecord? {
        try Row.fetchOne(db, cached: "SELECT * FROM friend_requests WHERE id = ?", binding: id, as: RequestRecord.init(row:))
    }

    static func pendingRequest(_ db: Database, from: UInt64, to: UInt64) throws -> RequestRecord? {
        try Row.fetchOne(db, cached: "SELECT * FROM friend_requests WHERE from_user = ? AND to_user = ? AND state = ?",
                         binding: from, to, pending, as: RequestRecord.init(row:))
    }

    static func befriend(_ db: Database, _ x: UInt64, _ y: UInt64, now: Int64) throws {
        let (a, b) = edge(x, y)
        try db.run(sql: "INSERT OR IGNORE INTO friendships (user_a, user_b, since_ms) VALUES (?, ?, ?)", arguments: [a, b, now])
    }

    func send(from: UInt64, to: UInt64, now: Int64) async throws -> SendOutcome {
        try await mutate { db, events in
            guard from != to else { throw FriendRefusal.requestToYourself }
            guard try !Self.blocked(db, from, to) else { throw FriendRefusal.requestAcrossBlock }
            guard try !Self.areFriends(db, from, to) else { throw FriendRefusal.alreadyFriends }
            if let theirs = try Self.pendingRequest(db, from: to, to: from) {
                try db.run(sql: "UPDATE friend_requests SET state = ?, updated_at_ms = ? WHERE id = ?",
                               arguments: [SocialV1.RequestState.accepted.rawValue, now, theirs.id])
                try Self.befriend(db, from, to, now: now)
                let (a, b) = Self.edge(from, to)
                events.append(Self.event(.friendshipAdded, a, b))
                return .collapsed(try Self.request(db, id: theirs.id) ?? theirs)
            }
            if let mine = try Self.pendingRequest(db, from: from, to: to) { return .existing(mine) }
            try db.run(sql: """
                INSERT INTO friend_requests (from_user, to_user, state, created_at_ms, updated_at_ms) VALUES (?, ?, ?, ?, ?)
                """, arguments: [from, to, Self.pending, now, now])
            guard let created = try Self.request(db, id: UInt64(db.lastInsertedRowID)) else { throw StoreInvariant("the friend request just written is missing") }
            return .created(created)
        }
    }

    /// Accept, reject or dismiss a request addressed to `caller`.
    func respond(caller: UInt64, requestID: UInt64, action: SocialV1.RequestAction, now: Int64) async throws -> RequestRecord {
        try await mutate { db, events in
            guard let request = try Self.request(db, id: requestID) else { throw FriendRefusal.noRequest(requestID) }
            guard request.to == caller else { throw FriendRefusal.notAddressedToYou(requestID) }
            // The same answer again (a resend whose first reply was lost, even across a restart)
            // is answered with the request as it is: nothing changes twice.
            if (action == .accept && request.state == .accepted) || (action == .reject && request.state == .rejected) { return request }
            guard request.state == .pending else {
                throw FriendRefusal.answeredAlready(requestID, request.state)
            }
            switch action {
            case .accept:
                try db.run(sql: "UPDATE friend_requests SET state = ?, updated_at_ms = ? WHERE id = ?",
                               arguments: [SocialV1.RequestState.accepted.rawValue, now, requestID])
                try Self.befriend(db, request.from, request.to, now: now)
                let (a, b) = Self.edge(request.from, request.to)
                events.append(Self.event(.friendshipAdded, a, b))
            case .reject:
                try db.run(sql: "UPDATE friend_requests SET state = ?, updated_at_ms = ? WHERE id = ?",
                               arguments: [SocialV1.RequestState.rejected.rawValue, now, requestID])
            case .dismiss:
                try db.run(sql: "UPDATE friend_requests SET dismissed = 1, updated_at_ms = ? WHERE id = ?", arguments: [now, requestID])
            default:
                throw FriendRefusal.unknownAction
            }
            guard let updated = try Self.request(db, id: requestID) else { throw StoreInvariant("the friend request just written is missing") }
            return updated
        }
    }

    func cancel(caller: UInt64, requestID: UInt64, now: Int64) async throws -> RequestRecord {
        try await database.write { db in
            guard let request = try Self.request(db, id: requestID) else { throw FriendRefusal.noRequest(requestID) }
            guard request.from == caller else { throw FriendRefusal.notYourRequest(requestID) }
            if request.state == .cancelled { return request } // cancelled already: a resend, answered as it is
            guard request.state == .pending else { throw FriendRefusal.noLongerPending(requestID) }
            try db.run(sql: "UPDATE friend_requests SET state = ?, updated_at_ms = ? WHERE id = ?",
                           arguments: [SocialV1.RequestState.cancelled.rawValue, now, requestID])
            guard let updated = try Self.request(db, id: requestID) else { throw StoreInvariant("the friend request just written is missing") }
            return updated
        }
    }

    func pendingRequests(of user: UInt64, includeDismissed: Bool) async throws -> (incoming: [RequestRecord], outgoing: [RequestRecord]) {
        try await database.read { db in
            let incoming = try Row.fetchAll(db, cached: """
                SELECT * FROM friend_requests WHERE to_user = ? AND state = ? \(includeDismissed ? "" : "AND dismissed = 0")
                ORDER BY created_at_ms DESC, id DESC
                """, binding: user, Self.pending, as: RequestRecord.init(row:))
            let outgoing = try Row.fetchAll(db, cached: """
                SELECT * FROM friend_requests WHERE from_user = ? AND state = ? ORDER BY created_at_ms DESC, id DESC
                """, binding: user, Self.pending, as: RequestRecord.init(row:))
            return (incoming, outgoing)
        }
    }

    /// - Returns: each friend's id and the time the friendship began.
    func friends(of user: UInt64) async throws -> [(id: UInt64, since: Int64)] {
        try await database.read { db in
            try Row.fetchAll(db, cached: """
                SELECT user_b AS other, since_ms FROM friendships WHERE user_a = ?
                UNION ALL SELECT user_a AS other, since_ms FROM friendships WHERE user_b = ?
                """, binding: user, user) { try (id: $0["other"], since: $0["since_ms"]) }
        }
    }

    func removeFriend(_ user: UInt64, _ other: UInt64) async throws {
        try await mutate { db, events in
            let (a, b) = Self.edge(user, other)
            try db.run(sql: "DELETE FROM friendships WHERE user_a = ? AND user_b = ?", arguments: [a, b])
            guard db.changesCount == 1 else { throw FriendRefusal.notFriends(other) }
            events.append(Self.event(.friendshipRemoved, a, b))
            events += try Self.dropCircle(db, user, other)
        }
    }

    /// Blocks `other`: ends the friendship and cancels pending requests both ways.
    func block(_ user: UInt64, _ other: UInt64, now: Int64) async throws -> BlockOutcome {
        try await mutate { db, events in
            guard user != other else { throw FriendRefusal.blockYourself }
            try db.run(sql: "INSERT OR IGNORE INTO blocks (blocker, blocked, created_at_ms) VALUES (?, ?, ?)", arguments: [user, other, now])
            if db.changesCount == 1 { events.append(Self.event(.blockAdded, user, other)) }
            let (a, b) = Self.edge(user, other)
            try db.run(sql: "DELETE FROM friendships WHERE user_a = ? AND user_b = ?", arguments: [a, b])
            let removedFriendship = db.changesCount == 1
            if removedFriendship { events.append(Self.event(.friendshipRemoved, a, b)) }
            events += try Self.dropCircle(db, user, other)
            try db.run(sql: """
                UPDATE friend_requests SET state = ?, updated_at_ms = ?
                WHERE state = ? AND ((from_user = ? AND to_user = ?) OR (from_user = ? AND to_user = ?))
                """, arguments: [SocialV1.RequestState.cancelled.rawValue, now, Self.pending, user, other, other, user])
            let removedRequests = db.changesCount
            try db.run(sql: "DELETE FROM exchange_intents WHERE (from_user = ?1 AND to_user = ?2) OR (from_user = ?2 AND to_user = ?1)",
                           arguments: [user, other])
            return BlockOutcome(removedFriendship: removedFriendship, removedRequests: removedRequests)
        }
    }

    func unblock(_ user: UInt64, _ other: UInt64) async throws {
        try await mutate { db, events in
            try db.run(sql: "DELETE FROM blocks WHERE blocker = ? AND blocked = ?", arguments: [user, other])
            guard db.changesCount == 1 else { throw FriendRefusal.notBlocked(other) }
            events.append(Self.event(.blockRemoved, user, other))
        }
    }

    func blocked(by user: UInt64) async throws -> [UInt64] {
        try await database.read { db in
            try UInt64.fetchAll(db, cached: "SELECT blocked FROM blocks WHERE blocker = ? ORDER BY created_at_ms, rowid", arguments: [user])
        }
    }
}
