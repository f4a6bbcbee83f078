public import FriensoProto
import GRDB
public import Wire
import Storage
import Identity

/// The core circle: handlers (and alerts' internal circle methods) and storage.

extension SocialService {
    // MARK: Alerts' circle methods (internal): the client rules, for the person alerts serves

    /// The owner's circle as a helpNow needs it, in one read: each member's user id (no names:
    /// alerts names people from its own profile replica) or invited number, and state. Not the
    /// circles the owner is in, and no profile lookups: a raise asks this of every helpNow, and
    /// `showCircle`'s extra read and lookups were most of social's cost per raise
    /// (`docs/benchmarks.md`, issue 16, item 50).
    public func circleOf(_ request: SocialV1.CircleOfRequest, _ context: RequestContext) async throws -> SocialV1.ShowCircleResponse {
        let owner = try Self.acting(as: request.ownerUserId, context).requireCaller()
        let members = try await store.circle(of: owner)
        return SocialV1.ShowCircleResponse(members: members.map { Self.view($0, [:]) }, limit: UInt32(circleLimit))
    }

    /// Whole circles, a page of owners at a time, for alerts' copy (the proto says why).
    public func circleSnapshot(_ request: SocialV1.CircleSnapshotRequest, _ context: RequestContext) async throws -> SocialV1.CircleSnapshotResponse {
        guard request.limit <= 1_000 else { throw RPCError.invalidArgument("limit: at most 1,000 owners a page") }
        let owners = request.limit == 0 ? 500 : Int(request.limit)
        let records = try await store.circles(afterOwner: request.afterOwner, owners: owners)
        var response = SocialV1.CircleSnapshotResponse(entries: records.map { SocialV1.CircleEntry(owner: $0.owner, member: $0.member, phone: $0.phone) })
        // Fewer owners than asked for: the last page.
        var seen = 0, last: UInt64 = 0
        for record in records where record.owner != last { (seen, last) = (seen + 1, record.owner) }
        if seen == owners { response.nextAfterOwner = last }
        return response
    }

    public func circleRequestsFor(_ request: SocialV1.CircleRequestsForRequest, _ context: RequestContext) async throws -> SocialV1.ListCircleRequestsResponse {
        try await listCircleRequests(SocialV1.ListCircleRequestsRequest(), try Self.acting(as: request.memberUserId, context))
    }

    public func answerCircleRequest(_ request: SocialV1.AnswerCircleRequestRequest, _ context: RequestContext) async throws -> SocialV1.RespondToCircleRequestResponse {
        try await respondToCircleRequest(SocialV1.RespondToCircleRequestRequest(ownerUserId: request.ownerUserId, action: request.action),
                                         try Self.acting(as: request.memberUserId, context))
    }

    /// An internal call on a person's behalf (alerts' circle methods): the context of that
    /// person, so the client method's rules apply unchanged. The plane lets only alerts call them.
    static func acting(as user: UInt64, _ context: RequestContext) throws(RPCError) -> RequestContext {
        guard user != 0 else { throw .invalidArgument("name the user this call acts for") }
        var context = context
        context.callerUserID = user
        return context
    }

    // MARK: Core circle

    public func showCircle(_ request: SocialV1.ShowCircleRequest, _ context: RequestContext) async throws -> SocialV1.ShowCircleResponse {
        let caller = try context.requireCaller()
        let members = try await store.circle(of: caller)
        let memberOf = try await store.circles(containing: caller, state: .accepted)
        let users = try await profiles(Set(members.map(\.member).filter { $0 != 0 } + memberOf.map(\.owner)), context)
        return SocialV1.ShowCircleResponse(members: members.map { Self.view($0, users) }, limit: UInt32(circleLimit),
                                           memberOf: memberOf.map { users[$0.owner] ?? SocialV1.UserRef(userId: $0.owner) })
    }

    public func addToCircle(_ request: SocialV1.AddToCircleRequest, _ context: RequestContext) async throws -> SocialV1.AddToCircleResponse {
        let caller = try context.requireCaller()
        let (member, phone) = try await circleTarget(userID: request.userId, username: request.username, phone: request.phone, context)
        let record = try await store.addToCircle(owner: caller, member: member, phone: phone, limit: circleLimit, now: now())
        wakeNoticeReaders()
        return SocialV1.AddToCircleResponse(member: Self.view(record, try await profiles(member == 0 ? [] : [member], context)))
    }

    public func removeFromCircle(_ request: SocialV1.RemoveFromCircleRequest, _ context: RequestContext) async throws -> SocialV1.RemoveFromCircleResponse {
        let caller = try context.requireCaller()
        let (member, phone) = try await circleTarget(userID: request.userId, username: request.username, phone: request.phone, context)
        try await store.removeFromCircle(owner: caller, member: member, phone: phone)
        return SocialV1.RemoveFromCircleResponse()
    }

    public func listCircleRequests(_ request: SocialV1.ListCircleRequestsRequest, _ context: RequestContext) async throws -> SocialV1.ListCircleRequestsResponse {
        let caller = try context.requireCaller()
        let pending = try await store.circles(containing: caller, state: .pending)
        let users = try await profiles(Set(pending.map(\.owner)), context)
        return SocialV1.ListCircleRequestsResponse(requests: pending.map {
            SocialV1.CircleRequest(owner: users[$0.owner] ?? SocialV1.UserRef(userId: $0.owner), addedAtMs: $0.addedAtMs)
        })
    }

    public func respondToCircleRequest(_ request: SocialV1.RespondToCircleRequestRequest, _ context: RequestContext) async throws -> SocialV1.RespondToCircleRequestResponse {
        let caller = try context.requireCaller()
        guard request.action == .accept || request.action == .reject else { throw RPCError.invalidArgument("action: accept or reject") }
        let owner = try await resolve(userID: request.ownerUserId, username: request.ownerUsername, context)
        let record = try await store.respondToCircle(owner: owner, member: caller, accept: request.action == .accept, now: now())
        return SocialV1.RespondToCircleRequestResponse(member: Self.view(record, try await profiles([caller], context)))
    }

    /// A circle member named by user (id or username) or by phone number, exactly one of them.
    func circleTarget(userID: UInt64, username: String, phone: String, _ context: RequestContext) async throws -> (UInt64, String) {
        guard !phone.isEmpty else { return (try await resolve(userID: userID, username: username, context), "") }
        guard userID == 0, username.isEmpty else { throw RPCError.invalidArgument("name a user or a phone number, not both") }
        guard let normalized = PhoneNumber.normalize(phone) else {
            throw RPCError.invalidArgument("phone: use international format, e.g. +15625551234")
        }
        return (0, normalized)
    }

    static func view(_ record: CircleRecord, _ users: [UInt64: SocialV1.UserRef]) -> SocialV1.CircleMember {
        SocialV1.CircleMember(user: record.member == 0 ? nil : users[record.member] ?? SocialV1.UserRef(userId: record.member),
                              phone: record.phone, state: record.state, addedAtMs: record.addedAtMs)
    }
}

/// Why a circle change is refused: the core circle's rules as values (the service maps each to a
/// status, `SocialService+Refusals.swift`).
enum CircleRefusal: Error, Equatable {
    case yourself
    case notFriends
    case alreadyMember
    case full(limit: Int)
    case notMember
    case noPendingRequest(owner: UInt64)
}

/// A row of someone's core circle: a user, or an invited phone number.
struct CircleRecord: Sendable {
    var owner: UInt64
    var member: UInt64   // 0 for an invited phone number
    var phone: String    // "" for a user
    var state: SocialV1.CircleState
    var addedAtMs: Int64

    init(owner: UInt64, member: UInt64, phone: String, state: SocialV1.CircleState, addedAtMs: Int64) {
        self.owner = owner
        self.member = member
        self.phone = phone
        self.state = state
        self.addedAtMs = addedAtMs
    }

    init(row: CurrentRow) throws {
        owner = try row["owner"]
        member = try row["member"]
        phone = try row["phone"]
        state = try SocialV1.CircleState(rawValue: row["state"])
        addedAtMs = try row["added_at_ms"]
    }
}

extension SQLiteSocialStore {
    static func migrateCircle(_ migrator: inout DatabaseMigrator) {
        migrator.registerMigration("circle") { db in
            // member = 0 and phone set: an invitation to a non-user; member set and phone "": a user.
            try db.create(table: "circle") { t in
                t.column("owner", .integer).notNull()
                t.column("member", .integer).notNull()
                t.column("phone", .text).notNull()
                t.column("state", .integer).notNull()
                t.column("added_at_ms", .integer).notNull()
                t.column("updated_at_ms", .integer).notNull()
                t.primaryKey(["owner", "member", "phone"])
            }
            try db.execute(sql: "CREATE INDEX circle_member ON circle(member, state)")
        }
    }

    /// Adds a friend (state pending: a coreFriend request) or a phone number (state invited).
    func addToCircle(owner: UInt64, member: UInt64, phone: String, limit: Int, now: Int64) async throws -> CircleRecord {
        try await mutate { db, events in
            if member != 0 {
                guard member != owner else { throw CircleRefusal.yourself }
                guard try Self.areFriends(db, owner, member) else { throw CircleRefusal.notFriends }
            }
            if try Row.fetchOne(db, cached: "SELECT 1 FROM circle WHERE owner = ? AND member = ? AND phone = ? AND state != ?",
                                binding: owner, member, phone, SocialV1.CircleState.rejected.rawValue, as: { _ in () }) != nil {
                throw CircleRefusal.alreadyMember
            }
            let count = try Int.fetchOne(db, cached: "SELECT COUNT(*) FROM circle WHERE owner = ? AND state != ?",
                                         arguments: [owner, SocialV1.CircleState.rejected.rawValue]) ?? 0
            guard count < limit else { throw CircleRefusal.full(limit: limit) }
            let state: SocialV1.CircleState = member == 0 ? .invited : .pending
            try db.run(sql: """
                INSERT OR REPLACE INTO circle (owner, member, phone, state, added_at_ms, updated_at_ms) VALUES (?, ?, ?, ?, ?, ?)
                """, arguments: [owner, member, phone, state.rawValue, now, now])
            try Self.addNotice(db, member == 0 ? .circleInvite : .circleRequest, from: owner, toUser: member, toPhone: phone, now: now)
            if member == 0 { events.append(Self.event(.circleInvitesChanged, owner, 0)) }
            return try Self.circleRow(db, owner: owner, member: member, phone: phone)
        }
    }

    func removeFromCircle(owner: UInt64, member: UInt64, phone: String) async throws {
        try await mutate { db, events in
            let wasAccepted = try Int32.fetchOne(db, cached: "SELECT state FROM circle WHERE owner = ? AND member = ? AND phone = ?",
                                               arguments: [owner, member, phone]) == SocialV1.CircleState.accepted.rawValue
            try db.run(sql: "DELETE FROM circle WHERE owner = ? AND member = ? AND phone = ?", arguments: [owner, member, phone])
            guard db.changesCount == 1 else { throw CircleRefusal.notMember }
            if wasAccepted { events.append(Self.event(.circleMemberRemoved, owner, member)) }
            if member == 0 { events.append(Self.event(.circleInvitesChanged, owner, 0)) }
        }
    }

    /// The member answers the owner's coreFriend request.
    func respondToCircle(owner: UInt64, member: UInt64, accept: Bool, now: Int64) async throws -> CircleRecord {
        try await mutate { db, events in
            guard let row = try Row.fetchOne(db, cached: "SELECT * FROM circle WHERE owner = ? AND member = ? AND phone = ''",
                                             binding: owner, member, as: CircleRecord.init(row:)),
                  row.state == .pending
            else { throw CircleRefusal.noPendingRequest(owner: owner) }
            let state: SocialV1.CircleState = accept ? .accepted : .rejected
            try db.run(sql: "UPDATE circle SET state = ?, updated_at_ms = ? WHERE owner = ? AND member = ? AND phone = ''",
                           arguments: [state.rawValue, now, owner, member])
            if accept { events.append(Self.event(.circleMemberAdded, owner, member)) }
            return try Self.circleRow(db, owner: owner, member: member, phone: "")
        }
    }

    func circle(of owner: UInt64) async throws -> [CircleRecord] {
        try await database.read { db in
            try Row.fetchAll(db, cached: "SELECT * FROM circle WHERE owner = ? ORDER BY added_at_ms, rowid", arguments: [owner],
                             as: CircleRecord.init(row:))
        }
    }

    func circles(afterOwner: UInt64, owners: Int) async throws -> [CircleRecord] {
        let kept = "state IN (\(SocialV1.CircleState.accepted.rawValue), \(SocialV1.CircleState.invited.rawValue))"
        return try await database.read { db in
            try Row.fetchAll(db, cached: """
                SELECT * FROM circle WHERE \(kept) AND owner IN (SELECT DISTINCT owner FROM circle WHERE owner > ? AND \(kept) ORDER BY owner LIMIT ?)
                ORDER BY owner, added_at_ms, rowid
                """, binding: afterOwner, owners, as: CircleRecord.init(row:))
        }
    }

    /// Circles `member` is in (accepted), or asked to join (pending).
    func circles(containing member: UInt64, state: SocialV1.CircleState) async throws -> [CircleRecord] {
        try await database.read { db in
            try Row.fetchAll(db, cached: "SELECT * FROM circle WHERE member = ? AND state = ? ORDER BY added_at_ms DESC, rowid DESC",
                             binding: member, state.rawValue, as: CircleRecord.init(row:))
        }
    }

    /// Called inside the transactions that end a friendship: neither stays in the other's circle.
    /// - Returns: the graph events for accepted memberships that ended.
    static func dropCircle(_ db: Database, _ x: UInt64, _ y: UInt64) throws -> [SocialV1.GraphEvent] {
        let accepted = try Row.fetchAll(db, cached: """
            SELECT owner, member FROM circle WHERE state = ? AND ((owner = ? AND member = ?) OR (owner = ? AND member = ?))
            """, arguments: [SocialV1.CircleState.accepted.rawValue, x, y, y, x]) { try event(.circleMemberRemoved, $0["owner"], $0["member"]) }
        try db.run(sql: "DELETE FROM circle WHERE (owner = ? AND member = ?) OR (owner = ? AND member = ?)", arguments: [x, y, y, x])
        return accepted
    }

    private static func circleRow(_ db: Database, owner: UInt64, member: UInt64, phone: String) throws -> CircleRecord {
        guard let record = try Row.fetchOne(db, cached: "SELECT * FROM circle WHERE owner = ? AND member = ? AND phone = ?",
                                            binding: owner, member, phone, as: CircleRecord.init(row:)) else {
            throw StoreInvariant("the circle row just written is missing")
        }
        return record
    }
}
