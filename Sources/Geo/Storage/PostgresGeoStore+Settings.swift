import Foundation
import FriensoProto
import PostgresNIO
import Storage
import Wire

/// Sharing settings, grants, check-ins and precision on PostgreSQL, and one person's settings
/// read back for another instance.
extension PostgresGeoStore {
    // MARK: Settings and grants

    func saveSharing(_ user: UInt64, _ s: Sharing) async throws {
        try await write(announcing: .people([user])) { connection in
            try await connection.prepared("""
                INSERT INTO sharing (user_id, share_with_friends, ghost, proximity_alerts, proximity_m)
                VALUES (\(Self.id(user)), \(s.shareWithFriends), \(s.ghost), \(s.proximityAlerts), \(s.proximityMetres))
                ON CONFLICT (user_id) DO UPDATE SET share_with_friends = excluded.share_with_friends, ghost = excluded.ghost,
                    proximity_alerts = excluded.proximity_alerts, proximity_m = excluded.proximity_m
                """, logger: self.logger)
        }
    }

    func saveGrants(_ grants: [GrantWrite], now: Int64) async throws -> [Bool] {
        guard !grants.isEmpty else { return [] }
        return try await database.write { connection in
            // A revocation stays as a tombstone (its expiry in the past), for its version. The
            // row is locked by the upsert, so two instances applying grants of one key take turns.
            // Rows are locked in one order (by key; a key's grants keep theirs), so two instances
            // whose batches hold the same keys never wait for each other in a cycle.
            let order = grants.indices.sorted { a, b in
                let x = grants[a].key, y = grants[b].key
                return (x.subject, x.viewer, x.reason, a) < (y.subject, y.viewer, y.reason, b)
            }
            var applied = [Bool](repeating: false, count: grants.count)
            for index in order {
                let grant = grants[index], key = grant.key
                let rows = try await connection.prepared("""
                    INSERT INTO grants (subject, viewer, reason, expires_ms, version)
                    VALUES (\(Self.id(key.subject)), \(Self.id(key.viewer)), \(key.reason), \(grant.expiresMs), \(grant.version))
                    ON CONFLICT (subject, viewer, reason) DO UPDATE SET expires_ms = excluded.expires_ms,
                        version = greatest(grants.version, excluded.version)
                    WHERE excluded.version = 0 OR excluded.version >= grants.version
                    RETURNING 1
                    """, logger: self.logger)
                for try await _ in rows { applied[index] = true }
            }
            return applied
        }
    }

    func loadCheckIns(now: Int64) throws -> [UInt64: CheckInRecord] {
        try awaitBlocking { [database, logger] in
            try await database.transaction { connection in
                try await connection.prepared("DELETE FROM check_ins WHERE expires_ms <= \(now)", logger: logger)
                var result: [UInt64: CheckInRecord] = [:]
                for try await (user, name, lat, lon, media, created, expires) in try await connection.prepared("""
                    SELECT user_id, place_name, lat, lon, media_id, created_ms, expires_ms FROM check_ins
                    """, logger: logger).decode((Int64, String, Double, Double, String, Int64, Int64).self) {
                    result[Self.id(user)] = CheckInRecord(user: Self.id(user), placeName: name, lat: lat, lon: lon, mediaID: media,
                                                          createdMs: created, expiresMs: expires)
                }
                return result
            }
        }
    }

    func saveCheckIn(_ c: CheckInRecord, now: Int64) async throws -> Bool {
        try await saveCheckIn(c, now: now, reply: nil)
    }

    /// On a task with the request's scope bound (no write queue here), its reply written in the
    /// same transaction as the row and claim: the host then saves nothing after the commit.
    func saveCheckIn(_ c: CheckInRecord, now: Int64, as scope: IdempotencyScope?, reply: @escaping @Sendable (Bool) -> [UInt8],
                     then done: @escaping @Sendable (Result<Bool, any Error>) -> Void) {
        IdempotencyScope.onTask(bound: scope, { try await self.saveCheckIn(c, now: now, reply: reply) }, then: done)
    }

    private func saveCheckIn(_ c: CheckInRecord, now: Int64, reply: (@Sendable (Bool) -> [UInt8])?) async throws -> Bool {
        try await write(announcing: .people([c.user]), reply: reply) { connection in
            // The row's lock, so two check-ins at once on two instances see each other.
            let replaced = try await PostgresServiceDatabase.exists(connection.prepared(
                "SELECT 1 FROM check_ins WHERE user_id = \(Self.id(c.user)) AND expires_ms > \(now) FOR UPDATE", logger: self.logger))
            try await connection.prepared("""
                INSERT INTO check_ins (user_id, place_name, lat, lon, media_id, created_ms, expires_ms)
                VALUES (\(Self.id(c.user)), \(c.placeName), \(c.lat), \(c.lon), \(c.mediaID), \(c.createdMs), \(c.expiresMs))
                ON CONFLICT (user_id) DO UPDATE SET place_name = excluded.place_name, lat = excluded.lat, lon = excluded.lon,
                    media_id = excluded.media_id, created_ms = excluded.created_ms, expires_ms = excluded.expires_ms
                """, logger: self.logger)
            return replaced
        }
    }

    func loadPrecision() throws -> PrecisionSettings {
        try awaitBlocking { [database, logger] in
            try await database.read { connection in
                var rows: [(subject: UInt64, viewer: UInt64, precision: Precision)] = []
                for try await (subject, viewer, level) in try await connection.prepared("SELECT subject, viewer, level FROM precision", logger: logger)
                    .decode((Int64, Int64, Int64).self) {
                    if let precision = Precision(rawValue: Int(level)) { rows.append((Self.id(subject), Self.id(viewer), precision)) }
                }
                return PrecisionSettings(rows)
            }
        }
    }

    func savePrecision(subject: UInt64, viewer: UInt64, _ precision: Precision?) async throws {
        try await write(announcing: .people([subject])) { connection in
            if let precision {
                try await connection.prepared("""
                    INSERT INTO precision (subject, viewer, level) VALUES (\(Self.id(subject)), \(Self.id(viewer)), \(Int64(precision.rawValue)))
                    ON CONFLICT (subject, viewer) DO UPDATE SET level = excluded.level
                    """, logger: self.logger)
            } else {
                try await connection.prepared("DELETE FROM precision WHERE subject = \(Self.id(subject)) AND viewer = \(Self.id(viewer))",
                                           logger: self.logger)
            }
        }
    }
}

/// What one person's settings are in the database, for another instance to take
/// (`GeoState.replaceSettings`): theirs, and the rows about them.
struct PersonSettings: Sendable {
    var sharing: Sharing?
    var precision: [(subject: UInt64, viewer: UInt64, precision: Precision)] = []
    var checkIn: CheckInRecord?
    var zones: [ZoneRecord] = []
    /// Place alerts they set or that watch them, and who allows whom among them.
    var alerts: [PlaceAlertRow] = []
    var access: [(subject: UInt64, viewer: UInt64)] = []
}

extension PostgresGeoStore {
    func settings(of user: UInt64) async throws -> PersonSettings {
        let u = Self.id(user)
        var result = PersonSettings()
        try await database.snapshot { connection in
            for try await (share, ghost, proximity, metres) in try await connection.prepared("""
                SELECT share_with_friends, ghost, proximity_alerts, proximity_m FROM sharing WHERE user_id = \(u)
                """, logger: self.logger).decode((Bool, Bool, Bool, Double).self) {
                result.sharing = Sharing(shareWithFriends: share, ghost: ghost, proximityAlerts: proximity, proximityMetres: metres)
            }
            for try await (subject, viewer, level) in try await connection.prepared("""
                SELECT subject, viewer, level FROM precision WHERE subject = \(u) OR viewer = \(u)
                """, logger: self.logger).decode((Int64, Int64, Int64).self) {
                if let precision = Precision(rawValue: Int(level)) { result.precision.append((Self.id(subject), Self.id(viewer), precision)) }
            }
            for try await (name, lat, lon, media, created, expires) in try await connection.prepared("""
                SELECT place_name, lat, lon, media_id, created_ms, expires_ms FROM check_ins WHERE user_id = \(u)
                """, logger: self.logger).decode((String, Double, Double, String, Int64, Int64).self) {
                result.checkIn = CheckInRecord(user: user, placeName: name, lat: lat, lon: lon, mediaID: media, createdMs: created, expiresMs: expires)
            }
        }
        result.zones = try await zones(where: "user_id = \(u)")
        (result.alerts, result.access) = try await placeAlertRows(where: "viewer = \(u) OR subject = \(u)", access: "subject = \(u) OR viewer = \(u)")
        return result
    }
}
