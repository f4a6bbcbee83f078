import Foundation
public import FriensoProto
import GRDB
import Logging
public import Wire

/// helpNow: the whole circle at once, push and SMS, a location grant until resolved, and an
/// emergency-call prompt record.
extension AlertsService {
    public func raiseHelpNow(_ request: AlertsV1.RaiseHelpNowRequest, _ context: RequestContext) async throws -> AlertsV1.RaiseHelpNowResponse {
        let caller = try context.requireCaller()
        guard request.message.count <= HelpNowPlan.maximumMessageLength else {
            throw RPCError.invalidArgument("message: at most \(HelpNowPlan.maximumMessageLength) characters")
        }
        let (alert, alreadyActive, names) = try await raise(for: caller, message: request.message, key: context.idempotencyKey, logger: context.logger)
        return try await raiseReply(alert, alreadyActive: alreadyActive, names: names)
    }

    /// Raises `caller`'s helpNow (from the button, or from a check-in timer that ran out). With a
    /// key, raising again with it returns the alert raised then (after a restart too); while one
    /// is active, that one is returned and nothing new is sent.
    func raise(for caller: UInt64, message: String, key: String, logger requestLogger: Logger)
        async throws -> (alert: AlertRecord, alreadyActive: Bool, names: [UInt64: AlertsV1.Person]?) {
        // One read for both: a retry of this raise (same key, even after a restart) gets the alert
        // as it was raised; otherwise an alert already active is the answer.
        let (earlier, active) = try await store.database.read { db -> (AlertRecord?, AlertRecord?) in
            if !key.isEmpty, let earlier = try UInt64.fetchOne(db, cached: "SELECT id FROM help_alerts WHERE initiator = ? AND idempotency_key = ?",
                                                               arguments: [caller, key]).flatMap({ try AlertsStore.alert(db, id: $0) }) {
                return (earlier, nil)
            }
            return (nil, try Self.activeAlert(db, of: caller))
        }
        if let earlier { return (earlier, false, nil) }
        if let active { return (active, true, nil) }

        // Who and where, from the other services, at the same time; none of them can stop the alert.
        let peers = peers, logger = logger
        async let circleLookup: [CircleContact] = {
            do { return try await peers.circle(of: caller) } catch {
                logger.error("helpNow: the core circle could not be read; the alert goes to nobody", metadata: ["error": "\(error)"])
                return []
            }
        }()
        async let locationLookup: AlertsV1.AlertLocation = {
            do { return try await peers.latestLocation(of: caller) } catch {
                logger.warning("helpNow: no location from geo", metadata: ["error": "\(error)"])
                return AlertsV1.AlertLocation()
            }
        }()
        let (circle, location) = await (circleLookup, locationLookup)
        let plan = HelpNowPlan(initiator: caller, circle: circle, location: location, numbers: HelpNowPlan.Numbers(
            emergency: config.emergencyNumber, emergencyLabel: config.emergencyLabel,
            campusPolice: config.campusPoliceNumber, campusPoliceLabel: config.campusPoliceLabel))
        let users = plan.users
        let names = await people(Set(users + [caller]))
        let at = now()
        let text = Self.helpText(names[caller], message, location)

        let raised: AlertRecord?
        do {
            raised = try await store.database.write { db -> AlertRecord? in
                try db.run(sql: """
                    INSERT INTO help_alerts (initiator, message, location, state, raised_at_ms, idempotency_key) VALUES (?, ?, ?, 1, ?, ?)
                    """, arguments: [caller, message, Data(location.serializedBytes()), at, key])
                let id = UInt64(db.lastInsertedRowID)
                for (position, contact) in plan.recipients.enumerated() {
                    let (user, phone): (UInt64, String) = switch contact {
                    case .user(let u): (u, "")
                    case .phone(let p): (0, p)
                    }
                    try db.run(sql: "INSERT INTO recipients (alert_id, position, user_id, phone, answer) VALUES (?, ?, ?, ?, ?)",
                                   arguments: [id, position, user, phone, AlertsV1.Answer.pending.rawValue])
                }
                for grant in plan.grants { try AlertsStore.setGrant(db, grant) }
                try db.run(sql: "INSERT INTO emergency_prompts (alert_id, user_id, number, label, created_at_ms) VALUES (?, ?, ?, ?, ?)",
                               arguments: [id, caller, plan.promptNumber, plan.promptLabel, at])
                try AlertsStore.enqueue(db, plan.deliveries(source: "help_now:\(id)", text: text).map { $0.about(caller) }, now: at)
                return try AlertsStore.alert(db, id: id)
            }
        } catch let error as DatabaseError where error.resultCode == .SQLITE_CONSTRAINT {
            // A concurrent raise won: it is the active alert.
            raised = try await activeAlert(of: caller)
            if let raised { return (raised, true, nil) }
            throw RPCError.internal("helpNow could not be recorded")
        }
        guard let alert = raised else { throw RPCError.internal("helpNow vanished") }
        emit(plan.grants)
        emit(AlertsV1.AlertEvent(kind: .helpNow, requestId: alert.id, from: names[caller], text: text, atMs: at, location: location), to: users)
        deliveryBell.ring()
        maintenanceBell.ring() // its escalation time is now the next thing to wait for
        requestLogger.notice("helpNow raised", metadata: ["alert": "\(alert.id)", "recipients": "\(circle.count)", "located": "\(location.known)"])
        return (alert, false, names)
    }

    func raiseReply(_ alert: AlertRecord, alreadyActive: Bool, names: [UInt64: AlertsV1.Person]? = nil) async throws -> AlertsV1.RaiseHelpNowResponse {
        AlertsV1.RaiseHelpNowResponse(alert: try await view(alert, names), alreadyActive: alreadyActive, notified: UInt32(alert.recipients.count),
                                      nobodyNotified: alert.recipients.isEmpty)
    }

    private func activeAlert(of user: UInt64) async throws -> AlertRecord? {
        try await store.database.read { db in try Self.activeAlert(db, of: user) }
    }

    static func activeAlert(_ db: Database, of user: UInt64) throws -> AlertRecord? {
        try UInt64.fetchOne(db, cached: "SELECT id FROM help_alerts WHERE initiator = ? AND state = 1", arguments: [user])
            .flatMap { try AlertsStore.alert(db, id: $0) }
    }

    static func helpText(_ who: AlertsV1.Person?, _ message: String, _ location: AlertsV1.AlertLocation) -> String {
        var text = "HELP NOW: \(name(who)) needs help"
        if !message.isEmpty { text += ": \"\(message)\"" }
        if location.known {
            let coordinates = String(format: "%.5f,%.5f", location.latitude, location.longitude)
            text += location.placeName.isEmpty ? ". Last location \(coordinates)" : ". Last location near \(location.placeName) (\(coordinates))"
            text += " https://www.openstreetmap.org/?mlat=\(String(format: "%.5f", location.latitude))&mlon=\(String(format: "%.5f", location.longitude))"
        } else {
            text += ". Location unknown"
        }
        return text
    }

    public func resolveHelpNow(_ request: AlertsV1.ResolveHelpNowRequest, _ context: RequestContext) async throws -> AlertsV1.ResolveHelpNowResponse {
        let byOperator = !request.operatorKey.isEmpty
        var caller: UInt64 = 0
        if byOperator {
            try checkOperator(request.operatorKey, context, "resolving an alert as operator")
            guard request.alertId != 0 else { throw RPCError.invalidArgument("alert_id: an operator names the alert") }
        } else {
            caller = try context.requireCaller()
        }
        var target: AlertRecord
        if request.alertId == 0 {
            guard let active = try await activeAlert(of: caller) else { throw RPCError.failedPrecondition("you have no active helpNow alert") }
            target = active
        } else {
            guard let found = try await store.alert(id: request.alertId) else { throw RPCError.notFound("no alert \(request.alertId)") }
            guard byOperator || found.initiator == caller else {
                throw RPCError.permissionDenied("alert \(request.alertId) is not yours: only who raised it (or an operator) may resolve it")
            }
            target = found
        }
        guard target.state == .active else { return AlertsV1.ResolveHelpNowResponse(alert: try await view(target)) } // resolving again: as it is
        let at = now(), by = byOperator ? "operator" : "initiator"
        let names = await people(Set(target.recipients.map(\.user).filter { $0 != 0 } + [target.initiator]))
        let text = "\(Self.name(names[target.initiator])) is safe: the helpNow alert was resolved" + (byOperator ? " by an operator" : "")
        let alertID = target.id
        let (resolved, grants) = try await store.database.write { db -> (AlertRecord, [GrantRecord]) in
            try db.run(sql: "UPDATE help_alerts SET state = 2, resolved_at_ms = ?, resolved_by = ? WHERE id = ? AND state = 1",
                           arguments: [at, by, alertID])
            guard let record = try AlertsStore.alert(db, id: alertID) else { throw RPCError.internal("alert vanished") }
            guard db.changesCount == 1 else { return (record, []) } // resolved meanwhile
            let grants = record.recipients.filter { $0.user != 0 }.map {
                GrantRecord(subject: record.initiator, viewer: $0.user, reason: "help_now", expiresMs: at)
            }
            for g in grants { try AlertsStore.setGrant(db, g) }
            try AlertsStore.enqueue(db, record.recipients.map { r in
                r.user != 0 ? Outgoing(source: "help_now_resolved:\(alertID)", recipient: .user(r.user), channels: [.push, .sms], body: text,
                                       about: record.initiator)
                            : Outgoing(source: "help_now_resolved:\(alertID)", recipient: .phone(r.phone), channels: [.sms], body: text,
                                       about: record.initiator)
            }, now: at)
            return (record, grants)
        }
        if !grants.isEmpty {
            emit(grants)
            emit(AlertsV1.AlertEvent(kind: .helpNowResolved, requestId: alertID, from: names[target.initiator], text: text, atMs: at),
                 to: resolved.recipients.map(\.user).filter { $0 != 0 })
            deliveryBell.ring()
            context.logger.notice("helpNow resolved", metadata: ["alert": "\(alertID)", "by": "\(by)"])
        }
        return AlertsV1.ResolveHelpNowResponse(alert: try await view(resolved, names))
    }

    public func reportEmergencyCall(_ request: AlertsV1.ReportEmergencyCallRequest, _ context: RequestContext) async throws -> AlertsV1.ReportEmergencyCallResponse {
        let caller = try context.requireCaller()
        var chosen = request.alertId
        if chosen == 0 {
            guard let latest = try await store.latestAlert(of: caller) else { throw RPCError.failedPrecondition("you have raised no helpNow alert") }
            chosen = latest.id
        }
        let alertID = chosen
        let at = now()
        let alert = try await store.database.write { db -> AlertRecord in
            guard let alert = try AlertsStore.alert(db, id: alertID) else { throw RPCError.notFound("no alert \(alertID)") }
            guard alert.initiator == caller else { throw RPCError.permissionDenied("alert \(alertID) is not yours") }
            try db.run(sql: "UPDATE emergency_prompts SET reported = 1, dialed = ?, reported_at_ms = ? WHERE alert_id = ?",
                           arguments: [request.dialed, at, alertID])
            guard let updated = try AlertsStore.alert(db, id: alertID) else { throw RPCError.internal("alert vanished") }
            return updated
        }
        context.logger.notice("emergency call reported", metadata: ["alert": "\(alertID)", "dialed": "\(request.dialed)"])
        return AlertsV1.ReportEmergencyCallResponse(emergency: alert.prompt)
    }

    public func getHelpNow(_ request: AlertsV1.GetHelpNowRequest, _ context: RequestContext) async throws -> AlertsV1.GetHelpNowResponse {
        let caller = try context.requireCaller()
        var response = AlertsV1.GetHelpNowResponse()
        if let mine = try await store.latestAlert(of: caller) { response.mine = try await view(mine) }
        for other in try await store.alerts(reaching: caller) {
            // A recipient sees the alert and their own answer; the emergency prompt is the initiator's.
            var v = try await view(other)
            v.recipients = v.recipients.filter { $0.person?.userId == caller }
            v.emergency = nil
            response.others.append(v)
        }
        return response
    }

    /// A recipient's answer, from the inbox: accept ("on my way"), reject ("can't help"), dismiss.
    func answerHelpNow(_ alertID: UInt64, caller: UInt64, action: AlertsV1.InboxAction) async throws {
        let at = now()
        let names = await people([caller])
        let result = try await store.database.write { db -> (AlertRecord, AlertsV1.Answer)? in
            guard let alert = try AlertsStore.alert(db, id: alertID) else { throw RPCError.notFound("no helpNow request \(alertID)") }
            guard let mine = alert.recipients.first(where: { $0.user == caller }) else {
                throw RPCError.permissionDenied("helpNow \(alertID) is not addressed to you")
            }
            guard alert.state == .active else { throw RPCError.failedPrecondition("this alert is resolved") }
            if action == .dismiss {
                try db.run(sql: "UPDATE recipients SET dismissed = 1 WHERE alert_id = ? AND user_id = ?", arguments: [alertID, caller])
                return nil
            }
            let answer: AlertsV1.Answer = action == .accept ? .accepted : .declined
            guard mine.answer != answer else { return nil }
            try db.run(sql: "UPDATE recipients SET answer = ?, answered_at_ms = ?, dismissed = 0 WHERE alert_id = ? AND user_id = ?",
                           arguments: [answer.rawValue, at, alertID, caller])
            let text = answer == .accepted ? "\(Self.name(names[caller])) is on the way" : "\(Self.name(names[caller])) cannot help right now"
            try AlertsStore.enqueue(db, [Outgoing(source: "help_answer:\(alertID):\(caller):\(answer.rawValue)", recipient: .user(alert.initiator),
                                                  channels: [.push], body: text, about: caller)], now: at)
            return (alert, answer)
        }
        guard let (alert, answer) = result else { return }
        emit(AlertsV1.AlertEvent(kind: .helpNowAnswer, requestId: alertID, from: names[caller],
                                 text: answer == .accepted ? "\(Self.name(names[caller])) is on the way" : "\(Self.name(names[caller])) cannot help right now",
                                 atMs: at, answer: answer), to: [alert.initiator])
        deliveryBell.ring()
    }

    func view(_ alert: AlertRecord, _ known: [UInt64: AlertsV1.Person]? = nil) async throws -> AlertsV1.HelpAlert {
        var names: [UInt64: AlertsV1.Person]
        if let known { names = known } else { names = await people(Set(alert.recipients.map(\.user).filter { $0 != 0 } + [alert.initiator])) }
        let deliveries = try await store.summaries(source: "help_now:\(alert.id)")
        return AlertsV1.HelpAlert(
            alertId: alert.id, initiator: names[alert.initiator] ?? AlertsV1.Person(userId: alert.initiator), message: alert.message,
            location: alert.location, state: alert.state, raisedAtMs: alert.raisedAtMs, resolvedAtMs: alert.resolvedAtMs, resolvedBy: alert.resolvedBy,
            recipients: alert.recipients.map { r in
                AlertsV1.Recipient(person: r.user == 0 ? nil : names[r.user] ?? AlertsV1.Person(userId: r.user), phone: r.phone, answer: r.answer,
                                   answeredAtMs: r.answeredAtMs, deliveries: deliveries[r.user != 0 ? "user:\(r.user)" : "phone:\(r.phone)"] ?? [])
            },
            emergency: alert.prompt, escalation: alert.escalation)
    }
}

/// Storage of helpNow alerts (inside the transactions the handlers open).
extension AlertsStore {

    static func alert(_ db: Database, id: UInt64) throws -> AlertRecord? {
        guard let row = try Row.fetchOne(db, cached: """
            SELECT id, initiator, message, location, state, raised_at_ms, resolved_at_ms, resolved_by FROM help_alerts WHERE id = ?
            """, arguments: [id]) else { return nil }
        let recipients = try Row.fetchAll(db, cached: "SELECT user_id, phone, answer, answered_at_ms FROM recipients WHERE alert_id = ? ORDER BY position",
                                          arguments: [id]).map {
            RecipientRecord(user: $0[0], phone: $0[1], answer: AlertsV1.Answer(rawValue: $0[2]), answeredAtMs: $0[3])
        }
        let location = (try? AlertsV1.AlertLocation(serializedBytes: Array(row[3] as Data))) ?? AlertsV1.AlertLocation()
        var prompt = AlertsV1.EmergencyPrompt()
        if let p = try Row.fetchOne(db, cached: """
            SELECT id, number, label, created_at_ms, reported, dialed, reported_at_ms FROM emergency_prompts WHERE alert_id = ?
            """, arguments: [id]) {
            prompt = AlertsV1.EmergencyPrompt(promptId: p[0], number: p[1], label: p[2], location: location, createdAtMs: p[3],
                                              reported: p[4], dialed: p[5], reportedAtMs: p[6])
        }
        return AlertRecord(id: row[0], initiator: row[1], message: row[2], location: location, state: AlertsV1.AlertState(rawValue: row[4]),
                           raisedAtMs: row[5], resolvedAtMs: row[6], resolvedBy: row[7], recipients: recipients, prompt: prompt,
                           escalation: try escalation(db, alert: id))
    }

    func alert(id: UInt64) async throws -> AlertRecord? {
        try await database.read { db in try Self.alert(db, id: id) }
    }

    func latestAlert(of user: UInt64) async throws -> AlertRecord? {
        try await database.read { db in
            try UInt64.fetchOne(db, cached: "SELECT id FROM help_alerts WHERE initiator = ? ORDER BY id DESC LIMIT 1", arguments: [user])
                .flatMap { try Self.alert(db, id: $0) }
        }
    }

    /// Active alerts that reached `user`.
    func alerts(reaching user: UInt64) async throws -> [AlertRecord] {
        try await database.read { db in
            try UInt64.fetchAll(db, cached: """
                SELECT DISTINCT a.id FROM recipients r JOIN help_alerts a ON a.id = r.alert_id
                WHERE r.user_id = ? AND a.state = 1 ORDER BY a.id DESC
                """, arguments: [user]).compactMap { try Self.alert(db, id: $0) }
        }
    }
}
