import Foundation
import FriensoProto
import GRDB
import Storage

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

    init(row: Row) {
        id = row["id"]
        from = row["from_user"]
        to = row["to_user"]
        state = SocialV1.RequestState(rawValue: row["state"])
        dismissed = row["dismissed"]
        createdAtMs = row["created_at_ms"]
        updatedAtMs = row["updated_at_ms"]
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

/// The social database. Each operation is one write transaction, so every rule is checked
/// against the state it changes (two people asking each other at once make one friendship).
final class SocialStore: Sendable {
    let database: ServiceDatabase
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
        migrator.registerMigration("pokes") { db in
            try db.create(table: "pokes") { t in
                t.autoIncrementedPrimaryKey("id")
                t.column("from_user", .integer).notNull()
                t.column("to_user", .integer).notNull()
                t.column("created_at_ms", .integer).notNull()
            }
            try db.execute(sql: "CREATE INDEX pokes_pair ON pokes(from_user, to_user, created_at_ms)")
        }
        SQLiteReplyStore.migrate(&migrator)
        Self.migrateNotices(&migrator)
        try database.migrate(migrator)
    }

    private static let pending = SocialV1.RequestState.pending.rawValue

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

    private static func edge(_ x: UInt64, _ y: UInt64) -> (UInt64, UInt64) { x < y ? (x, y) : (y, x) }

    static func areFriends(_ db: Database, _ x: UInt64, _ y: UInt64) throws -> Bool {
        let (a, b) = edge(x, y)
        return try Bool.fetchOne(db, sql: "SELECT 1 FROM friendships WHERE user_a = ? AND user_b = ?", arguments: [a, b]) ?? false
    }

    static func blocked(_ db: Database, _ x: UInt64, _ y: UInt64) throws -> Bool {
        try Bool.fetchOne(db, sql: "SELECT 1 FROM blocks WHERE (blocker = ? AND blocked = ?) OR (blocker = ? AND blocked = ?)",
                          arguments: [x, y, y, x]) ?? false
    }

    private static func request(_ db: Database, id: UInt64) throws -> RequestRecord? {
        try Row.fetchOne(db, sql: "SELECT * FROM friend_requests WHERE id = ?", arguments: [id]).map(RequestRecord.init)
    }

    private static func pendingRequest(_ db: Database, from: UInt64, to: UInt64) throws -> RequestRecord? {
        try Row.fetchOne(db, sql: "SELECT * FROM friend_requests WHERE from_user = ? AND to_user = ? AND state = ?",
                         arguments: [from, to, pending]).map(RequestRecord.init)
    }

    private static func befriend(_ db: Database, _ x: UInt64, _ y: UInt64, now: Int64) throws {
        let (a, b) = edge(x, y)
        try db.execute(sql: "INSERT OR IGNORE INTO friendships (user_a, user_b, since_ms) VALUES (?, ?, ?)", arguments: [a, b, now])
    }

    func send(from: UInt64, to: UInt64, now: Int64) async throws -> SendOutcome {
        try await mutate { db, events in
            guard from != to else { throw FriendRefusal.requestToYourself }
            guard try !Self.blocked(db, from, to) else { throw FriendRefusal.requestAcrossBlock }
            guard try !Self.areFriends(db, from, to) else { throw FriendRefusal.alreadyFriends }
            if let theirs = try Self.pendingRequest(db, from: to, to: from) {
                try db.execute(sql: "UPDATE friend_requests SET state = ?, updated_at_ms = ? WHERE id = ?",
                               arguments: [SocialV1.RequestState.accepted.rawValue, now, theirs.id])
                try Self.befriend(db, from, to, now: now)
                let (a, b) = Self.edge(from, to)
                events.append(Self.event(.friendshipAdded, a, b))
                return .collapsed(try Self.request(db, id: theirs.id) ?? theirs)
            }
            if let mine = try Self.pendingRequest(db, from: from, to: to) { return .existing(mine) }
            try db.execute(sql: """
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
                try db.execute(sql: "UPDATE friend_requests SET state = ?, updated_at_ms = ? WHERE id = ?",
                               arguments: [SocialV1.RequestState.accepted.rawValue, now, requestID])
                try Self.befriend(db, request.from, request.to, now: now)
                let (a, b) = Self.edge(request.from, request.to)
                events.append(Self.event(.friendshipAdded, a, b))
            case .reject:
                try db.execute(sql: "UPDATE friend_requests SET state = ?, updated_at_ms = ? WHERE id = ?",
                               arguments: [SocialV1.RequestState.rejected.rawValue, now, requestID])
            case .dismiss:
                try db.execute(sql: "UPDATE friend_requests SET dismissed = 1, updated_at_ms = ? WHERE id = ?", arguments: [now, requestID])
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
            try db.execute(sql: "UPDATE friend_requests SET state = ?, updated_at_ms = ? WHERE id = ?",
                           arguments: [SocialV1.RequestState.cancelled.rawValue, now, requestID])
            guard let updated = try Self.request(db, id: requestID) else { throw StoreInvariant("the friend request just written is missing") }
            return updated
        }
    }

    func pendingRequests(of user: UInt64, includeDismissed: Bool) async throws -> (incoming: [RequestRecord], outgoing: [RequestRecord]) {
        try await database.read { db in
            let incoming = try Row.fetchAll(db, sql: """
                SELECT * FROM friend_requests WHERE to_user = ? AND state = ? \(includeDismissed ? "" : "AND dismissed = 0")
                ORDER BY created_at_ms DESC, id DESC
                """, arguments: [user, Self.pending]).map(RequestRecord.init)
            let outgoing = try Row.fetchAll(db, sql: """
                SELECT * FROM friend_requests WHERE from_user = ? AND state = ? ORDER BY created_at_ms DESC, id DESC
                """, arguments: [user, Self.pending]).map(RequestRecord.init)
            return (incoming, outgoing)
        }
    }

    /// - Returns: each friend's id and the time the friendship began.
    func friends(of user: UInt64) async throws -> [(id: UInt64, since: Int64)] {
        try await database.read { db in
            try Row.fetchAll(db, sql: """
                SELECT user_b AS other, since_ms FROM friendships WHERE user_a = ?
                UNION ALL SELECT user_a AS other, since_ms FROM friendships WHERE user_b = ?
                """, arguments: [user, user]).map { (id: $0["other"], since: $0["since_ms"]) }
        }
    }

    func removeFriend(_ user: UInt64, _ other: UInt64) async throws {
        try await mutate { db, events in
            let (a, b) = Self.edge(user, other)
            try db.execute(sql: "DELETE FROM friendships WHERE user_a = ? AND user_b = ?", arguments: [a, b])
            guard db.changesCount == 1 else { throw FriendRefusal.notFriends(other) }
            events.append(Self.event(.friendshipRemoved, a, b))
            events += try Self.dropCircle(db, user, other)
        }
    }

    /// Blocks `other`: ends the friendship and cancels pending requests both ways.
    func block(_ user: UInt64, _ other: UInt64, now: Int64) async throws -> BlockOutcome {
        try await mutate { db, events in
            guard user != other else { throw FriendRefusal.blockYourself }
            try db.execute(sql: "INSERT OR IGNORE INTO blocks (blocker, blocked, created_at_ms) VALUES (?, ?, ?)", arguments: [user, other, now])
            if db.changesCount == 1 { events.append(Self.event(.blockAdded, user, other)) }
            let (a, b) = Self.edge(user, other)
            try db.execute(sql: "DELETE FROM friendships WHERE user_a = ? AND user_b = ?", arguments: [a, b])
            let removedFriendship = db.changesCount == 1
            if removedFriendship { events.append(Self.event(.friendshipRemoved, a, b)) }
            events += try Self.dropCircle(db, user, other)
            try db.execute(sql: """
                UPDATE friend_requests SET state = ?, updated_at_ms = ?
                WHERE state = ? AND ((from_user = ? AND to_user = ?) OR (from_user = ? AND to_user = ?))
                """, arguments: [SocialV1.RequestState.cancelled.rawValue, now, Self.pending, user, other, other, user])
            let removedRequests = db.changesCount
            try db.execute(sql: "DELETE FROM exchange_intents WHERE (from_user = ?1 AND to_user = ?2) OR (from_user = ?2 AND to_user = ?1)",
                           arguments: [user, other])
            return BlockOutcome(removedFriendship: removedFriendship, removedRequests: removedRequests)
        }
    }

    func unblock(_ user: UInt64, _ other: UInt64) async throws {
        try await mutate { db, events in
            try db.execute(sql: "DELETE FROM blocks WHERE blocker = ? AND blocked = ?", arguments: [user, other])
            guard db.changesCount == 1 else { throw FriendRefusal.notBlocked(other) }
            events.append(Self.event(.blockRemoved, user, other))
        }
    }

    /// Records a poke from `from` to a friend, at most one per pair per `interval` milliseconds
    /// (checked in the same transaction, so it holds across restarts and concurrent calls).
    /// - Returns: the poke's id.
    func poke(from: UInt64, to: UInt64, now: Int64, interval: Int64) async throws -> UInt64 {
        try await mutate { db, _ in
            guard from != to else { throw FriendRefusal.pokeYourself }
            guard try Self.areFriends(db, from, to) else { throw FriendRefusal.pokeStranger }
            if let last = try Int64.fetchOne(db, sql: "SELECT MAX(created_at_ms) FROM pokes WHERE from_user = ? AND to_user = ?",
                                             arguments: [from, to]), now - last < interval {
                throw FriendRefusal.pokedRecently(agoMs: now - last, waitMs: interval - (now - last))
            }
            try db.execute(sql: "INSERT INTO pokes (from_user, to_user, created_at_ms) VALUES (?, ?, ?)", arguments: [from, to, now])
            let id = UInt64(db.lastInsertedRowID)
            try Self.addNotice(db, .poke, from: from, toUser: to, toPhone: "", now: now)
            return id
        }
    }

    /// Users `user` must not be offered: friends, and anyone blocked either way.
    func excludedFromDiscovery(for user: UInt64) async throws -> Set<UInt64> {
        try await database.read { db in
            let ids = try UInt64.fetchAll(db, sql: """
                SELECT user_b FROM friendships WHERE user_a = ?1
                UNION SELECT user_a FROM friendships WHERE user_b = ?1
                UNION SELECT blocked FROM blocks WHERE blocker = ?1
                UNION SELECT blocker FROM blocks WHERE blocked = ?1
                """, arguments: [user])
            return Set(ids)
        }
    }

    func blocked(by user: UInt64) async throws -> [UInt64] {
        try await database.read { db in
            try UInt64.fetchAll(db, sql: "SELECT blocked FROM blocks WHERE blocker = ? ORDER BY created_at_ms", arguments: [user])
        }
    }
}
