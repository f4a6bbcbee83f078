import FriensoProto
import GRDB

/// Why a contact exchange is refused (the service maps each to a status).
enum ExchangeRefusal: Error, Equatable {
    case yourself
    case blocked
    case callerNotFindable
    case notFindable(UInt64)
}

/// Where a contact exchange was made: from the request now, from geo's latest fix later.
struct ExchangeLocation: Sendable {
    var latitude: Double
    var longitude: Double
}

/// A recorded contact exchange between `userA < userB`.
struct ExchangeRecord: Sendable {
    var id: UInt64
    var userA: UInt64
    var userB: UInt64
    var exchangedAtMs: Int64
    var location: ExchangeLocation?
    var placeLabel: String

    init(row: Row) {
        id = row["id"]
        userA = row["user_a"]
        userB = row["user_b"]
        exchangedAtMs = row["exchanged_at_ms"]
        let lat: Double? = row["latitude"], lon: Double? = row["longitude"]
        location = lat.flatMap { lat in lon.map { ExchangeLocation(latitude: lat, longitude: $0) } }
        placeLabel = row["place_label"]
    }

    func other(than user: UInt64) -> UInt64 { user == userA ? userB : userA }
}

enum ExchangeOutcome: Sendable {
    /// Your add is recorded; they have not added you yet.
    case waiting
    /// Both added each other: recorded now, or earlier (a repeated add).
    case recorded(ExchangeRecord)
}

/// The findable setting and contact exchange.
extension SocialStore {
    static func migrateDiscovery(_ migrator: inout DatabaseMigrator) {
        migrator.registerMigration("discovery") { db in
            try db.create(table: "discovery") { t in
                t.primaryKey("user_id", .integer)
                t.column("findable", .boolean).notNull()
                t.column("updated_at_ms", .integer).notNull()
            }
            // One side's "add" waiting for the other's.
            try db.create(table: "exchange_intents") { t in
                t.column("from_user", .integer).notNull()
                t.column("to_user", .integer).notNull()
                t.column("latitude", .double)
                t.column("longitude", .double)
                t.column("place_label", .text).notNull()
                t.column("created_at_ms", .integer).notNull()
                t.primaryKey(["from_user", "to_user"])
            }
            try db.create(table: "exchanges") { t in
                t.autoIncrementedPrimaryKey("id")
                t.column("user_a", .integer).notNull()
                t.column("user_b", .integer).notNull().indexed()
                t.column("exchanged_at_ms", .integer).notNull()
                t.column("latitude", .double)
                t.column("longitude", .double)
                t.column("place_label", .text).notNull()
                t.uniqueKey(["user_a", "user_b"])
                t.check(sql: "user_a < user_b")
            }
        }
    }

    static func isFindable(_ db: Database, _ user: UInt64) throws -> Bool {
        try Bool.fetchOne(db, sql: "SELECT findable FROM discovery WHERE user_id = ?", arguments: [user]) ?? false
    }

    func findable(_ user: UInt64) async throws -> Bool {
        try await database.read { db in try Self.isFindable(db, user) }
    }

    /// - Returns: the setting now. Publishes a graph event only when it changed.
    func setFindable(_ user: UInt64, _ on: Bool, now: Int64) async throws -> Bool {
        try await mutate { db, events in
            guard try Self.isFindable(db, user) != on else { return on }
            try db.execute(sql: "INSERT OR REPLACE INTO discovery (user_id, findable, updated_at_ms) VALUES (?, ?, ?)",
                           arguments: [user, on, now])
            events.append(Self.event(on ? .findableOn : .findableOff, user, 0))
            return on
        }
    }

    /// `from` adds `to`. The second add of a pair records the exchange, at the place it was made
    /// (or, when it carries no location, where the first add was made). Adding again after that
    /// returns the recorded exchange: an exchange happens once per pair.
    func addExchange(from: UInt64, to: UInt64, location: ExchangeLocation?, placeLabel: String, now: Int64) async throws -> ExchangeOutcome {
        try await mutate { db, events in
            guard from != to else { throw ExchangeRefusal.yourself }
            let (a, b) = from < to ? (from, to) : (to, from)
            if let row = try Row.fetchOne(db, sql: "SELECT * FROM exchanges WHERE user_a = ? AND user_b = ?", arguments: [a, b]) {
                return .recorded(ExchangeRecord(row: row))
            }
            guard try !Self.blocked(db, from, to) else { throw ExchangeRefusal.blocked }
            guard try Self.isFindable(db, from) else { throw ExchangeRefusal.callerNotFindable }
            guard try Self.isFindable(db, to) else { throw ExchangeRefusal.notFindable(to) }
            try db.execute(sql: """
                INSERT OR REPLACE INTO exchange_intents (from_user, to_user, latitude, longitude, place_label, created_at_ms)
                VALUES (?, ?, ?, ?, ?, ?)
                """, arguments: [from, to, location?.latitude, location?.longitude, placeLabel, now])
            guard let theirs = try Row.fetchOne(db, sql: "SELECT * FROM exchange_intents WHERE from_user = ? AND to_user = ?",
                                                arguments: [to, from]) else { return .waiting }
            let lat: Double? = location?.latitude ?? theirs["latitude"]
            let lon: Double? = location?.longitude ?? theirs["longitude"]
            let label = placeLabel.isEmpty ? theirs["place_label"] : placeLabel
            try db.execute(sql: """
                INSERT INTO exchanges (user_a, user_b, exchanged_at_ms, latitude, longitude, place_label) VALUES (?, ?, ?, ?, ?, ?)
                """, arguments: [a, b, now, lat, lon, label])
            let id = db.lastInsertedRowID
            try db.execute(sql: "DELETE FROM exchange_intents WHERE (from_user = ?1 AND to_user = ?2) OR (from_user = ?2 AND to_user = ?1)",
                           arguments: [from, to])
            events.append(Self.event(.exchangeAdded, a, b))
            let row = try Row.fetchOne(db, sql: "SELECT * FROM exchanges WHERE id = ?", arguments: [id])!
            return .recorded(ExchangeRecord(row: row))
        }
    }

    /// `user`'s exchanges, newest first, older than exchange `before` (0: from the newest).
    func exchanges(of user: UInt64, before: UInt64, limit: Int) async throws -> [ExchangeRecord] {
        try await database.read { db in
            try Row.fetchAll(db, sql: """
                SELECT * FROM exchanges WHERE (user_a = ?1 OR user_b = ?1) AND (?2 = 0 OR id < ?2)
                ORDER BY id DESC LIMIT ?3
                """, arguments: [user, before, limit]).map(ExchangeRecord.init)
        }
    }

    /// Pending friend requests between `user` and anyone, either direction: the other users' ids.
    func pendingRequestPeers(of user: UInt64) async throws -> Set<UInt64> {
        try await database.read { db in
            Set(try UInt64.fetchAll(db, sql: """
                SELECT to_user FROM friend_requests WHERE from_user = ?1 AND state = 1
                UNION SELECT from_user FROM friend_requests WHERE to_user = ?1 AND state = 1
                """, arguments: [user]))
        }
    }
}
