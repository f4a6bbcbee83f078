import Foundation
import FriensoProto
import GRDB
import Storage
import Wire

/// Social's storage on SQLite (`social.sqlite` in the data folder), the embedded default. Each
/// mutation is one transaction on the single writer, so every rule is checked against the state
/// it changes (two people asking each other at once make one friendship).
final class SQLiteSocialStore: SocialStorage {
    let database: ServiceDatabase
    let replies: any ReplyStore
    /// Called after each commit, still on the writer queue, with the graph changes it made:
    /// so events are numbered in commit order and a snapshot taken on the same queue is exact.
    private let onCommit: @Sendable ([SocialV1.GraphEvent]) -> Void

    init(path: String, onCommit: @escaping @Sendable ([SocialV1.GraphEvent]) -> Void = { _ in }) throws {
        self.onCommit = onCommit
        database = try ServiceDatabase.open(path)
        var migrator = DatabaseMigrator()
        migrator.registerMigration("v1") { db in
            try db.create(table: "friend_requests") { t in
                t.autoIncrementedPrimaryKey("id")
                t.column("from_user", .integer).notNull()
                t.column("to_user", .integer).notNull()
                t.column("state", .integer).notNull()
                t.column("dismissed", .boolean).notNull().defaults(to: false)
                t.column("created_at_ms", .integer).notNull()
                t.column("updated_at_ms", .integer).notNull()
            }
            try db.execute(sql: "CREATE INDEX friend_requests_to ON friend_requests(to_user, state)")
            try db.execute(sql: "CREATE INDEX friend_requests_from ON friend_requests(from_user, state)")
            // At most one pending request per ordered pair.
            try db.execute(sql: "CREATE UNIQUE INDEX friend_requests_pending ON friend_requests(from_user, to_user) WHERE state = 1")
            // One canonical edge per pair: the smaller id first.
            try db.create(table: "friendships") { t in
                t.column("user_a", .integer).notNull()
                t.column("user_b", .integer).notNull().indexed()
                t.column("since_ms", .integer).notNull()
                t.primaryKey(["user_a", "user_b"])
                t.check(sql: "user_a < user_b")
            }
            try db.create(table: "blocks") { t in
                t.column("blocker", .integer).notNull()
                t.column("blocked", .integer).notNull().indexed()
                t.column("created_at_ms", .integer).notNull()
                t.primaryKey(["blocker", "blocked"])
            }
        }
        Self.migrateCircle(&migrator)
        Self.migrateDiscovery(&migrator)
        Self.migratePokes(&migrator)
        SQLiteReplyStore.migrate(&migrator)
        Self.migrateNotices(&migrator)
        // Erasing someone deletes the pokes they received too: without this, a scan of the table.
        migrator.registerMigration("pokes_to") { db in
            try db.execute(sql: "CREATE INDEX pokes_to ON pokes(to_user)")
        }
        try database.migrate(migrator)
        replies = SQLiteReplyStore(database: database)
    }

    static let pending = SocialV1.RequestState.pending.rawValue

    /// One write transaction; `events` collects the graph changes, published once it committed.
    func mutate<T: Sendable>(_ body: @escaping @Sendable (Database, inout [SocialV1.GraphEvent]) throws -> T) async throws -> T {
        let onCommit = onCommit
        return try await database.writeWithoutTransaction { db, scope in
            var events: [SocialV1.GraphEvent] = []
            var result: T?
            let committed = try scope.transaction(db) {
                result = try body(db, &events)
            }
            if committed && !events.isEmpty { onCommit(events) }
            guard let result else { throw StoreInvariant("the transaction produced no result") }
            return result
        }
    }

    /// Runs `body` on the writer queue (after every committed change has been published).
    func onWriterQueue<T: Sendable>(_ body: @escaping @Sendable (Database) throws -> T) async throws -> T {
        try await database.writeWithoutTransaction { db, _ in try body(db) }
    }

    static func event(_ change: SocialV1.GraphChange, _ a: UInt64, _ b: UInt64) -> SocialV1.GraphEvent {
        SocialV1.GraphEvent(change: change, userA: a, userB: b)
    }

    static func edge(_ x: UInt64, _ y: UInt64) -> (UInt64, UInt64) { x < y ? (x, y) : (y, x) }

    static func areFriends(_ db: Database, _ x: UInt64, _ y: UInt64) throws -> Bool {
        let (a, b) = edge(x, y)
        return try Bool.fetchOne(db, cached: "SELECT 1 FROM friendships WHERE user_a = ? AND user_b = ?", arguments: [a, b]) ?? false
    }

    static func blocked(_ db: Database, _ x: UInt64, _ y: UInt64) throws -> Bool {
        try Bool.fetchOne(db, cached: "SELECT 1 FROM blocks WHERE (blocker = ? AND blocked = ?) OR (blocker = ? AND blocked = ?)",
                          arguments: [x, y, y, x]) ?? false
    }
}
