import FriensoProto
import GRDB
import Storage

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

    init(row: Row) {
        owner = row["owner"]
        member = row["member"]
        phone = row["phone"]
        state = SocialV1.CircleState(rawValue: row["state"])
        addedAtMs = row["added_at_ms"]
    }
}

extension SocialStore {
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
        try await database.write { db in
            if member != 0 {
                guard member != owner else { throw CircleRefusal.yourself }
                guard try Self.areFriends(db, owner, member) else { throw CircleRefusal.notFriends }
            }
            if try Row.fetchOne(db, sql: "SELECT 1 FROM circle WHERE owner = ? AND member = ? AND phone = ? AND state != ?",
                                arguments: [owner, member, phone, SocialV1.CircleState.rejected.rawValue]) != nil {
                throw CircleRefusal.alreadyMember
            }
            let count = try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM circle WHERE owner = ? AND state != ?",
                                         arguments: [owner, SocialV1.CircleState.rejected.rawValue]) ?? 0
            guard count < limit else { throw CircleRefusal.full(limit: limit) }
            let state: SocialV1.CircleState = member == 0 ? .invited : .pending
            try db.execute(sql: """
                INSERT OR REPLACE INTO circle (owner, member, phone, state, added_at_ms, updated_at_ms) VALUES (?, ?, ?, ?, ?, ?)
                """, arguments: [owner, member, phone, state.rawValue, now, now])
            try Self.addNotice(db, member == 0 ? .circleInvite : .circleRequest, from: owner, toUser: member, toPhone: phone, now: now)
            return try Self.circleRow(db, owner: owner, member: member, phone: phone)
        }
    }

    func removeFromCircle(owner: UInt64, member: UInt64, phone: String) async throws {
        try await mutate { db, events in
            let wasAccepted = try Int32.fetchOne(db, sql: "SELECT state FROM circle WHERE owner = ? AND member = ? AND phone = ?",
                                               arguments: [owner, member, phone]) == SocialV1.CircleState.accepted.rawValue
            try db.execute(sql: "DELETE FROM circle WHERE owner = ? AND member = ? AND phone = ?", arguments: [owner, member, phone])
            guard db.changesCount == 1 else { throw CircleRefusal.notMember }
            if wasAccepted { events.append(Self.event(.circleMemberRemoved, owner, member)) }
        }
    }

    /// The member answers the owner's coreFriend request.
    func respondToCircle(owner: UInt64, member: UInt64, accept: Bool, now: Int64) async throws -> CircleRecord {
        try await mutate { db, events in
            guard let row = try Row.fetchOne(db, sql: "SELECT * FROM circle WHERE owner = ? AND member = ? AND phone = ''",
                                             arguments: [owner, member]).map(CircleRecord.init),
                  row.state == .pending
            else { throw CircleRefusal.noPendingRequest(owner: owner) }
            let state: SocialV1.CircleState = accept ? .accepted : .rejected
            try db.execute(sql: "UPDATE circle SET state = ?, updated_at_ms = ? WHERE owner = ? AND member = ? AND phone = ''",
                           arguments: [state.rawValue, now, owner, member])
            if accept { events.append(Self.event(.circleMemberAdded, owner, member)) }
            return try Self.circleRow(db, owner: owner, member: member, phone: "")
        }
    }

    func circle(of owner: UInt64) async throws -> [CircleRecord] {
        try await database.read { db in
            try Row.fetchAll(db, sql: "SELECT * FROM circle WHERE owner = ? ORDER BY added_at_ms, member, phone", arguments: [owner])
                .map(CircleRecord.init)
        }
    }

    /// Circles `member` is in (accepted), or asked to join (pending).
    func circles(containing member: UInt64, state: SocialV1.CircleState) async throws -> [CircleRecord] {
        try await database.read { db in
            try Row.fetchAll(db, sql: "SELECT * FROM circle WHERE member = ? AND state = ? ORDER BY added_at_ms DESC",
                             arguments: [member, state.rawValue]).map(CircleRecord.init)
        }
    }

    /// Called inside the transactions that end a friendship: neither stays in the other's circle.
    /// - Returns: the graph events for accepted memberships that ended.
    static func dropCircle(_ db: Database, _ x: UInt64, _ y: UInt64) throws -> [SocialV1.GraphEvent] {
        let accepted = try Row.fetchAll(db, sql: """
            SELECT owner, member FROM circle WHERE state = ? AND ((owner = ? AND member = ?) OR (owner = ? AND member = ?))
            """, arguments: [SocialV1.CircleState.accepted.rawValue, x, y, y, x])
        try db.execute(sql: "DELETE FROM circle WHERE (owner = ? AND member = ?) OR (owner = ? AND member = ?)", arguments: [x, y, y, x])
        return accepted.map { event(.circleMemberRemoved, $0["owner"], $0["member"]) }
    }

    private static func circleRow(_ db: Database, owner: UInt64, member: UInt64, phone: String) throws -> CircleRecord {
        guard let row = try Row.fetchOne(db, sql: "SELECT * FROM circle WHERE owner = ? AND member = ? AND phone = ?",
                                         arguments: [owner, member, phone]) else { throw StoreInvariant("the circle row just written is missing") }
        return CircleRecord(row: row)
    }
}
