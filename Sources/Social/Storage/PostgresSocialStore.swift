import FriensoProto
import Logging
import PostgresNIO
import Storage
import Wire

/// Social's storage on PostgreSQL: the `social` schema of the deployment's database. The same
/// tables as the SQLite store, in PostgreSQL's types, and the same behaviour (the social tests run
/// on both engines).
///
/// SQLite runs one mutation at a time; PostgreSQL runs them at once, so the rules that read
/// before they write take locks instead:
/// - every mutation of a pair of users (a request, a friendship, a block, a circle membership, an
///   exchange, a poke) first takes a transaction lock on that pair, so two people asking each
///   other at once still make one friendship, and a poke's interval holds;
/// - adding to a circle also locks the owner, so the circle's limit holds;
/// - notices are numbered in commit order (alerts reads "every notice after the last I stored"):
///   the insert of a notice takes one lock for all notices, held until its commit.
/// These are database locks, so they hold across instances of social too. Graph events about a
/// person are announced in commit order within the instance (`mutate`).
final class PostgresSocialStore: SocialStorage {
    let database: PostgresServiceDatabase
    let replies: any ReplyStore
    /// Called once a mutation with graph events committed, before it returns, in commit order.
    private let onCommit: @Sendable ([SocialV1.GraphEvent]) -> Void
    var logger: Logger { database.logger }

    private init(database: PostgresServiceDatabase, onCommit: @escaping @Sendable ([SocialV1.GraphEvent]) -> Void) {
        self.database = database
        self.onCommit = onCommit
        replies = PostgresReplyStore(database: database)
    }

    /// Runs social's migrations on `database` (its schema must be `social`).
    static func open(_ database: PostgresServiceDatabase,
                     onCommit: @escaping @Sendable ([SocialV1.GraphEvent]) -> Void) async throws -> PostgresSocialStore {
        try await database.migrate(migrations)
        return PostgresSocialStore(database: database, onCommit: onCommit)
    }

    private struct Outcome<T: Sendable>: Sendable {
        var result: T
        var events: [SocialV1.GraphEvent]
    }

    /// One mutation that may change the graph: `events` collects its graph events, announced
    /// once it committed. `users` are the people its events may name: mutations of this
    /// instance that share one take turns (transaction and announcement), so the events about a
    /// person, and so about a pair, are announced in the order their changes committed; others
    /// run at once. (A replica applies facts about different people in any order to the same
    /// state, and the snapshot's head is read before its rows: see `snapshotPage`.)
    func mutate<T: Sendable>(orderedBy users: [UInt64],
                             _ body: (PostgresConnection, inout [SocialV1.GraphEvent]) async throws -> T) async throws -> T {
        let onCommit = onCommit
        return try await database.write({ connection in
            var events: [SocialV1.GraphEvent] = []
            let result = try await body(connection, &events)
            return Outcome(result: result, events: events)
        }, committed: { outcome in
            if !outcome.events.isEmpty { onCommit(outcome.events) }
        }, orderedBy: users).result
    }

    // MARK: Locks

    /// Holds, until the transaction ends, the lock on the pair `x`, `y` (either order).
    func lockPair(_ connection: PostgresConnection, _ x: UInt64, _ y: UInt64) async throws {
        let (a, b) = x < y ? (x, y) : (y, x)
        try await lock(connection, Self.mix(a, b))
    }

    /// Holds, until the transaction ends, the lock on everything `user` owns (their circle).
    func lockOwner(_ connection: PostgresConnection, _ user: UInt64) async throws {
        try await lock(connection, Self.mix(user, UInt64.max))
    }

    /// Holds, until the transaction ends, the lock that numbers notices in commit order.
    func lockNotices(_ connection: PostgresConnection) async throws {
        try await lock(connection, Self.mix(UInt64.max, UInt64.max))
    }

    private func lock(_ connection: PostgresConnection, _ key: Int64) async throws {
        try await connection.prepared("SELECT pg_advisory_xact_lock(\(key))", logger: logger)
    }

    /// A 64-bit lock key for two ids (a different pair sharing it only waits longer).
    static func mix(_ a: UInt64, _ b: UInt64) -> Int64 {
        var h = a &* 0x9E37_79B9_7F4A_7C15
        h ^= (b &+ 0x632B_E59B_D9B4_E019) &* 0xBF58_476D_1CE4_E5B9
        h ^= h >> 31
        return Int64(bitPattern: h)
    }

    // MARK: Shared reads

    static func areFriends(_ connection: PostgresConnection, _ x: UInt64, _ y: UInt64, logger: Logger) async throws -> Bool {
        let (a, b) = x < y ? (x, y) : (y, x)
        return try await PostgresServiceDatabase.exists(connection.prepared(
            "SELECT 1 FROM friendships WHERE user_a = \(Int64(a)) AND user_b = \(Int64(b))", logger: logger))
    }

    static func blocked(_ connection: PostgresConnection, _ x: UInt64, _ y: UInt64, logger: Logger) async throws -> Bool {
        try await PostgresServiceDatabase.exists(connection.prepared("""
            SELECT 1 FROM blocks WHERE (blocker = \(Int64(x)) AND blocked = \(Int64(y))) OR (blocker = \(Int64(y)) AND blocked = \(Int64(x)))
            """, logger: logger))
    }

    static func isFindable(_ connection: PostgresConnection, _ user: UInt64, logger: Logger) async throws -> Bool {
        try await PostgresServiceDatabase.first(connection.prepared("SELECT findable FROM discovery WHERE user_id = \(Int64(user))", logger: logger), Bool.self) ?? false
    }

    // MARK: Rows


    static func event(_ change: SocialV1.GraphChange, _ a: UInt64, _ b: UInt64) -> SocialV1.GraphEvent {
        SocialV1.GraphEvent(change: change, userA: a, userB: b)
    }

    static func edge(_ x: UInt64, _ y: UInt64) -> (UInt64, UInt64) { x < y ? (x, y) : (y, x) }

    static let pending = Int64(SocialV1.RequestState.pending.rawValue)
    static let accepted = Int64(SocialV1.CircleState.accepted.rawValue)
}
