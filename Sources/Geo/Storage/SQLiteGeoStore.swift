import Foundation
import FriensoProto
import GRDB
import Storage
import Wire

/// Geo's storage on SQLite (`geo.sqlite`): the tables of every `GeoStorage` concern, the
/// extensions in the feature files adding theirs.
final class SQLiteGeoStore: GeoStorage {
    let database: ServiceDatabase
    let replies: any ReplyStore

    init(path: String) throws {
        database = try ServiceDatabase.open(path)
        try database.migrate(Self.migrator)
        replies = SQLiteReplyStore(database: database)
    }

    /// The schema, one migration per change (tests migrate an old file part of the way).
    static var migrator: DatabaseMigrator {
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
        migrator.registerMigration("history-write-behind") { db in
            // History becomes the log (status changes included); `latest` and the per-user index
            // are folded from it behind the writes (`HistoryFolding`). Until now both were kept
            // current on every update, so everything so far is folded.
            try db.execute(sql: "ALTER TABLE history ADD COLUMN status TEXT") // NULL: status unchanged
            try db.execute(sql: "ALTER TABLE latest ADD COLUMN history_id INTEGER NOT NULL DEFAULT 0")
            try db.execute(sql: """
                CREATE TABLE history_by_user (user_id INTEGER NOT NULL, history_id INTEGER NOT NULL,
                                              PRIMARY KEY (user_id, history_id)) WITHOUT ROWID
                """)
            try db.execute(sql: "INSERT INTO history_by_user (user_id, history_id) SELECT user_id, id FROM history")
            try db.execute(sql: "DROP INDEX history_user")
            try db.execute(sql: "CREATE TABLE geo_meta (key TEXT PRIMARY KEY, value INTEGER NOT NULL) WITHOUT ROWID")
            try db.execute(sql: "INSERT INTO geo_meta (key, value) VALUES ('folded_through', coalesce((SELECT max(id) FROM history), 0))")
        }
        Self.migratePrecision(&migrator)
        Self.migrateAudit(&migrator)
        Self.migrateShareLinks(&migrator)
        Self.migrateZonesAndPlaceAlerts(&migrator)
        migrator.registerMigration("grant-versions") { db in
            // Revocations are kept as rows with their version (`StoredGrant`).
            try db.execute(sql: "ALTER TABLE grants ADD COLUMN version INTEGER NOT NULL DEFAULT 0")
        }
        migrator.registerMigration("history-retention-by-id") { db in
            // Retention walks history in id order (`pruneHistory`), which is the order it was
            // received in: the index by time cost every location update an insert into a second
            // B-tree and a page in every commit, for a sweep a day (issue 16, item 138).
            try db.execute(sql: "DROP INDEX history_received")
        }
        return migrator
    }

    // MARK: Loading at start


    func loadLatest() throws -> FoldedLatest {
        try database.read { db in
            var result = FoldedLatest()
            try Row.forEach(db, cached: "SELECT user_id, lat, lon, accuracy, device_ms, received_ms, status, history_id FROM latest") { row in
                let user: UInt64 = try row[0]
                result.latest[user] = try LatestFix(lat: row[1], lon: row[2], accuracy: row[3], deviceMs: row[4], receivedMs: row[5], status: row[6])
                result.historyIDs[user] = try row[7]
            }
            result.foldedThrough = try Self.foldedThrough(db)
            result.lastID = try Int64.fetchOne(db, cached: "SELECT max(id) FROM history") ?? 0
            return result
        }
    }

    /// History rows past `id`, in id order, `size` at a time (the start-up replay).
    func forEachHistoryRow(after id: Int64, size: Int, _ body: ([(id: Int64, update: LocationUpdate)]) throws -> Void) throws {
        try database.read { db in
            var chunk: [(id: Int64, update: LocationUpdate)] = []
            try Row.forEach(db, cached: """
                SELECT id, user_id, lat, lon, accuracy, device_ms, received_ms, status FROM history WHERE id > ? ORDER BY id
                """, arguments: [id]) { row in
                chunk.append(try (row[0], LocationUpdate(user: row[1], lat: row[2], lon: row[3], accuracy: row[4], deviceMs: row[5],
                                                         receivedMs: row[6], status: row[7])))
                if chunk.count == size { try body(chunk); chunk.removeAll(keepingCapacity: true) }
            }
            if !chunk.isEmpty { try body(chunk) }
        }
    }

    static func foldedThrough(_ db: Database) throws -> Int64 {
        try Int64.fetchOne(db, cached: "SELECT value FROM geo_meta WHERE key = 'folded_through'") ?? 0
    }

    func loadSharing() throws -> [UInt64: Sharing] {
        try database.read { db in
            var result: [UInt64: Sharing] = [:]
            try Row.forEach(db, cached: "SELECT user_id, share_with_friends, ghost, proximity_alerts, proximity_m FROM sharing") { row in
                result[try row[0]] = try Sharing(shareWithFriends: row[1], ghost: row[2], proximityAlerts: row[3], proximityMetres: row[4])
            }
            return result
        }
    }

    func loadGrants(now: Int64) throws -> [GrantKey: StoredGrant] {
        try database.write { db in
            try db.run(sql: "DELETE FROM grants WHERE expires_ms <= ?", arguments: [now - StoredGrant.tombstoneKeepMs])
            var result: [GrantKey: StoredGrant] = [:]
            try Row.forEach(db, cached: "SELECT subject, viewer, reason, expires_ms, version FROM grants") { row in
                result[try GrantKey(subject: row[0], viewer: row[1], reason: row[2])] = try StoredGrant(expiresMs: row[3], version: row[4])
            }
            return result
        }
    }

    func loadPlaces() throws -> [PlaceRecord] {
        try database.read { db in
            try Row.fetchAll(db, cached: "SELECT id, name, kind, lat, lon, radius_m, ring FROM places ORDER BY id") { row in
                try PlaceRecord(id: row[0], name: row[1], kind: GeoV1.PlaceKind(rawValue: row[2]), lat: row[3], lon: row[4],
                            radius: row[5], ring: PlaceRecord.ring(json: row[6]))
            }
        }
    }

    /// Adds `places` (after deleting every place when `replace`). - Returns: them with their ids.
    func importPlaces(_ places: [PlaceRecord], replace: Bool) async throws -> [PlaceRecord] {
        try await database.write { db in
            if replace { try db.run(sql: "DELETE FROM places") }
            return try places.map { place in
                try db.run(sql: "INSERT INTO places (name, kind, lat, lon, radius_m, ring) VALUES (?, ?, ?, ?, ?, ?)",
                               arguments: [place.name, place.kind.rawValue, place.lat, place.lon, place.radius, place.ringJSON])
                var stored = place
                stored.id = UInt64(db.lastInsertedRowID)
                return stored
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

    func saveGrants(_ grants: [GrantWrite], now: Int64) async throws -> [Bool] {
        guard !grants.isEmpty else { return [] }
        return try await database.write { db in
            // A revocation stays as a tombstone (its expiry in the past), for its version.
            try grants.map { grant in
                try db.run(sql: """
                    INSERT INTO grants (subject, viewer, reason, expires_ms, version) VALUES (?1, ?2, ?3, ?4, ?5)
                    ON CONFLICT (subject, viewer, reason) DO UPDATE SET expires_ms = ?4, version = max(version, ?5)
                    WHERE ?5 = 0 OR ?5 >= version
                    """, binding: grant.key.subject, grant.key.viewer, grant.key.reason, grant.expiresMs, grant.version)
                return db.changesCount > 0
            }
        }
    }

    /// `user`'s history rows: the indexed ones and the tail not folded yet.
    static let userHistory = """
        SELECT history_id FROM history_by_user WHERE user_id = ?1
        UNION ALL SELECT id FROM history WHERE id > ?2 AND user_id = ?1
        """

    /// Deletes `user`'s history. Their latest fix stays, written from `current` (memory) first so
    /// that no replay needs the rows deleted here. `forgotten` runs once it has committed.
    /// - Returns: how many history rows were deleted.
    func deleteHistory(of user: UInt64, current: @escaping @Sendable () -> LatestFix?,
                       forgotten: @escaping @Sendable () -> Void) async throws -> Int {
        try await database.write({ db in
            if let fix = current() {
                try Self.write(FoldWrite(fixes: [(user, fix)]), db)
            }
            try db.run(sql: "DELETE FROM history WHERE id IN (\(Self.userHistory))", arguments: [user, try Self.foldedThrough(db)])
            let deleted = db.changesCount
            try db.run(sql: "DELETE FROM history_by_user WHERE user_id = ?", arguments: [user])
            return deleted
        }, committed: { _ in forgotten() })
    }

    /// Drops folded history older than `cutoff` (retention); rows not folded yet wait for their
    /// sweep. - Returns: rows deleted.
    ///
    /// History has no index by time: rows are appended as they are received, so their ids follow
    /// their `received_ms`, and the sweep reads from the oldest id up to the first row still
    /// inside retention (`end`), a read of the rows it deletes and one more. Only rows older than
    /// `cutoff` go, never a newer one: if the clock stepped back, a row received before the step
    /// that lies past `end` waits for a later sweep.
    func pruneHistory(before cutoff: Int64) async throws -> Int {
        try await database.write { db in
            let through = try Self.foldedThrough(db)
            let end = try Int64.fetchOne(db, sql: "SELECT id FROM history WHERE received_ms >= ? ORDER BY id LIMIT 1",
                                         arguments: [cutoff]) ?? Int64.max
            try db.run(sql: """
                DELETE FROM history_by_user WHERE (user_id, history_id) IN
                    (SELECT user_id, id FROM history WHERE id < ?3 AND id <= ?2 AND received_ms < ?1)
                """, arguments: [cutoff, through, end])
            try db.run(sql: "DELETE FROM history WHERE id < ?3 AND id <= ?2 AND received_ms < ?1", arguments: [cutoff, through, end])
            return db.changesCount
        }
    }

    func historyCount(of user: UInt64) async throws -> Int {
        try await database.read { db in
            try Int.fetchOne(db, cached: "SELECT COUNT(*) FROM history WHERE id IN (\(Self.userHistory))",
                             arguments: [user, try Self.foldedThrough(db)]) ?? 0
        }
    }
}
