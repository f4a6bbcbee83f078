import FriensoProto
import Logging
import PostgresNIO
import Storage

/// Pokes, notices, erasure, export and the graph snapshot on PostgreSQL.
extension PostgresSocialStore {
    // MARK: Pokes and notices

    func poke(from: UInt64, to: UInt64, now: Int64, interval: Int64) async throws -> UInt64 {
        try await database.write { connection in
            guard from != to else { throw FriendRefusal.pokeYourself }
            try await lockPair(connection, from, to)
            guard try await Self.areFriends(connection, from, to, logger: logger) else { throw FriendRefusal.pokeStranger }
            if let last = try await PostgresServiceDatabase.first(connection.prepared(
                "SELECT max(created_at_ms) FROM pokes WHERE from_user = \(Int64(from)) AND to_user = \(Int64(to))", logger: logger), Int64?.self) ?? nil,
               now - last < interval {
                throw FriendRefusal.pokedRecently(agoMs: now - last, waitMs: interval - (now - last))
            }
            guard let id = try await PostgresServiceDatabase.first(connection.prepared(
                "INSERT INTO pokes (from_user, to_user, created_at_ms) VALUES (\(Int64(from)), \(Int64(to)), \(now)) RETURNING id",
                logger: logger), Int64.self) else { throw StoreInvariant("the poke just written is missing") }
            try await addNotice(connection, .poke, from: from, toUser: to, toPhone: "", now: now)
            return UInt64(id)
        }
    }

    /// Adds a notice in the caller's transaction. Its id is taken under the notices' lock, held
    /// until the commit, so ids commit in order: a reader that asked for "after n" misses none.
    func addNotice(_ connection: PostgresConnection, _ kind: SocialV1.NoticeKind, from: UInt64, toUser: UInt64, toPhone: String,
                   now: Int64) async throws {
        try await lockNotices(connection)
        try await connection.prepared("""
            INSERT INTO notices (kind, from_user, to_user, to_phone, created_at_ms)
            VALUES (\(Int64(kind.rawValue)), \(Int64(from)), \(Int64(toUser)), \(toPhone), \(now))
            """, logger: logger)
    }

    /// The hourly prune, as on SQLite (`SQLiteSocialStore.pruneNoticesSQL`).
    static func pruneNotices(before cutoff: Int64) -> PostgresQuery {
        """
        DELETE FROM notices
        WHERE id < COALESCE((SELECT id FROM notices WHERE created_at_ms >= \(cutoff) ORDER BY id LIMIT 1), \(unescaped: String(Int64.max)))
          AND created_at_ms < \(cutoff)
        RETURNING 1
        """
    }

    func pruneNotices(before cutoff: Int64) async throws -> Int {
        try await database.transaction { connection in
            try await PostgresServiceDatabase.count(connection.prepared(Self.pruneNotices(before: cutoff), logger: logger))
        }
    }

    func notices(after id: UInt64, limit: Int) async throws -> [SocialV1.Notice] {
        try await database.read { connection in
            var notices: [SocialV1.Notice] = []
            let rows = try await connection.prepared("""
                SELECT id, kind, from_user, to_user, to_phone, created_at_ms FROM notices WHERE id > \(Int64(id)) ORDER BY id LIMIT \(Int64(limit))
                """, logger: logger)
            for try await (id, kind, from, to, phone, at) in rows.decode((Int64, Int64, Int64, Int64, String, Int64).self) {
                notices.append(SocialV1.Notice(noticeId: UInt64(id), kind: SocialV1.NoticeKind(rawValue: Int32(truncatingIfNeeded: kind)),
                                               from: SocialV1.UserRef(userId: UInt64(from)), toUserId: UInt64(to), toPhone: phone, createdAtMs: at))
            }
            return notices
        }
    }

    // MARK: Erasure and export

    func erase(_ user: UInt64, traces: [String]) async throws -> Int {
        // Every event names the person: their turn orders it with every change that involves them.
        try await mutate(orderedBy: [user]) { connection, events in
            let id = Int64(user)
            for try await (a, b) in try await connection.prepared(
                "SELECT user_a, user_b FROM friendships WHERE user_a = \(id) OR user_b = \(id) ORDER BY id", logger: logger).decode((Int64, Int64).self) {
                events.append(Self.event(.friendshipRemoved, UInt64(a), UInt64(b)))
            }
            for try await (a, b) in try await connection.prepared(
                "SELECT blocker, blocked FROM blocks WHERE blocker = \(id) OR blocked = \(id) ORDER BY id", logger: logger).decode((Int64, Int64).self) {
                events.append(Self.event(.blockRemoved, UInt64(a), UInt64(b)))
            }
            for try await (a, b) in try await connection.prepared("""
                SELECT owner, member FROM circle WHERE state = \(Self.accepted) AND (owner = \(id) OR member = \(id)) ORDER BY id
                """, logger: logger).decode((Int64, Int64).self) {
                events.append(Self.event(.circleMemberRemoved, UInt64(a), UInt64(b)))
            }
            if try await Self.isFindable(connection, user, logger: logger) { events.append(Self.event(.findableOff, user, 0)) }
            for try await (a, b) in try await connection.prepared(
                "SELECT user_a, user_b FROM exchanges WHERE user_a = \(id) OR user_b = \(id) ORDER BY id", logger: logger).decode((Int64, Int64).self) {
                events.append(Self.event(.exchangeRemoved, UInt64(a), UInt64(b)))
            }
            var erased = 0
            for (table, condition) in [
                ("friendships", "user_a = $1 OR user_b = $1"),
                ("blocks", "blocker = $1 OR blocked = $1"),
                ("friend_requests", "from_user = $1 OR to_user = $1"),
                ("circle", "owner = $1 OR member = $1"),
                ("discovery", "user_id = $1"),
                ("exchange_intents", "from_user = $1 OR to_user = $1"),
                ("exchanges", "user_a = $1 OR user_b = $1"),
                ("pokes", "from_user = $1 OR to_user = $1"),
                ("notices", "from_user = $1 OR to_user = $1"),
            ] {
                var bindings = PostgresBindings(capacity: 1)
                bindings.append(id)
                erased += try await PostgresServiceDatabase.count(connection.query(
                    PostgresQuery(unsafeSQL: "DELETE FROM \(table) WHERE \(condition) RETURNING 1", binds: bindings), logger: logger))
            }
            erased += try await PostgresReplyStore.eraseReplies(connection, of: user, mentioning: traces, logger: logger)
            return erased
        }
    }

    func scrubErasedRows() async throws {
        try await database.read { connection in
            try await connection.query(PostgresQuery(unsafeSQL: "VACUUM \(Self.tables.joined(separator: ", "))"), logger: logger)
        }
    }

    func exportRows(of user: UInt64) async throws -> ([RequestRecord], [PokeRecord]) {
        try await database.snapshot { connection in
            let requests = try await Self.requests(connection.prepared("""
                SELECT \(unescaped: RequestRecord.columns) FROM friend_requests WHERE from_user = \(Int64(user)) OR to_user = \(Int64(user)) ORDER BY id
                """, logger: logger))
            var pokes: [PokeRecord] = []
            let rows = try await connection.prepared("""
                SELECT id, from_user, to_user, created_at_ms FROM pokes WHERE from_user = \(Int64(user)) OR to_user = \(Int64(user)) ORDER BY id
                """, logger: logger)
            for try await (id, from, to, at) in rows.decode((Int64, Int64, Int64, Int64).self) {
                pokes.append(PokeRecord(id: UInt64(id), from: UInt64(from), to: UInt64(to), at: at))
            }
            return (requests, pokes)
        }
    }

    // MARK: The graph snapshot

    /// Each section: `(id, first, second)` after an id, in id order.
    private static let sectionQueries = [
        "SELECT id, user_a, user_b FROM friendships WHERE id > $1 ORDER BY id LIMIT $2",
        "SELECT id, blocker, blocked FROM blocks WHERE id > $1 ORDER BY id LIMIT $2",
        "SELECT id, owner, member FROM circle WHERE state = \(SocialV1.CircleState.accepted.rawValue) AND id > $1 ORDER BY id LIMIT $2",
        "SELECT user_id, user_id, 0::bigint FROM discovery WHERE findable AND user_id > $1 ORDER BY user_id LIMIT $2",
        "SELECT id, user_a, user_b FROM exchanges WHERE id > $1 ORDER BY id LIMIT $2",
    ]

    /// The first page's head is read before its snapshot begins: every change announced by then
    /// committed before it, so the rows hold it; a change committed meanwhile may be in the rows
    /// and announced with a later number, which the replica's replay makes harmless. The page's
    /// sections are read in one snapshot, so they agree.
    func snapshotPage(after cursor: GraphSnapshotCursor, limit: Int, sequenceOnly: Bool,
                      head: @escaping @Sendable () -> SocialV1.GraphSnapshotResponse) async throws -> SocialV1.GraphSnapshotResponse {
        let head = head()
        guard !sequenceOnly else { return head }
        let logger = logger
        return try await database.snapshot { connection in
            var page = head
            var cursor = cursor
            var room = limit
            while cursor.section < GraphSnapshotCursor.sections {
                var bindings = PostgresBindings(capacity: 2)
                bindings.append(cursor.after)
                bindings.append(Int64(room))
                let rows = try await connection.query(PostgresQuery(unsafeSQL: Self.sectionQueries[cursor.section], binds: bindings), logger: logger)
                var count = 0
                for try await (id, first, second) in rows.decode((Int64, Int64, Int64).self) {
                    GraphSnapshotCursor.append(section: cursor.section, UInt64(first), UInt64(second), to: &page)
                    cursor.after = id
                    count += 1
                }
                room -= count
                if room == 0 {
                    page.nextCursor = cursor.text
                    return page
                }
                cursor = GraphSnapshotCursor(section: cursor.section + 1, after: 0)
            }
            page.nextCursor = ""
            return page
        }
    }
}
