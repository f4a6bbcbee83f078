import Foundation
public import FriensoProto
import GRDB
import Storage
public import Wire

/// Place alerts ("tell me when Alice arrives home"): the handlers and their storage. Which
/// alerts fire is decided by `PlaceAlertBook.transitions` as each location batch is written
/// (`GeoState.plan`, `told`), stored with the batch, then published (`LocationEvents`).
extension GeoService {
    /// The stream that tells alerts to pull place events (they are in the database: a reader
    /// that missed this event still gets them on its next pull).
    public static let placeEventStream = "placeevents"

    /// How long place events are kept for alerts to take (and for an export).
    static let placeEventRetentionMs: Int64 = 7 * 86_400_000

    public func allowPlaceAlerts(_ request: GeoV1.AllowPlaceAlertsRequest, _ context: RequestContext) async throws -> GeoV1.AllowPlaceAlertsResponse {
        let caller = try context.requireCaller()
        guard request.userId != 0, request.userId != caller else { throw RPCError.invalidArgument("user_id: a friend") }
        if request.allowed {
            guard graph.read({ $0.areFriends(caller, request.userId) }) else {
                throw RPCError.failedPrecondition("user \(request.userId) is not your friend")
            }
        }
        let dropped = request.allowed ? [] : state.mutex.withLock { s in
            s.placeAlerts.alerts(of: caller).filter { $0.viewer == request.userId }.map(\.id)
        }
        try await store.setPlaceAlertAccess(subject: caller, viewer: request.userId, allowed: request.allowed, droppingAlerts: dropped)
        let allowed = state.mutex.withLock { s in
            s.placeAlerts.setAllowed(viewer: request.userId, subject: caller, request.allowed)
            for id in dropped { s.placeAlerts.remove(id) }
            return (s.placeAlerts.allowed[caller] ?? []).sorted()
        }
        return GeoV1.AllowPlaceAlertsResponse(allowed: allowed)
    }

    public func listPlaceAlertTargets(_ request: GeoV1.ListPlaceAlertTargetsRequest, _ context: RequestContext) async throws -> GeoV1.ListPlaceAlertTargetsResponse {
        let caller = try context.requireCaller()
        return try state.mutex.withLock { s in
            guard request.subjectId == caller || s.placeAlerts.isAllowed(viewer: caller, subject: request.subjectId) else {
                throw RPCError.permissionDenied("user \(request.subjectId) does not allow you place alerts")
            }
            return GeoV1.ListPlaceAlertTargetsResponse(zones: s.zones.zones(of: request.subjectId).filter { $0.privacy != .hidden }.map {
                GeoV1.ZoneLabel(zoneId: $0.id, label: $0.label)
            })
        }
    }

    public func createPlaceAlert(_ request: GeoV1.CreatePlaceAlertRequest, _ context: RequestContext) async throws -> GeoV1.CreatePlaceAlertResponse {
        let caller = try context.requireCaller()
        guard request.subjectId != 0, request.subjectId != caller else { throw RPCError.invalidArgument("subject_id: a friend") }
        guard (request.zoneId == 0) != (request.placeId == 0) else { throw RPCError.invalidArgument("one of zone_id and place_id") }
        guard request.onArrive || request.onLeave else { throw RPCError.invalidArgument("on_arrive, on_leave or both") }
        let target: PlaceTarget = request.zoneId != 0 ? .zone(request.zoneId) : .place(request.placeId)
        let at = now()
        var alert = try state.mutex.withLock { s -> PlaceAlertRecord in
            guard s.placeAlerts.isAllowed(viewer: caller, subject: request.subjectId) else {
                throw RPCError.permissionDenied("user \(request.subjectId) does not allow you place alerts")
            }
            let label: String, area: PlaceArea
            switch target {
            case .zone(let id):
                // A HIDDEN zone and no zone look the same.
                guard let zone = s.zones.zone(id, of: request.subjectId), zone.privacy != .hidden else {
                    throw RPCError.notFound("no zone \(id) of user \(request.subjectId) you may set alerts on")
                }
                (label, area) = (zone.label, zone.area)
            case .place(let id):
                guard let place = s.places.first(where: { $0.id == id }) else { throw RPCError.notFound("no place \(id)") }
                (label, area) = (place.name, PlaceArea(place))
            }
            if var existing = s.placeAlerts.alert(viewer: caller, subject: request.subjectId, target: target) {
                (existing.onArrive, existing.onLeave) = (request.onArrive, request.onLeave)
                return existing
            }
            guard s.placeAlerts.alerts(setBy: caller).count < PlaceAlertRecord.maxPerViewer else {
                throw RPCError.resourceExhausted("at most \(PlaceAlertRecord.maxPerViewer) place alerts: delete one first")
            }
            return PlaceAlertRecord(id: 0, viewer: caller, subject: request.subjectId, target: target, label: label, area: area,
                                    onArrive: request.onArrive, onLeave: request.onLeave, createdMs: at)
        }
        alert.id = try await store.savePlaceAlert(alert)
        let saved = alert
        state.mutex.withLock { s in
            let known = s.placeAlerts.alert(viewer: caller, subject: saved.subject, target: saved.target) != nil
            s.placeAlerts.add(saved)
            // Where the subject is now is the starting point: arriving is told from the next fix on.
            if !known, let fix = s.latest[saved.subject] {
                s.placeAlerts.seed(subject: saved.subject, target: saved.target, area: saved.area, lat: fix.lat, lon: fix.lon)
            }
        }
        return GeoV1.CreatePlaceAlertResponse(alert: saved.proto)
    }

    public func listPlaceAlerts(_ request: GeoV1.ListPlaceAlertsRequest, _ context: RequestContext) async throws -> GeoV1.ListPlaceAlertsResponse {
        let caller = try context.requireCaller()
        return state.mutex.withLock { s in
            GeoV1.ListPlaceAlertsResponse(mine: s.placeAlerts.alerts(setBy: caller).map(\.proto),
                                          aboutMe: s.placeAlerts.alerts(of: caller).sorted { $0.id < $1.id }.map(\.proto),
                                          allowed: (s.placeAlerts.allowed[caller] ?? []).sorted())
        }
    }

    public func deletePlaceAlert(_ request: GeoV1.DeletePlaceAlertRequest, _ context: RequestContext) async throws -> GeoV1.DeletePlaceAlertResponse {
        let caller = try context.requireCaller()
        guard request.alertId != 0 else { throw RPCError.invalidArgument("alert_id: required") }
        let mine = state.mutex.withLock { s in
            s.placeAlerts.alerts[request.alertId].map { $0.viewer == caller || $0.subject == caller } ?? false
        }
        guard mine else { return GeoV1.DeletePlaceAlertResponse(deleted: false) }
        try await store.deletePlaceAlert(request.alertId)
        state.mutex.withLock { $0.placeAlerts.remove(request.alertId) }
        return GeoV1.DeletePlaceAlertResponse(deleted: true)
    }

    /// Place events stored (the benchmark's count).
    public func placeEventCount() async throws -> Int {
        try await store.placeEventCount()
    }

    public func listPlaceEvents(_ request: GeoV1.ListPlaceEventsRequest, _ context: RequestContext) async throws -> GeoV1.ListPlaceEventsResponse {
        let limit = request.limit == 0 ? 500 : Int(request.limit)
        guard (1...1_000).contains(limit) else { throw RPCError.invalidArgument("limit: 1-1,000") }
        let events = try await store.placeEvents(after: request.afterId, limit: limit)
        return GeoV1.ListPlaceEventsResponse(events: events.map(\.proto), viewers: events.map(\.viewer))
    }
}

extension SQLiteGeoStore {
    /// The alerts whose zone or place still exists, with their labels and areas, and who allows whom.
    func loadPlaceAlerts(zones: ZoneBook, places: [PlaceRecord]) throws -> PlaceAlertBook {
        try database.read { db in
            let rows = try Row.fetchAll(db, sql: """
                SELECT id, viewer, subject, zone_id, place_id, on_arrive, on_leave, created_ms FROM place_alerts ORDER BY id
                """) { row in
                try PlaceAlertRow(id: row[0], viewer: row[1], subject: row[2], zoneID: row[3], placeID: row[4], onArrive: row[5], onLeave: row[6],
                              createdMs: row[7])
            }
            let allowed = try Row.fetchAll(db, sql: "SELECT subject, viewer FROM place_alert_access") { try (subject: $0[0] as UInt64, viewer: $0[1] as UInt64) }
            return PlaceAlertBook(rows: rows, allowed: allowed, zones: zones, places: places)
        }
    }

    func setPlaceAlertAccess(subject: UInt64, viewer: UInt64, allowed: Bool, droppingAlerts: [UInt64]) async throws {
        try await database.write { db in
            if allowed {
                try db.run(sql: "INSERT OR IGNORE INTO place_alert_access (subject, viewer) VALUES (?, ?)", arguments: [subject, viewer])
            } else {
                try db.run(sql: "DELETE FROM place_alert_access WHERE subject = ? AND viewer = ?", arguments: [subject, viewer])
                for id in droppingAlerts { try db.run(sql: "DELETE FROM place_alerts WHERE id = ?", arguments: [id]) }
            }
        }
    }

    /// Creates the alert (id 0) or updates its directions. - Returns: its id.
    func savePlaceAlert(_ alert: PlaceAlertRecord) async throws -> UInt64 {
        try await database.write { db in
            if alert.id != 0 {
                try db.run(sql: "UPDATE place_alerts SET on_arrive = ?, on_leave = ? WHERE id = ?", arguments: [alert.onArrive, alert.onLeave, alert.id])
                return alert.id
            }
            let (zone, place): (UInt64, UInt64)
            switch alert.target {
            case .zone(let id): (zone, place) = (id, 0)
            case .place(let id): (zone, place) = (0, id)
            }
            try db.run(sql: """
                INSERT INTO place_alerts (viewer, subject, zone_id, place_id, on_arrive, on_leave, created_ms) VALUES (?, ?, ?, ?, ?, ?, ?)
                """, arguments: [alert.viewer, alert.subject, zone, place, alert.onArrive, alert.onLeave, alert.createdMs])
            return UInt64(db.lastInsertedRowID)
        }
    }

    func deletePlaceAlert(_ id: UInt64) async throws {
        try await database.write { db in try db.run(sql: "DELETE FROM place_alerts WHERE id = ?", arguments: [id]) }
    }

    /// Alerts on places that an import replaced: gone with them.
    func deletePlaceAlerts(onPlacesOtherThan kept: Set<UInt64>) async throws -> [UInt64] {
        try await database.write { db in
            let rows = try Row.fetchAll(db, sql: "SELECT id, place_id FROM place_alerts WHERE place_id != 0") { try (id: $0[0] as UInt64, place: $0[1] as UInt64) }
            let ids = rows.filter { !kept.contains($0.place) }.map(\.id)
            for id in ids { try db.run(sql: "DELETE FROM place_alerts WHERE id = ?", arguments: [id]) }
            return ids
        }
    }

    /// The place events of a batch, in its transaction. - Returns: them with their ids.
    static func insert(_ events: [PlaceEventRecord], _ db: Database) throws -> [PlaceEventRecord] {
        guard !events.isEmpty else { return [] }
        return try events.map { event in
            try db.run(sql: "INSERT INTO place_events (viewer, subject, alert_id, label, arrived, at_ms) VALUES (?, ?, ?, ?, ?, ?)",
                       binding: event.viewer, event.subject, event.alert, event.label, event.arrived, event.atMs)
            var stored = event
            stored.id = UInt64(db.lastInsertedRowID)
            return stored
        }
    }

    func placeEventCount() async throws -> Int {
        try await database.read { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM place_events") ?? 0 }
    }

    func placeEvents(after id: UInt64, limit: Int) async throws -> [PlaceEventRecord] {
        try await database.read { db in
            try Row.fetchAll(db, cached: """
                SELECT id, viewer, subject, alert_id, label, arrived, at_ms FROM place_events WHERE id > ? ORDER BY id LIMIT ?
                """, binding: id, limit) { row in
                try PlaceEventRecord(id: row[0], viewer: row[1], subject: row[2], alert: row[3], label: row[4], arrived: row[5], atMs: row[6])
            }
        }
    }

    func prunePlaceEvents(before cutoff: Int64) async throws -> Int {
        try await database.write { db in
            try db.run(sql: "DELETE FROM place_events WHERE at_ms < ?", arguments: [cutoff])
            return db.changesCount
        }
    }
}
