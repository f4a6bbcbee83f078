import Foundation
public import FriensoProto
import GRDB
import Storage
public import Wire

/// Privacy zones and my places: the handlers and their storage. The rules are in
/// `Core/Zones.swift` (`ZoneBook`) and `GeoState.disclosure`.
extension GeoService {
    public func setZone(_ request: GeoV1.SetZoneRequest, _ context: RequestContext) async throws -> GeoV1.SetZoneResponse {
        let caller = try context.requireCaller()
        guard let given = request.zone else { throw RPCError.invalidArgument("zone: required") }
        var zone = try Self.validate(given, user: caller)
        let existing = state.mutex.withLock { $0.zones.zones(of: caller) }
        if zone.id == 0 {
            guard existing.count < ZoneRecord.maxPerUser else {
                throw RPCError.resourceExhausted("at most \(ZoneRecord.maxPerUser) zones: delete one first")
            }
        } else {
            guard existing.contains(where: { $0.id == zone.id }) else { throw RPCError.notFound("no zone \(zone.id) of yours") }
        }
        // The hiding circle's shift: new for a new zone or one moved or resized, else kept (a
        // shift drawn again at each edit would let someone average the rims).
        if let old = existing.first(where: { $0.id == zone.id }), (old.lat, old.lon, old.radius) == (zone.lat, zone.lon, zone.radius) {
            zone.shift = old.shift
        } else {
            zone.shift = ZoneRecord.randomShift(radius: zone.radius)
        }
        // A zone that becomes HIDDEN takes its place alerts with it: an alert would tell of it.
        let dropped = zone.privacy == .hidden
            ? state.mutex.withLock { s in s.placeAlerts.alerts(of: caller).filter { $0.target == .zone(zone.id) }.map(\.id) } : []
        zone.id = try await store.saveZone(zone, droppingAlerts: dropped)
        let saved = zone
        let view = state.mutex.withLock { s in
            s.zones.set(saved)
            for id in dropped { s.placeAlerts.remove(id) }
            s.placeAlerts.zoneChanged(saved)
            if let fix = s.latest[caller] {
                s.placeAlerts.seed(subject: caller, target: .zone(saved.id), area: saved.area, lat: fix.lat, lon: fix.lon)
            }
            return s.zoneView(saved)
        }
        return GeoV1.SetZoneResponse(zone: view)
    }

    public func listZones(_ request: GeoV1.ListZonesRequest, _ context: RequestContext) async throws -> GeoV1.ListZonesResponse {
        let caller = try context.requireCaller()
        return state.mutex.withLock { s in GeoV1.ListZonesResponse(zones: s.zones.zones(of: caller).map(s.zoneView)) }
    }

    public func deleteZone(_ request: GeoV1.DeleteZoneRequest, _ context: RequestContext) async throws -> GeoV1.DeleteZoneResponse {
        let caller = try context.requireCaller()
        guard request.zoneId != 0 else { throw RPCError.invalidArgument("zone_id: required") }
        let alerts = state.mutex.withLock { s -> [UInt64]? in
            guard s.zones.zone(request.zoneId, of: caller) != nil else { return nil }
            return s.placeAlerts.alerts(of: caller).filter { $0.target == .zone(request.zoneId) }.map(\.id)
        }
        guard let alerts else { return GeoV1.DeleteZoneResponse(deleted: false) }
        try await store.deleteZone(request.zoneId, of: caller)
        state.mutex.withLock { s in
            s.zones.remove(request.zoneId, of: caller)
            for id in alerts { s.placeAlerts.remove(id) }
        }
        return GeoV1.DeleteZoneResponse(deleted: true)
    }

    static func validate(_ zone: GeoV1.Zone, user: UInt64) throws -> ZoneRecord {
        let label = zone.label.trimmingCharacters(in: .whitespacesAndNewlines)
        guard (1...ZoneRecord.maxLabel).contains(label.count) else { throw RPCError.invalidArgument("label: 1 to \(ZoneRecord.maxLabel) characters") }
        guard !label.unicodeScalars.contains(where: { $0.properties.generalCategory == .control }) else {
            throw RPCError.invalidArgument("label: no control characters")
        }
        guard GeoMath.isValid(latitude: zone.latitude, longitude: zone.longitude) else {
            throw RPCError.invalidArgument("latitude must be -90..90 and longitude -180..180 (finite numbers)")
        }
        guard zone.radiusM.isFinite, ZoneRecord.radii.contains(zone.radiusM) else {
            throw RPCError.invalidArgument("radius_m: \(Int(ZoneRecord.radii.lowerBound)) to \(Int(ZoneRecord.radii.upperBound)) metres")
        }
        guard let privacy = ZonePrivacy(zone.privacy) else { throw RPCError.invalidArgument("privacy: LABEL, HIDDEN or OFF") }
        return ZoneRecord(id: zone.zoneId, user: user, label: label, lat: zone.latitude, lon: zone.longitude, radius: zone.radiusM,
                          privacy: privacy, keepHistory: zone.keepHistory)
    }
}

extension GeoState {
    /// A zone as its owner sees it: with whether their latest fix is inside it now.
    func zoneView(_ zone: ZoneRecord) -> GeoV1.Zone {
        zone.proto(inside: latest[zone.user].map { zone.covers(lat: $0.lat, lon: $0.lon, accuracy: $0.accuracy) } ?? false)
    }
}

extension SQLiteGeoStore {
    static func migrateZonesAndPlaceAlerts(_ migrator: inout DatabaseMigrator) {
        migrator.registerMigration("zones-and-place-alerts") { db in
            try db.execute(sql: """
                CREATE TABLE zones (id INTEGER PRIMARY KEY AUTOINCREMENT, user_id INTEGER NOT NULL, label TEXT NOT NULL,
                                    lat REAL NOT NULL, lon REAL NOT NULL, radius_m REAL NOT NULL, privacy INTEGER NOT NULL,
                                    keep_history INTEGER NOT NULL);
                CREATE INDEX zones_user ON zones(user_id);
                CREATE TABLE place_alerts (id INTEGER PRIMARY KEY AUTOINCREMENT, viewer INTEGER NOT NULL, subject INTEGER NOT NULL,
                                           zone_id INTEGER NOT NULL, place_id INTEGER NOT NULL, on_arrive INTEGER NOT NULL,
                                           on_leave INTEGER NOT NULL, created_ms INTEGER NOT NULL);
                CREATE INDEX place_alerts_subject ON place_alerts(subject);
                CREATE INDEX place_alerts_viewer ON place_alerts(viewer);
                CREATE TABLE place_alert_access (subject INTEGER NOT NULL, viewer INTEGER NOT NULL,
                                                 PRIMARY KEY (subject, viewer)) WITHOUT ROWID;
                CREATE INDEX place_alert_access_viewer ON place_alert_access(viewer);
                CREATE TABLE place_events (id INTEGER PRIMARY KEY AUTOINCREMENT, viewer INTEGER NOT NULL, subject INTEGER NOT NULL,
                                           alert_id INTEGER NOT NULL, label TEXT NOT NULL, arrived INTEGER NOT NULL, at_ms INTEGER NOT NULL);
                CREATE INDEX place_events_at ON place_events(at_ms);
                -- 1: inside a private zone that keeps no history; deleted when its fold completes.
                ALTER TABLE history ADD COLUMN unrecorded INTEGER;
                CREATE INDEX history_unrecorded ON history(id) WHERE unrecorded = 1;
                """)
        }
        migrator.registerMigration("zone-hiding-shift") { db in
            // Zones made before it hide around their own centre (shift 0) until they are moved or resized.
            try db.execute(sql: """
                ALTER TABLE zones ADD COLUMN shift_north REAL NOT NULL DEFAULT 0;
                ALTER TABLE zones ADD COLUMN shift_east REAL NOT NULL DEFAULT 0;
                """)
        }
    }

    func loadZones() throws -> [ZoneRecord] {
        try database.read { db in
            try Row.fetchAll(db, sql: """
                SELECT id, user_id, label, lat, lon, radius_m, privacy, keep_history, shift_north, shift_east FROM zones ORDER BY id
                """) { row -> ZoneRecord? in
                guard let privacy = ZonePrivacy(rawValue: try row[6]) else { return nil }
                return try ZoneRecord(id: row[0], user: row[1], label: row[2], lat: row[3], lon: row[4], radius: row[5], privacy: privacy,
                                      keepHistory: row[7], shift: (row[8], row[9]))
            }.compactMap { $0 }
        }
    }

    /// Creates (id 0) or replaces a zone, deleting `droppingAlerts` in the same transaction. - Returns: its id.
    func saveZone(_ zone: ZoneRecord, droppingAlerts: [UInt64]) async throws -> UInt64 {
        try await database.write { db in
            for id in droppingAlerts { try db.run(sql: "DELETE FROM place_alerts WHERE id = ?", arguments: [id]) }
            let arguments: StatementArguments = [zone.user, zone.label, zone.lat, zone.lon, zone.radius, zone.privacy.rawValue, zone.keepHistory,
                                                 zone.shift.north, zone.shift.east]
            if zone.id == 0 {
                try db.run(sql: """
                    INSERT INTO zones (user_id, label, lat, lon, radius_m, privacy, keep_history, shift_north, shift_east) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
                    """, arguments: arguments)
                return UInt64(db.lastInsertedRowID)
            }
            try db.run(sql: """
                UPDATE zones SET label = ?2, lat = ?3, lon = ?4, radius_m = ?5, privacy = ?6, keep_history = ?7, shift_north = ?8, shift_east = ?9
                WHERE id = ?10 AND user_id = ?1
                """, arguments: arguments + [zone.id])
            return zone.id
        }
    }

    func deleteZone(_ id: UInt64, of user: UInt64) async throws {
        try await database.write { db in
            try db.run(sql: "DELETE FROM zones WHERE id = ? AND user_id = ?", arguments: [id, user])
            try db.run(sql: "DELETE FROM place_alerts WHERE subject = ? AND zone_id = ?", arguments: [user, id])
        }
    }

    /// History rows inside a private zone that keeps none, once folded (their fix is in `latest`
    /// when it was the newest): deleted with their index entries, in the fold's transaction.
    static func dropUnrecorded(through id: Int64, _ db: Database) throws {
        try db.run(sql: """
            DELETE FROM history_by_user WHERE (user_id, history_id) IN (SELECT user_id, id FROM history WHERE unrecorded = 1 AND id <= ?)
            """, arguments: [id])
        try db.run(sql: "DELETE FROM history WHERE unrecorded = 1 AND id <= ?", arguments: [id])
    }
}
