public import FriensoProto
import GRDB
import Storage
public import Wire

/// Export my data: everything geo stores about the caller, the history in pages.
extension GeoService {
    public func exportMyData(_ request: GeoV1.ExportMyDataRequest, _ context: RequestContext) async throws -> GeoV1.ExportMyDataResponse {
        let caller = try context.requireCaller()
        let limit = request.limit == 0 ? 5_000 : Int(request.limit)
        guard (1...10_000).contains(limit) else { throw RPCError.invalidArgument("limit: 1-10,000") }
        let at = now()
        var out = state.mutex.withLock { s in
            var out = GeoV1.ExportMyDataResponse(sharing: Self.proto(s.settings(of: caller)))
            if let fix = s.latest[caller] {
                out.latest = Self.proto(fix)
                out.status = fix.status
            }
            if let c = s.checkIns[caller], c.expiresMs > at { out.checkIn = Self.proto(c, distance: 0) }
            out.grants = s.grants.live(involving: caller, now: at).map {
                GeoV1.LocationGrant(subjectId: $0.key.subject, viewerId: $0.key.viewer, expiresAtMs: $0.expiresMs, reason: $0.key.reason)
            }
            out.zones = s.zones.zones(of: caller).map(s.zoneView)
            out.placeAlerts = (s.placeAlerts.alerts(setBy: caller) + s.placeAlerts.alerts(of: caller).sorted { $0.id < $1.id }).map(\.proto)
            out.placeAlertsAllowed = (s.placeAlerts.allowed[caller] ?? []).sorted()
            return out
        }
        let page = try await store.history(of: caller, after: request.afterHistoryId, limit: limit + 1)
        out.precision = precisionView(of: caller)
        if request.afterHistoryId == 0 {
            try await flushAudit()
            out.audit = try await store.audit(of: caller, since: 0, limit: 100_000)
            out.shareLinks = try await store.shareLinks(of: caller, now: at)
        }
        out.history = Array(page.prefix(limit))
        out.more = page.count > limit
        return out
    }
}

extension SQLiteGeoStore {
    /// `user`'s history entries after `after`, oldest first (not those inside a private zone,
    /// which are gone once folded).
    func history(of user: UInt64, after: UInt64, limit: Int) async throws -> [GeoV1.HistoryEntry] {
        try await database.read { db in
            try Row.fetchAll(db, sql: """
                SELECT id, lat, lon, accuracy, device_ms, received_ms, status FROM history
                WHERE id IN (\(Self.userHistory)) AND id > ?3 AND unrecorded IS NULL ORDER BY id LIMIT ?4
                """, arguments: [user, try Self.foldedThrough(db), after, limit]) { row in
                let status: String? = try row[6]
                return try GeoV1.HistoryEntry(id: row[0], fix: GeoV1.Fix(latitude: row[1], longitude: row[2], accuracyM: row[3], deviceTimeMs: row[4],
                                                                     receivedAtMs: row[5]),
                                          hasStatus: status != nil, status: status ?? "")
            }
        }
    }
}
