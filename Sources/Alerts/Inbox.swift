import Foundation
public import FriensoProto
public import Wire

/// The pending-request inbox, device registrations, the operator's outbox view, campus resources,
/// and social's notices.
extension AlertsService {
    // MARK: Inbox

    public func listInbox(_ request: AlertsV1.ListInboxRequest, _ context: RequestContext) async throws -> AlertsV1.ListInboxResponse {
        let caller = try context.requireCaller()
        let at = now()
        let rows = try await store.inbox(of: caller, at: at)
        let (watches, alerts, dismissed) = (rows.watches, rows.alerts, rows.dismissed)
        var circleRequests: [(owner: UInt64, atMs: Int64)] = []
        var partial = false
        do {
            circleRequests = try await peers.circleRequests(for: caller).filter { !dismissed.contains("\($0.owner):\($0.atMs)") }
        } catch {
            partial = true
            context.logger.warning("coreFriend requests unavailable", metadata: ["error": "\(error)"])
        }
        let names = await people(Set(watches.map(\.1) + alerts.map(\.1) + circleRequests.map(\.owner)))
        var items: [AlertsV1.InboxItem] = alerts.map { row in
            AlertsV1.InboxItem(kind: .helpNow, requestId: row.0, from: names[row.1], createdAtMs: row.3, text: row.2, location: row.4)
        }
        var rest: [AlertsV1.InboxItem] = watches.map { row in
            AlertsV1.InboxItem(kind: .watch, requestId: row.0, from: names[row.1], createdAtMs: row.3, text: row.2, endsAtMs: row.4)
        }
        rest += circleRequests.map {
            AlertsV1.InboxItem(kind: .coreFriend, requestId: $0.owner, from: names[$0.owner], createdAtMs: $0.atMs,
                               text: "asks you to be in their core circle")
        }
        items += rest.sorted { $0.createdAtMs > $1.createdAtMs }
        return AlertsV1.ListInboxResponse(items: items, partial: partial)
    }

    public func respondInbox(_ request: AlertsV1.RespondInboxRequest, _ context: RequestContext) async throws -> AlertsV1.RespondInboxResponse {
        let caller = try context.requireCaller()
        guard [.accept, .reject, .dismiss].contains(request.action) else { throw RPCError.invalidArgument("action: accept, reject or dismiss") }
        guard request.requestId != 0 else { throw RPCError.invalidArgument("request_id: required") }
        switch request.kind {
        case .watch: try await answerWatch(request.requestId, caller: caller, action: request.action)
        case .helpNow: try await answerHelpNow(request.requestId, caller: caller, action: request.action)
        case .coreFriend:
            // The request is social's: accept and reject go there; dismiss only hides it here.
            if request.action == .dismiss {
                let pending: [(owner: UInt64, atMs: Int64)]
                do { pending = try await peers.circleRequests(for: caller) } catch let error as RPCError {
                    throw RPCError(error.code == .unavailable ? .unavailable : error.code, "social: \(error.message)")
                }
                guard let found = pending.first(where: { $0.owner == request.requestId }) else {
                    throw RPCError.notFound("no pending core circle request from user \(request.requestId)")
                }
                try await store.dismissCircleRequest(member: caller, owner: found.owner, requestedAtMs: found.atMs)
            } else {
                try await peers.respondToCircleRequest(member: caller, owner: request.requestId, accept: request.action == .accept)
            }
        default: throw RPCError.invalidArgument("kind: watch, help_now or core_friend")
        }
        return AlertsV1.RespondInboxResponse()
    }

    // MARK: Devices

    public func registerDevice(_ request: AlertsV1.RegisterDeviceRequest, _ context: RequestContext) async throws -> AlertsV1.RegisterDeviceResponse {
        let caller = try context.requireCaller()
        let token = request.token
        guard (8...4096).contains(token.utf8.count), token.unicodeScalars.allSatisfy({ $0.value > 0x20 && $0.value < 0x7f }) else {
            throw RPCError.invalidArgument("token: 8-4096 printable ASCII characters, no spaces")
        }
        guard [.ios, .android, .web].contains(request.platform) else { throw RPCError.invalidArgument("platform: ios, android or web") }
        guard request.appVersion.count <= 40 else { throw RPCError.invalidArgument("app_version: at most 40 characters") }
        let at = now()
        let moved = try await store.registerDevice(token: token, user: caller, platform: request.platform, appVersion: request.appVersion, at: at)
        if moved != nil { context.logger.info("a device token moved to another user") }
        return AlertsV1.RegisterDeviceResponse(device: AlertsV1.Device(token: token, platform: request.platform, appVersion: request.appVersion,
                                                                       registeredAtMs: at))
    }

    public func unregisterDevice(_ request: AlertsV1.UnregisterDeviceRequest, _ context: RequestContext) async throws -> AlertsV1.UnregisterDeviceResponse {
        let caller = try context.requireCaller()
        guard try await store.unregisterDevice(token: request.token, user: caller) else {
            throw RPCError.notFound("no device with that token is registered to you")
        }
        return AlertsV1.UnregisterDeviceResponse()
    }

    public func listDevices(_ request: AlertsV1.ListDevicesRequest, _ context: RequestContext) async throws -> AlertsV1.ListDevicesResponse {
        let caller = try context.requireCaller()
        let devices = try await store.devices(of: caller)
        return AlertsV1.ListDevicesResponse(devices: devices)
    }

    // MARK: Outbox (operator)

    public func listOutbox(_ request: AlertsV1.ListOutboxRequest, _ context: RequestContext) async throws -> AlertsV1.ListOutboxResponse {
        try checkOperator(request.operatorKey, context, "listing the outbox")
        let limit = request.limit == 0 ? 50 : Int(request.limit)
        guard (1...500).contains(limit) else { throw RPCError.invalidArgument("limit: 1-500") }
        var deliveries = try await store.outbox(status: request.status, recipient: request.recipientUserId, beforeID: request.beforeId, limit: limit)
        for i in deliveries.indices {
            // A provider's error may quote the number or token it was given: shortened there too.
            let full = deliveries[i].address, short = Redact.address(full)
            func redacted(_ text: String) -> String { full.count > 8 ? text.replacingOccurrences(of: full, with: short) : text }
            deliveries[i].address = short
            deliveries[i].lastError = redacted(deliveries[i].lastError)
            for j in deliveries[i].attemptLog.indices { deliveries[i].attemptLog[j].error = redacted(deliveries[i].attemptLog[j].error) }
        }
        return AlertsV1.ListOutboxResponse(deliveries: deliveries)
    }

    // MARK: Campus resources

    private struct ResourceFile: Decodable {
        var campus: String?
        var title: String
        var detail: String?
        var phone: String?
        var url: String?
    }

    public func importResources(_ request: AlertsV1.ImportResourcesRequest, _ context: RequestContext) async throws -> AlertsV1.ImportResourcesResponse {
        try checkOperator(request.operatorKey, context, "importing resources")
        guard !request.data.isEmpty, request.data.count <= 1 << 20 else { throw RPCError.invalidArgument("data: 1 byte to 1 MiB of JSON") }
        let entries: [ResourceFile]
        do { entries = try JSONDecoder().decode([ResourceFile].self, from: Data(request.data)) } catch {
            throw RPCError.invalidArgument("data: a JSON array of {campus, title, detail, phone, url}: \(error)")
        }
        var byCampus: [String: [AlertsV1.Resource]] = [:]
        for (i, e) in entries.enumerated() {
            let campus = (e.campus ?? request.campus).trimmingCharacters(in: .whitespaces)
            let title = e.title.trimmingCharacters(in: .whitespaces)
            guard (1...80).contains(campus.count) else { throw RPCError.invalidArgument("entry \(i + 1): campus: 1-80 characters (here or in the request)") }
            guard (1...120).contains(title.count) else { throw RPCError.invalidArgument("entry \(i + 1): title: 1-120 characters") }
            guard (e.detail ?? "").count <= 1000 else { throw RPCError.invalidArgument("entry \(i + 1): detail: at most 1000 characters") }
            let phone = e.phone ?? ""
            guard phone.count <= 40, phone.allSatisfy({ $0.isNumber || " +-()".contains($0) }) else {
                throw RPCError.invalidArgument("entry \(i + 1): phone: digits, spaces, + - ( ), at most 40")
            }
            let url = e.url ?? ""
            guard url.isEmpty || (url.count <= 500 && (url.hasPrefix("https://") || url.hasPrefix("http://"))) else {
                throw RPCError.invalidArgument("entry \(i + 1): url: http(s), at most 500 characters")
            }
            byCampus[campus, default: []].append(AlertsV1.Resource(campus: campus, title: title, detail: e.detail ?? "", phone: phone, url: url))
        }
        guard !byCampus.isEmpty else { throw RPCError.invalidArgument("data: no resources") }
        let grouped = byCampus
        try await store.replaceResources(grouped)
        context.logger.info("resources imported", metadata: ["count": "\(entries.count)", "campuses": "\(byCampus.count)"])
        return AlertsV1.ImportResourcesResponse(imported: UInt32(entries.count), campuses: byCampus.keys.sorted())
    }

    public func listResources(_ request: AlertsV1.ListResourcesRequest, _ context: RequestContext) async throws -> AlertsV1.ListResourcesResponse {
        _ = try context.requireCaller()
        let campus = request.campus.trimmingCharacters(in: .whitespaces)
        let resources = try await store.resources(campus: campus)
        return AlertsV1.ListResourcesResponse(resources: resources)
    }

    // MARK: Social's notices

    /// Pulls social's notices after the stored cursor and queues their deliveries; the cursor
    /// moves in the same transaction, so each notice is queued once however often this runs.
    /// - Returns: how many notices were taken.
    @discardableResult
    public func pullNotices() async throws -> Int {
        let link = config.inviteLink
        return try await pull(after: "social.notices", limit: 500, fetch: { try await self.peers.notices(after: $0, limit: $1) }, id: \.noticeId,
                              messages: { notices in notices.compactMap { n in Self.outgoing(for: n, link: link)?.about(n.from?.userId ?? 0) } },
                              queued: { notices in
            for n in notices where n.kind == .circleRequest {
                self.emit(AlertsV1.AlertEvent(kind: .coreFriendRequest, requestId: n.from?.userId ?? 0, from: Self.person(n.from),
                                              text: "\(Self.name(Self.person(n.from))) asks you to be in their core circle", atMs: n.createdAtMs),
                          to: [n.toUserId])
            }
        })
    }

    /// Takes another service's records after the cursor `cursor` (alerts' `cursors` table), a
    /// page at a time: each page's deliveries and the cursor's move commit together, so a record
    /// is queued once however often this runs (queueing is idempotent anyway, should two pulls
    /// overlap, as two instances' do), and `queued` runs for a page only when its rows were new.
    /// - Returns: how many records were taken.
    func pull<Record: Sendable>(after cursor: String, limit: Int, fetch: (UInt64, Int) async throws -> [Record], id: (Record) -> UInt64,
                                messages: ([Record]) async throws -> [Outgoing], queued: ([Record]) -> Void = { _ in }) async throws -> Int {
        var taken = 0
        while true {
            let after = try await store.cursor(cursor)
            let records = try await fetch(after, limit)
            guard let last = records.last.map(id) else { return taken }
            let outgoing = try await messages(records), at = now()
            // Another instance's pull (or an earlier one) queued this page already: its live events went out then.
            if try await store.enqueue(outgoing, at: at, cursor: (cursor, last)) > 0 { queued(records) }
            deliveryBell.ring()
            taken += records.count
            if records.count < limit { return taken }
        }
    }

    private static func person(_ user: SocialV1.UserRef?) -> AlertsV1.Person? {
        user.map { AlertsV1.Person(userId: $0.userId, username: $0.username, firstName: $0.firstName, lastName: $0.lastName) }
    }

    private static func outgoing(for notice: SocialV1.Notice, link: String) -> Outgoing? {
        let who = name(person(notice.from))
        switch notice.kind {
        case .poke:
            return Outgoing(source: "poke:\(notice.noticeId)", recipient: .user(notice.toUserId), channels: [.push], body: "\(who) poked you")
        case .circleRequest:
            return Outgoing(source: "core_friend:\(notice.noticeId)", recipient: .user(notice.toUserId), channels: [.push],
                            body: "\(who) asks you to be in their core circle, the friends they trust in an emergency. Answer in your inbox.")
        case .circleInvite:
            guard !notice.toPhone.isEmpty else { return nil }
            return Outgoing(source: "invite:\(notice.noticeId)", recipient: .phone(notice.toPhone), channels: [.sms],
                            body: "\(who) added you to their Frienso core circle: the people they trust to help in an emergency. Join: \(link)")
        default:
            return nil
        }
    }
}
