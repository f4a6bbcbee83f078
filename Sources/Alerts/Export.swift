public import FriensoProto
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
