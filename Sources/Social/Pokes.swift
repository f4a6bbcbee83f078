import GRDB
import Storage
public import FriensoProto
public import Wire

/// Pokes, and the notices alerts delivers for social (pokes, coreFriend requests, SMS
/// invitations to non-users): notices are written in the transaction of the change they report
/// and numbered, so alerts pulls every one after the last id it stored.
extension SocialService {
    // MARK: Pokes

    public func poke(_ request: SocialV1.PokeRequest, _ context: RequestContext) async throws -> SocialV1.PokeResponse {
        let caller = try context.requireCaller()
        let target = try await resolve(userID: request.userId, username: request.username, context)
        let at = now()
        let id = try await store.poke(from: caller, to: target, now: at, interval: pokeInterval)
        let me = try await profiles([caller], context)[caller] ?? SocialV1.UserRef(userId: caller)
        let poke = SocialV1.Poke(pokeId: id, from: me, toUserId: target, createdAtMs: at)
        let payload = poke.serializedBytes()
        publisher.emit(topic: ViewerTopic.of(target), method: "social.Poke", payload: payload) // live, through the gateway
        wakeNoticeReaders()
        return SocialV1.PokeResponse(poke: poke)
    }

    // MARK: Notices (delivered by the alerts service)

    /// The stream that tells notice readers (alerts) to pull: the notices themselves are in the
    /// database, so a reader that missed this event still gets them on its next pull.
    public static let noticeStream = "notices"

    func wakeNoticeReaders() {
        publisher.emit(topic: Self.noticeStream, method: "social.Notice", payload: [])
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
}

// MARK: - Storage

extension SocialService {
    /// How long a notice is kept for alerts' relay to read it, as geo keeps its place events
    /// (`GeoService.placeEventRetentionMs`): a reader further behind than this has missed it.
    public static let noticeRetentionMs: Int64 = 7 * 86_400_000

    /// Deletes the notices made more than `noticeRetentionMs` ago. Run at start and hourly (`PeriodicPrune`).
    /// - Returns: how many.
    public func pruneNotices() async throws -> Int {
        try await store.pruneNotices(before: now() - Self.noticeRetentionMs)
    }
}

extension SQLiteSocialStore {
    static func migratePokes(_ migrator: inout DatabaseMigrator) {
        migrator.registerMigration("pokes") { db in
            try db.create(table: "pokes") { t in
                t.autoIncrementedPrimaryKey("id")
                t.column("from_user", .integer).notNull()
                t.column("to_user", .integer).notNull()
                t.column("created_at_ms", .integer).notNull()
            }
            try db.execute(sql: "CREATE INDEX pokes_pair ON pokes(from_user, to_user, created_at_ms)")
        }
    }

    /// Records a poke from `from` to a friend, at most one per pair per `interval` milliseconds
    /// (checked in the same transaction, so it holds across restarts and concurrent calls).
    /// - Returns: the poke's id.
    func poke(from: UInt64, to: UInt64, now: Int64, interval: Int64) async throws -> UInt64 {
        try await mutate { db, _ in
            guard from != to else { throw FriendRefusal.pokeYourself }
            guard try Self.areFriends(db, from, to) else { throw FriendRefusal.pokeStranger }
            if let last = try Int64.fetchOne(db, cached: "SELECT MAX(created_at_ms) FROM pokes WHERE from_user = ? AND to_user = ?",
                                             arguments: [from, to]), now - last < interval {
                throw FriendRefusal.pokedRecently(agoMs: now - last, waitMs: interval - (now - last))
            }
            try db.run(sql: "INSERT INTO pokes (from_user, to_user, created_at_ms) VALUES (?, ?, ?)", arguments: [from, to, now])
            let id = UInt64(db.lastInsertedRowID)
            try Self.addNotice(db, .poke, from: from, toUser: to, toPhone: "", now: now)
            return id
        }
    }

    static func migrateNotices(_ migrator: inout DatabaseMigrator) {
        migrator.registerMigration("notices") { db in
            try db.create(table: "notices") { t in
                t.autoIncrementedPrimaryKey("id")
                t.column("kind", .integer).notNull()
                t.column("from_user", .integer).notNull()
                t.column("to_user", .integer).notNull()
                t.column("to_phone", .text).notNull()
                t.column("created_at_ms", .integer).notNull()
            }
        }
    }

    static func addNotice(_ db: Database, _ kind: SocialV1.NoticeKind, from: UInt64, toUser: UInt64, toPhone: String, now: Int64) throws {
        try db.run(sql: "INSERT INTO notices (kind, from_user, to_user, to_phone, created_at_ms) VALUES (?, ?, ?, ?, ?)",
                       arguments: [kind.rawValue, from, toUser, toPhone, now])
    }

    /// The hourly prune of notices made before `?1`, below the first notice made since
    /// (`Retention.pruneSQL`; a notice never changes).
    static let pruneNoticesSQL = Retention.pruneSQL("notices", madeAt: "created_at_ms", where: "created_at_ms < ?1")

    func pruneNotices(before cutoff: Int64) async throws -> Int {
        try await database.write { db in
            try db.run(sql: Self.pruneNoticesSQL, arguments: [cutoff])
            return db.changesCount
        }
    }

    /// Notices after `id`, oldest first.
    func notices(after id: UInt64, limit: Int) async throws -> [SocialV1.Notice] {
        try await database.read { db in
            try Row.fetchAll(db, cached: "SELECT id, kind, from_user, to_user, to_phone, created_at_ms FROM notices WHERE id > ? ORDER BY id LIMIT ?",
                             binding: id, limit) { row in
                try SocialV1.Notice(noticeId: row[0], kind: SocialV1.NoticeKind(rawValue: row[1]),
                                from: SocialV1.UserRef(userId: row[2]), toUserId: row[3], toPhone: row[4], createdAtMs: row[5])
            }
        }
    }
}
