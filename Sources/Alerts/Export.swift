public import FriensoProto
import GRDB
import Storage
public import Wire

/// Export my data: everything alerts stores about the caller.
extension AlertsService {
    public func exportMyData(_ request: AlertsV1.ExportMyDataRequest, _ context: RequestContext) async throws -> AlertsV1.ExportMyDataResponse {
        let caller = try context.requireCaller()
        let rows = try await store.exportRows(of: caller)
        var ids = Set<UInt64>([caller])
        for w in rows.watches + rows.watched { ids.formUnion(w.watchers.map(\.user) + [w.initiator]) }
        for a in rows.alerts + rows.alertsReceived { ids.formUnion(a.recipients.map(\.user).filter { $0 != 0 } + [a.initiator]) }
        let names = await people(ids)
        var out = AlertsV1.ExportMyDataResponse()
        for w in rows.watches { out.watches.append(await view(w, names)) }
        for w in rows.watched { out.watched.append(await view(w, names)) }
        for a in rows.alerts { out.alerts.append(try await view(a, names)) }
        for a in rows.alertsReceived { out.alertsReceived.append(try await view(a, names)) }
        out.devices = try await listDevices(AlertsV1.ListDevicesRequest(), context).devices
        out.deliveries = rows.deliveries
        out.timers = rows.timers.map(\.proto)
        return out
    }
}

extension AlertsStore {
    struct ExportRows: Sendable {
        var watches: [WatchRecord] = []
        var watched: [WatchRecord] = []
        var alerts: [AlertRecord] = []
        var alertsReceived: [AlertRecord] = []
        var deliveries: [AlertsV1.Delivery] = []
        var timers: [TimerRecord] = []
    }

    /// Newest first.
    func exportRows(of user: UInt64) async throws -> ExportRows {
        try await database.read { db in
            var rows = ExportRows()
            rows.watches = try UInt64.fetchAll(db, sql: "SELECT id FROM watch_sessions WHERE initiator = ? ORDER BY id DESC", arguments: [user])
                .compactMap { try Self.watch(db, id: $0) }
            rows.watched = try UInt64.fetchAll(db, sql: "SELECT DISTINCT session_id FROM watchers WHERE watcher = ? ORDER BY session_id DESC",
                                               arguments: [user]).compactMap { try Self.watch(db, id: $0) }
            rows.alerts = try UInt64.fetchAll(db, sql: "SELECT id FROM help_alerts WHERE initiator = ? ORDER BY id DESC", arguments: [user])
                .compactMap { try Self.alert(db, id: $0) }
            rows.alertsReceived = try UInt64.fetchAll(db, sql: "SELECT DISTINCT alert_id FROM recipients WHERE user_id = ? ORDER BY alert_id DESC",
                                                      arguments: [user]).compactMap { try Self.alert(db, id: $0) }
            rows.deliveries = try Row.fetchAll(db, sql: """
                SELECT \(Self.deliveryColumns) FROM outbox WHERE recipient_user = ?1 OR about_user = ?1 ORDER BY id DESC
                """, arguments: [user]).map(Self.delivery)
            rows.timers = try Self.timers(db, "owner = ?", [user]).reversed()
            return rows
        }
    }
}
