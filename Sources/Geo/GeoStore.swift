import Foundation
import FriensoProto
import GRDB
import Storage

/// A location update as validated by the service.
struct LocationUpdate: Sendable {
    var user: UInt64
    var lat: Double
    var lon: Double
    var accuracy: Double
    var deviceMs: Int64
    var receivedMs: Int64
    /// nil: leave the status as it is.
    var status: String?
}

/// The latest fix of a user, as kept in memory and in `latest`.
struct LatestFix: Sendable, Equatable {
    var lat: Double
    var lon: Double
    var accuracy: Double
    var deviceMs: Int64
    var receivedMs: Int64
    var status: String
}

/// The geo database: latest fix per user, history, sharing settings, grants.
final class GeoStore: Sendable {
    let database: ServiceDatabase

    init(path: String) throws {
        database = try ServiceDatabase.open(path)
        var migrator = DatabaseMigrator()
        migrator.registerMigration("v1") { db in
            try db.create(table: "latest") { t in
                t.primaryKey("user_id", .integer)
                t.column("lat", .double).notNull()
                t.column("lon", .double).notNull()
                t.column("accuracy", .double).notNull()
                t.column("device_ms", .integer).notNull()
                t.column("received_ms", .integer).notNull()
                t.column("status", .text).notNull().defaults(to: "")
            }
            try db.create(table: "history") { t in
                t.autoIncrementedPrimaryKey("id")
                t.column("user_id", .integer).notNull()
                t.column("lat", .double).notNull()
                t.column("lon", .double).notNull()
                t.column("accuracy", .double).notNull()
                t.column("device_ms", .integer).notNull()
                t.column("received_ms", .integer).notNull()
            }
            try db.execute(sql: "CREATE INDEX history_user ON history(user_id, device_ms)")
            try db.execute(sql: "CREATE INDEX history_received ON history(received_ms)")
            try db.create(table: "sharing") { t in
                t.primaryKey("user_id", .integer)
                t.column("share_with_friends", .boolean).notNull()
                t.column("ghost", .boolean).notNull()
                t.column("proximity_alerts", .boolean).notNull()
                t.column("proximity_m", .double).notNull()
            }
            try db.create(table: "grants") { t in
                t.column("subject", .integer).notNull()
                t.column("viewer", .integer).notNull()
                t.column("reason", .text).notNull()
                t.column("expires_ms", .integer).notNull()
                t.primaryKey(["subject", "viewer", "reason"])
            }
        }
        migrator.registerMigration("places") { db in
            try db.create(table: "places") { t in
                t.autoIncrementedPrimaryKey("id")
                t.column("name", .text).notNull()
                t.column("kind", .integer).notNull()
                t.column("lat", .double).notNull()
                t.column("lon", .double).notNull()
                t.column("radius_m", .double).notNull()
                t.column("ring", .text).notNull() // JSON [[lat, lon], ...]; "[]" for a point
            }
            try db.create(table: "check_ins") { t in
                t.primaryKey("user_id", .integer)
                t.column("place_name", .text).notNull()
                t.column("lat", .double).notNull()
                t.column("lon", .double).notNull()
                t.column("media_id", .text).notNull()
                t.column("created_ms", .integer).notNull()
                t.column("expires_ms", .integer).notNull()
            }
        }
        SQLiteReplyStore.migrate(&migrator)
        try database.migrate(migrator)
    }

    // MARK: Loading at start

    func loadLatest() throws -> [UInt64: LatestFix] {
        try database.read { db in
            var result: [UInt64: LatestFix] = [:]
            let rows = try Row.fetchCursor(db, cached: "SELECT user_id, lat, lon, accuracy, device_ms, received_ms, status FROM latest")
            while let row = try rows.next() {
                result[row[0]] = LatestFix(lat: row[1], lon: row[2], accuracy: row[3], deviceMs: row[4], receivedMs: row[5], status: row[6])
            }
            return result
        }
    }

    func loadSharing() throws -> [UInt64: Sharing] {
        try database.read { db in
            var result: [UInt64: Sharing] = [:]
            for row in try Row.fetchAll(db, cached: "SELECT user_id, share_with_friends, ghost, proximity_alerts, proximity_m FROM sharing") {
                result[row[0]] = Sharing(shareWithFriends: row[1], ghost: row[2], proximityAlerts: row[3], proximityMetres: row[4])
            }
            return result
        }
    }

    func loadGrants(now: Int64) throws -> [GrantKey: Int64] {
        try database.write { db in
            try db.run(sql: "DELETE FROM grants WHERE expires_ms <= ?", arguments: [now])
            var result: [GrantKey: Int64] = [:]
            for row in try Row.fetchAll(db, cached: "SELECT subject, viewer, reason, expires_ms FROM grants") {
                result[GrantKey(subject: row[0], viewer: row[1], reason: row[2])] = row[3]
            }
            return result
        }
    }

    func loadPlaces() throws -> [PlaceRecord] {
        try database.read { db in
            try Row.fetchAll(db, cached: "SELECT id, name, kind, lat, lon, radius_m, ring FROM places ORDER BY id").map { row in
                let pairs = (try? JSONSerialization.jsonObject(with: Data((row[6] as String).utf8))) as? [[Double]] ?? []
                return PlaceRecord(id: row[0], name: row[1], kind: GeoV1.PlaceKind(rawValue: row[2]), lat: row[3], lon: row[4],
                                   radius: row[5], ring: pairs.map { (lat: $0[0], lon: $0[1]) })
            }
        }
    }

    /// Adds `places` (after deleting every place when `replace`). - Returns: them with their ids.
    func importPlaces(_ places: [PlaceRecord], replace: Bool) async throws -> [PlaceRecord] {
        try await database.write { db in
            if replace { try db.run(sql: "DELETE FROM places") }
            return try places.map { place in
                let ring = "[" + place.ring.map { "[\($0.lat),\($0.lon)]" }.joined(separator: ",") + "]"
                try db.run(sql: "INSERT INTO places (name, kind, lat, lon, radius_m, ring) VALUES (?, ?, ?, ?, ?, ?)",
                               arguments: [place.name, place.kind.rawValue, place.lat, place.lon, place.radius, ring])
                var stored = place
                stored.id = UInt64(db.lastInsertedRowID)
                return stored
            }
        }
    }

    // MARK: Writing

    /// Writes a batch of updates in one transaction. `replaces[i]`: whether update i becomes its
    /// user's latest (decided by the caller, in order).
    func write(_ batch: [LocationUpdate], replaces: [Bool]) throws {
        try database.write { db in
            let history = try db.cachedStatement(sql: """
                INSERT INTO history (user_id, lat, lon, accuracy, device_ms, received_ms) VALUES (?, ?, ?, ?, ?, ?)
                """)
            let latest = try db.cachedStatement(sql: """
                INSERT INTO latest (user_id, lat, lon, accuracy, device_ms, received_ms, status) VALUES (?1, ?2, ?3, ?4, ?5, ?6, coalesce(?7, ''))
                ON CONFLICT(user_id) DO UPDATE SET lat = ?2, lon = ?3, accuracy = ?4, device_ms = ?5, received_ms = ?6,
                    status = coalesce(?7, status)
                """)
            let statusOnly = try db.cachedStatement(sql: "UPDATE latest SET status = ? WHERE user_id = ?")
            for (update, replace) in zip(batch, replaces) {
                try history.execute(arguments: [update.user, update.lat, update.lon, update.accuracy, update.deviceMs, update.receivedMs])
                if replace {
                    try latest.execute(arguments: [update.user, update.lat, update.lon, update.accuracy, update.deviceMs,
                                                   update.receivedMs, update.status])
                } else if let status = update.status {
                    try statusOnly.execute(arguments: [status, update.user])
                }
            }
        }
    }

    func saveSharing(_ user: UInt64, _ s: Sharing) async throws {
        try await database.write { db in
            try db.run(sql: """
                INSERT OR REPLACE INTO sharing (user_id, share_with_friends, ghost, proximity_alerts, proximity_m) VALUES (?, ?, ?, ?, ?)
                """, arguments: [user, s.shareWithFriends, s.ghost, s.proximityAlerts, s.proximityMetres])
        }
    }

    func saveGrant(_ key: GrantKey, expiresMs: Int64, now: Int64) async throws {
        try await database.write { db in
            if expiresMs <= now {
                try db.run(sql: "DELETE FROM grants WHERE subject = ? AND viewer = ? AND reason = ?",
                               arguments: [key.subject, key.viewer, key.reason])
            } else {
                try db.run(sql: "INSERT OR REPLACE INTO grants (subject, viewer, reason, expires_ms) VALUES (?, ?, ?, ?)",
                               arguments: [key.subject, key.viewer, key.reason, expiresMs])
            }
        }
    }

    /// - Returns: how many history rows were deleted.
    func deleteHistory(of user: UInt64) async throws -> Int {
        try await database.write { db in
            try db.run(sql: "DELETE FROM history WHERE user_id = ?", arguments: [user])
            return db.changesCount
        }
    }

    /// Drops history older than `cutoff` (retention). - Returns: rows deleted.
    func pruneHistory(before cutoff: Int64) async throws -> Int {
        try await database.write { db in
            try db.run(sql: "DELETE FROM history WHERE received_ms < ?", arguments: [cutoff])
            return db.changesCount
        }
    }

    func historyCount(of user: UInt64) async throws -> Int {
        try await database.read { db in
            try Int.fetchOne(db, cached: "SELECT COUNT(*) FROM history WHERE user_id = ?", arguments: [user]) ?? 0
        }
    }
}


/// One grant: `viewer` may see `subject` for `reason` (watch, help_now).
struct GrantKey: Hashable, Sendable {
    var subject: UInt64
    var viewer: UInt64
    var reason: String
}
