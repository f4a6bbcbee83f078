import Foundation
import FriensoProto
import PostgresNIO
import Storage
import Wire

/// Zones, place alerts and their events, share links, the audit and erasure on PostgreSQL.
extension PostgresGeoStore {
    // MARK: Privacy zones

    func loadZones() throws -> [ZoneRecord] {
        try awaitBlocking { [self] in try await self.zones(where: "true") }
    }

    /// The zones `condition` selects (a trusted fragment), in id order.
    func zones(where condition: String) async throws -> [ZoneRecord] {
        try await database.read { connection in
            var result: [ZoneRecord] = []
            for try await (id, user, label, lat, lon, radius, privacy, keep, north, east) in try await connection.query("""
                SELECT id, user_id, label, lat, lon, radius_m, privacy, keep_history, shift_north, shift_east FROM zones
                WHERE \(unescaped: condition) ORDER BY id
                """, logger: self.logger).decode((Int64, Int64, String, Double, Double, Double, Int64, Bool, Double, Double).self) {
                if let privacy = ZonePrivacy(rawValue: Int(privacy)) {
                    result.append(ZoneRecord(id: Self.id(id), user: Self.id(user), label: label, lat: lat, lon: lon, radius: radius,
                                             privacy: privacy, keepHistory: keep, shift: (north, east)))
                }
            }
            return result
        }
    }

    func saveZone(_ zone: ZoneRecord, droppingAlerts: [UInt64]) async throws -> UInt64 {
        try await write(announcing: .people([zone.user])) { connection in
            try await self.deleteAlerts(droppingAlerts, connection)
            let user = Self.id(zone.user), privacy = Int64(zone.privacy.rawValue)
            if zone.id == 0 {
                let id = try await PostgresServiceDatabase.first(connection.prepared("""
                    INSERT INTO zones (user_id, label, lat, lon, radius_m, privacy, keep_history, shift_north, shift_east)
                    VALUES (\(user), \(zone.label), \(zone.lat), \(zone.lon), \(zone.radius), \(privacy), \(zone.keepHistory),
                            \(zone.shift.north), \(zone.shift.east)) RETURNING id
                    """, logger: self.logger), Int64.self)
                return Self.id(id ?? 0)
            }
            try await connection.prepared("""
                UPDATE zones SET label = \(zone.label), lat = \(zone.lat), lon = \(zone.lon), radius_m = \(zone.radius), privacy = \(privacy),
                    keep_history = \(zone.keepHistory), shift_north = \(zone.shift.north), shift_east = \(zone.shift.east)
                WHERE id = \(Self.id(zone.id)) AND user_id = \(user)
                """, logger: self.logger)
            return zone.id
        }
    }

    func deleteZone(_ id: UInt64, of user: UInt64) async throws {
        try await write(announcing: .people([user])) { connection in
            try await connection.prepared("DELETE FROM zones WHERE id = \(Self.id(id)) AND user_id = \(Self.id(user))", logger: self.logger)
            try await connection.prepared("DELETE FROM place_alerts WHERE subject = \(Self.id(user)) AND zone_id = \(Self.id(id))", logger: self.logger)
        }
    }

    // MARK: Place alerts

    func loadPlaceAlerts(zones: ZoneBook, places: [PlaceRecord]) throws -> PlaceAlertBook {
        try awaitBlocking { [self] in
            let (rows, allowed) = try await self.placeAlertRows(where: "true", access: "true")
            return PlaceAlertBook(rows: rows, allowed: allowed, zones: zones, places: places)
        }
    }

    /// The place alerts and access rows the conditions select (trusted fragments).
    func placeAlertRows(where condition: String, access: String) async throws -> ([PlaceAlertRow], [(subject: UInt64, viewer: UInt64)]) {
        try await database.read { connection in
            var rows: [PlaceAlertRow] = []
            for try await (id, viewer, subject, zone, place, arrive, leave, created) in try await connection.query("""
                SELECT id, viewer, subject, zone_id, place_id, on_arrive, on_leave, created_ms FROM place_alerts WHERE \(unescaped: condition) ORDER BY id
                """, logger: self.logger).decode((Int64, Int64, Int64, Int64, Int64, Bool, Bool, Int64).self) {
                rows.append(PlaceAlertRow(id: Self.id(id), viewer: Self.id(viewer), subject: Self.id(subject), zoneID: Self.id(zone),
                                          placeID: Self.id(place), onArrive: arrive, onLeave: leave, createdMs: created))
            }
            var allowed: [(subject: UInt64, viewer: UInt64)] = []
            for try await (subject, viewer) in try await connection.query(
                "SELECT subject, viewer FROM place_alert_access WHERE \(unescaped: access)", logger: self.logger).decode((Int64, Int64).self) {
                allowed.append((Self.id(subject), Self.id(viewer)))
            }
            return (rows, allowed)
        }
    }

    private func deleteAlerts(_ ids: [UInt64], _ connection: PostgresConnection) async throws {
        guard !ids.isEmpty else { return }
        let binds = ids.map(Self.id)
        try await connection.prepared("DELETE FROM place_alerts WHERE id = ANY(\(binds))", logger: logger)
    }

    /// The subject of alert `id`, if it exists.
    private func subject(ofAlert id: UInt64) async throws -> UInt64? {
        try await database.read { connection in
            try await PostgresServiceDatabase.first(connection.prepared("SELECT subject FROM place_alerts WHERE id = \(Self.id(id))", logger: self.logger),
                                                    Int64.self).map(Self.id)
        }
    }

    func setPlaceAlertAccess(subject: UInt64, viewer: UInt64, allowed: Bool, droppingAlerts: [UInt64]) async throws {
        try await write(announcing: .people([subject])) { connection in
            if allowed {
                try await connection.prepared("""
                    INSERT INTO place_alert_access (subject, viewer) VALUES (\(Self.id(subject)), \(Self.id(viewer))) ON CONFLICT DO NOTHING
                    """, logger: self.logger)
            } else {
                try await connection.prepared("DELETE FROM place_alert_access WHERE subject = \(Self.id(subject)) AND viewer = \(Self.id(viewer))",
                                           logger: self.logger)
                try await self.deleteAlerts(droppingAlerts, connection)
            }
        }
    }

    func savePlaceAlert(_ alert: PlaceAlertRecord) async throws -> UInt64 {
        try await write(announcing: .people([alert.subject])) { connection in
            if alert.id != 0 {
                try await connection.prepared("""
                    UPDATE place_alerts SET on_arrive = \(alert.onArrive), on_leave = \(alert.onLeave) WHERE id = \(Self.id(alert.id))
                    """, logger: self.logger)
                return alert.id
            }
            let (zone, place): (UInt64, UInt64) = switch alert.target {
            case .zone(let id): (id, 0)
            case .place(let id): (0, id)
            }
            let id = try await PostgresServiceDatabase.first(connection.prepared("""
                INSERT INTO place_alerts (viewer, subject, zone_id, place_id, on_arrive, on_leave, created_ms)
                VALUES (\(Self.id(alert.viewer)), \(Self.id(alert.subject)), \(Self.id(zone)), \(Self.id(place)), \(alert.onArrive),
                        \(alert.onLeave), \(alert.createdMs)) RETURNING id
                """, logger: self.logger), Int64.self)
            return Self.id(id ?? 0)
        }
    }

    func deletePlaceAlert(_ id: UInt64) async throws {
        guard let subject = try await subject(ofAlert: id) else { return }
        try await write(announcing: .people([subject])) { connection in try await self.deleteAlerts([id], connection) }
    }

    func deletePlaceAlerts(onPlacesOtherThan kept: Set<UInt64>) async throws -> [UInt64] {
        try await write(announcing: .places) { connection in
            let keep = kept.map(Self.id)
            return try await PostgresServiceDatabase.ids(connection.prepared("""
                DELETE FROM place_alerts WHERE place_id != 0 AND NOT (place_id = ANY(\(keep))) RETURNING id
                """, logger: self.logger))
        }
    }

    /// The place events of a batch, in its transaction (under the history lock: their ids commit
    /// in order, which alerts' reader relies on). - Returns: them with their ids.
    func insert(_ events: [PlaceEventRecord], _ connection: PostgresConnection) async throws -> [PlaceEventRecord] {
        var stored: [PlaceEventRecord] = []
        for event in events {
            let id = try await PostgresServiceDatabase.first(connection.prepared("""
                INSERT INTO place_events (viewer, subject, alert_id, label, arrived, at_ms)
                VALUES (\(Self.id(event.viewer)), \(Self.id(event.subject)), \(Self.id(event.alert)), \(event.label), \(event.arrived), \(event.atMs))
                RETURNING id
                """, logger: logger), Int64.self)
            var copy = event
            copy.id = Self.id(id ?? 0)
            stored.append(copy)
        }
        return stored
    }

    func placeEvents(after id: UInt64, limit: Int) async throws -> [PlaceEventRecord] {
        try await database.read { connection in
            var result: [PlaceEventRecord] = []
            for try await (id, viewer, subject, alert, label, arrived, at) in try await connection.prepared("""
                SELECT id, viewer, subject, alert_id, label, arrived, at_ms FROM place_events WHERE id > \(Self.id(id)) ORDER BY id LIMIT \(limit)
                """, logger: self.logger).decode((Int64, Int64, Int64, Int64, String, Bool, Int64).self) {
                result.append(PlaceEventRecord(id: Self.id(id), viewer: Self.id(viewer), subject: Self.id(subject), alert: Self.id(alert),
                                               label: label, arrived: arrived, atMs: at))
            }
            return result
        }
    }

    func placeEventCount() async throws -> Int {
        try await database.read { connection in
            Int(try await PostgresServiceDatabase.first(connection.prepared("SELECT count(*) FROM place_events", logger: self.logger), Int64.self) ?? 0)
        }
    }

    func prunePlaceEvents(before cutoff: Int64) async throws -> Int {
        try await database.write { connection in
            try await PostgresServiceDatabase.count(connection.prepared("DELETE FROM place_events WHERE at_ms < \(cutoff) RETURNING 1", logger: self.logger))
        }
    }

    // MARK: Share links

    private typealias LinkRow = (Int64, String, Int64, Int64, Int64, Int64)
    private static func link(_ r: LinkRow) -> GeoV1.ShareLink {
        GeoV1.ShareLink(linkId: id(r.0), label: r.1, createdAtMs: r.2, expiresAtMs: r.3, revokedAtMs: r.4, views: UInt32(clamping: r.5))
    }

    func createShareLink(owner: UInt64, tokenHash: [UInt8], label: String, now: Int64, expires: Int64) async throws -> GeoV1.ShareLink {
        try await database.write { connection in
            // Links ended more than a week ago are forgotten.
            let horizon = now - 7 * 86_400_000
            try await connection.prepared("""
                DELETE FROM share_links WHERE owner = \(Self.id(owner)) AND (expires_ms < \(horizon) OR (revoked_ms != 0 AND revoked_ms < \(horizon)))
                """, logger: self.logger)
            for try await row in try await connection.prepared("""
                INSERT INTO share_links (owner, token_hash, label, created_ms, expires_ms) VALUES (\(Self.id(owner)), \(Data(tokenHash)), \(label), \(now), \(expires))
                RETURNING id, label, created_ms, expires_ms, revoked_ms, views
                """, logger: self.logger).decode(LinkRow.self) { return Self.link(row) }
            throw StoreInvariant("the share link just made is missing")
        }
    }

    func shareLinks(of owner: UInt64, now: Int64) async throws -> [GeoV1.ShareLink] {
        try await database.read { connection in
            var result: [GeoV1.ShareLink] = []
            for try await row in try await connection.prepared("""
                SELECT id, label, created_ms, expires_ms, revoked_ms, views FROM share_links WHERE owner = \(Self.id(owner))
                ORDER BY (revoked_ms = 0 AND expires_ms > \(now)) DESC, id DESC
                """, logger: self.logger).decode(LinkRow.self) { result.append(Self.link(row)) }
            return result
        }
    }

    func revokeShareLink(_ id: UInt64, owner: UInt64, now: Int64) async throws -> GeoV1.ShareLink? {
        try await database.write { connection in
            try await connection.prepared("""
                UPDATE share_links SET revoked_ms = \(now) WHERE id = \(Self.id(id)) AND owner = \(Self.id(owner)) AND revoked_ms = 0
                """, logger: self.logger)
            for try await row in try await connection.prepared("""
                SELECT id, label, created_ms, expires_ms, revoked_ms, views FROM share_links WHERE id = \(Self.id(id)) AND owner = \(Self.id(owner))
                """, logger: self.logger).decode(LinkRow.self) { return Self.link(row) }
            return nil
        }
    }

    func liveShareLink(tokenHash: [UInt8], now: Int64) async throws -> LiveLink? {
        try await database.write { connection in
            for try await (id, owner, label, expires) in try await connection.prepared("""
                UPDATE share_links SET views = views + 1 WHERE token_hash = \(Data(tokenHash)) AND revoked_ms = 0 AND expires_ms > \(now)
                RETURNING id, owner, label, expires_ms
                """, logger: self.logger).decode((Int64, Int64, String, Int64).self) {
                return LiveLink(id: Self.id(id), owner: Self.id(owner), label: label, expiresMs: expires)
            }
            return nil
        }
    }

    // MARK: The audit

    func addAudit(_ counts: [AuditLog.Key: UInt32]) async throws {
        guard !counts.isEmpty else { return }
        let entries = Array(counts)
        let subjects = entries.map { Self.id($0.key.subject) }, viewers = entries.map { Self.id($0.key.viewer) }
        let hours = entries.map(\.key.hour), kinds = entries.map { Int64($0.key.kind) }, links = entries.map { Self.id($0.key.link) }
        let numbers = entries.map { Int64($0.value) }
        try await database.write { connection in
            try await connection.prepared("""
                INSERT INTO audit (subject, viewer, hour, kind, link, count)
                SELECT * FROM unnest(\(subjects)::bigint[], \(viewers)::bigint[], \(hours)::bigint[], \(kinds)::bigint[], \(links)::bigint[],
                                     \(numbers)::bigint[])
                ON CONFLICT (subject, hour, viewer, kind, link) DO UPDATE SET count = audit.count + excluded.count
                """, logger: self.logger)
        }
    }

    func pruneAudit(before cutoff: Int64) async throws -> Int {
        try await database.write { connection in
            try await PostgresServiceDatabase.count(connection.prepared("DELETE FROM audit WHERE hour < \(AuditLog.hour(cutoff)) RETURNING 1",
                                                                     logger: self.logger))
        }
    }

    func audit(of subject: UInt64, since: Int64, limit: Int) async throws -> [GeoV1.AuditEntry] {
        try await database.read { connection in
            var result: [GeoV1.AuditEntry] = []
            for try await (viewer, kind, hour, count, link) in try await connection.prepared("""
                SELECT viewer, kind, hour, count, link FROM audit WHERE subject = \(Self.id(subject)) AND hour >= \(AuditLog.hour(since))
                ORDER BY hour DESC, count DESC, viewer LIMIT \(limit)
                """, logger: self.logger).decode((Int64, Int64, Int64, Int64, Int64).self) {
                result.append(GeoV1.AuditEntry(viewerId: Self.id(viewer), kind: GeoV1.AuditKind(rawValue: Int32(truncatingIfNeeded: kind)),
                                               hourStartMs: hour, count: UInt32(clamping: count), linkId: Self.id(link)))
            }
            return result
        }
    }

    // MARK: A deleted account

    func erase(_ user: UInt64, traces: [String], forgotten: @escaping @Sendable () -> Void) async throws -> Int {
        try await write(announcing: .erased(user), { connection in
            let u = Self.id(user)
            var erased = 0
            if self.changes != nil { try await PostgresEventLog.erase(subject: user, on: connection, logger: self.logger) }
            for query: PostgresQuery in [
                "DELETE FROM history WHERE user_id = \(u) RETURNING 1",
                "DELETE FROM latest WHERE user_id = \(u) RETURNING 1",
                "DELETE FROM sharing WHERE user_id = \(u) RETURNING 1",
                "DELETE FROM grants WHERE subject = \(u) OR viewer = \(u) RETURNING 1",
                "DELETE FROM check_ins WHERE user_id = \(u) RETURNING 1",
                "DELETE FROM precision WHERE subject = \(u) OR viewer = \(u) RETURNING 1",
                "DELETE FROM audit WHERE subject = \(u) OR viewer = \(u) RETURNING 1",
                "DELETE FROM share_links WHERE owner = \(u) RETURNING 1",
                "DELETE FROM zones WHERE user_id = \(u) RETURNING 1",
                "DELETE FROM place_alerts WHERE viewer = \(u) OR subject = \(u) RETURNING 1",
                "DELETE FROM place_alert_access WHERE subject = \(u) OR viewer = \(u) RETURNING 1",
                "DELETE FROM place_events WHERE viewer = \(u) OR subject = \(u) RETURNING 1",
            ] {
                erased += try await PostgresServiceDatabase.count(connection.prepared(query, logger: self.logger))
            }
            erased += try await PostgresReplyStore.eraseReplies(connection, of: user, mentioning: traces, logger: self.logger)
            return erased
        }, after: { _ in forgotten() })
    }

    /// Deleted rows stay in the table files as dead versions until a vacuum removes them.
    func scrubErased() async throws {
        try await database.read { connection in
            try await connection.query(PostgresQuery(unsafeSQL: "VACUUM \(Self.tables.joined(separator: ", "))"), logger: self.logger)
        }
    }
}
