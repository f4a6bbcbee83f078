import FriensoProto
import Logging
import PostgresNIO
import Storage

extension CircleRecord {
    static let columns = "owner, member, phone, state, added_at_ms"
    typealias Columns = (Int64, Int64, String, Int64, Int64)

    init(_ row: Columns) {
        self.init(owner: UInt64(row.0), member: UInt64(row.1), phone: row.2, state: SocialV1.CircleState(rawValue: Int32(truncatingIfNeeded: row.3)),
                  addedAtMs: row.4)
    }
}

/// The core circle on PostgreSQL (the rules as `Circle.swift` states them). Locks are taken in
/// one order, the owner's before the pair's, so two changes never wait for each other.
extension PostgresSocialStore {
    static func circleRows<Rows: AsyncSequence>(_ rows: Rows) async throws -> [CircleRecord] where Rows.Element == PostgresRow {
        var records: [CircleRecord] = []
        for try await row in rows.decode(CircleRecord.Columns.self) { records.append(CircleRecord(row)) }
        return records
    }

    private func circleRow(_ connection: PostgresConnection, owner: UInt64, member: UInt64, phone: String) async throws -> CircleRecord {
        guard let row = try await Self.circleRows(connection.prepared("""
            SELECT \(unescaped: CircleRecord.columns) FROM circle WHERE owner = \(Int64(owner)) AND member = \(Int64(member)) AND phone = \(phone)
            """, logger: logger)).first else { throw StoreInvariant("the circle row just written is missing") }
        return row
    }

    func addToCircle(owner: UInt64, member: UInt64, phone: String, limit: Int, now: Int64) async throws -> CircleRecord {
        try await mutate(orderedBy: member == 0 ? [owner] : [owner, member]) { connection, events in
            // The owner's lock keeps the limit (count, then insert); the pair's orders this add
            // with the friendship it needs.
            try await lockOwner(connection, owner)
            if member != 0 {
                guard member != owner else { throw CircleRefusal.yourself }
                try await lockPair(connection, owner, member)
                guard try await Self.areFriends(connection, owner, member, logger: logger) else { throw CircleRefusal.notFriends }
            }
            let rejected = Int64(SocialV1.CircleState.rejected.rawValue)
            if try await PostgresServiceDatabase.exists(connection.prepared("""
                SELECT 1 FROM circle WHERE owner = \(Int64(owner)) AND member = \(Int64(member)) AND phone = \(phone) AND state <> \(rejected)
                """, logger: logger)) {
                throw CircleRefusal.alreadyMember
            }
            let count = try await PostgresServiceDatabase.first(connection.prepared(
                "SELECT count(*) FROM circle WHERE owner = \(Int64(owner)) AND state <> \(rejected)", logger: logger), Int64.self) ?? 0
            guard count < limit else { throw CircleRefusal.full(limit: limit) }
            let state: SocialV1.CircleState = member == 0 ? .invited : .pending
            // Someone who refused, asked again, takes a new id (SQLite's REPLACE a new rowid): the
            // circle lists them after those added since, in the same millisecond too.
            try await connection.prepared("""
                INSERT INTO circle (owner, member, phone, state, added_at_ms, updated_at_ms)
                VALUES (\(Int64(owner)), \(Int64(member)), \(phone), \(Int64(state.rawValue)), \(now), \(now))
                ON CONFLICT (owner, member, phone) DO UPDATE
                SET state = excluded.state, added_at_ms = excluded.added_at_ms, updated_at_ms = excluded.updated_at_ms, id = DEFAULT
                """, logger: logger)
            try await addNotice(connection, member == 0 ? .circleInvite : .circleRequest, from: owner, toUser: member, toPhone: phone, now: now)
            if member == 0 { events.append(Self.event(.circleInvitesChanged, owner, 0)) }
            return try await circleRow(connection, owner: owner, member: member, phone: phone)
        }
    }

    func removeFromCircle(owner: UInt64, member: UInt64, phone: String) async throws {
        try await mutate(orderedBy: [owner, member]) { connection, events in
            try await lockOwner(connection, owner)
            if member != 0 { try await lockPair(connection, owner, member) }
            let removed = try await PostgresServiceDatabase.first(connection.prepared("""
                DELETE FROM circle WHERE owner = \(Int64(owner)) AND member = \(Int64(member)) AND phone = \(phone) RETURNING state
                """, logger: logger), Int64.self)
            guard let removed else { throw CircleRefusal.notMember }
            if removed == Self.accepted { events.append(Self.event(.circleMemberRemoved, owner, member)) }
            if member == 0 { events.append(Self.event(.circleInvitesChanged, owner, 0)) }
        }
    }

    func respondToCircle(owner: UInt64, member: UInt64, accept: Bool, now: Int64) async throws -> CircleRecord {
        try await mutate(orderedBy: [owner, member]) { connection, events in
            try await lockOwner(connection, owner)
            try await lockPair(connection, owner, member)
            guard let row = try await Self.circleRows(connection.prepared("""
                SELECT \(unescaped: CircleRecord.columns) FROM circle WHERE owner = \(Int64(owner)) AND member = \(Int64(member)) AND phone = ''
                """, logger: logger)).first, row.state == .pending
            else { throw CircleRefusal.noPendingRequest(owner: owner) }
            let state: SocialV1.CircleState = accept ? .accepted : .rejected
            try await connection.prepared("""
                UPDATE circle SET state = \(Int64(state.rawValue)), updated_at_ms = \(now)
                WHERE owner = \(Int64(owner)) AND member = \(Int64(member)) AND phone = ''
                """, logger: logger)
            if accept { events.append(Self.event(.circleMemberAdded, owner, member)) }
            return try await circleRow(connection, owner: owner, member: member, phone: "")
        }
    }

    func circle(of owner: UInt64) async throws -> [CircleRecord] {
        try await database.read { connection in
            try await Self.circleRows(connection.prepared("""
                SELECT \(unescaped: CircleRecord.columns) FROM circle WHERE owner = \(Int64(owner)) ORDER BY added_at_ms, id
                """, logger: logger))
        }
    }

    func circles(afterOwner: UInt64, owners: Int) async throws -> [CircleRecord] {
        let accepted = Int64(SocialV1.CircleState.accepted.rawValue), invited = Int64(SocialV1.CircleState.invited.rawValue)
        return try await database.read { connection in
            try await Self.circleRows(connection.prepared("""
                SELECT \(unescaped: CircleRecord.columns) FROM circle WHERE state IN (\(accepted), \(invited)) AND owner IN (
                    SELECT DISTINCT owner FROM circle WHERE owner > \(Int64(afterOwner)) AND state IN (\(accepted), \(invited)) ORDER BY owner LIMIT \(owners))
                ORDER BY owner, added_at_ms, id
                """, logger: logger))
        }
    }

    func circles(containing member: UInt64, state: SocialV1.CircleState) async throws -> [CircleRecord] {
        try await database.read { connection in
            try await Self.circleRows(connection.prepared("""
                SELECT \(unescaped: CircleRecord.columns) FROM circle WHERE member = \(Int64(member)) AND state = \(Int64(state.rawValue))
                ORDER BY added_at_ms DESC, id DESC
                """, logger: logger))
        }
    }

    /// In the transactions that end a friendship (the pair locked): neither stays in the other's circle.
    /// - Returns: the graph events for accepted memberships that ended.
    func dropCircle(_ connection: PostgresConnection, _ x: UInt64, _ y: UInt64) async throws -> [SocialV1.GraphEvent] {
        let rows = try await connection.prepared("""
            DELETE FROM circle WHERE (owner = \(Int64(x)) AND member = \(Int64(y))) OR (owner = \(Int64(y)) AND member = \(Int64(x)))
            RETURNING owner, member, state
            """, logger: logger)
        var events: [SocialV1.GraphEvent] = []
        for try await (owner, member, state) in rows.decode((Int64, Int64, Int64).self) where state == Self.accepted {
            events.append(Self.event(.circleMemberRemoved, UInt64(owner), UInt64(member)))
        }
        // One order for every run (RETURNING's is the table's): the owner, then the member.
        return events.sorted { ($0.userA, $0.userB) < ($1.userA, $1.userB) }
    }
}
