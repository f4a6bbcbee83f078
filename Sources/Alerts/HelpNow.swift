import Foundation
public import FriensoProto
import Storage
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
        var phoneFix: AlertsV1.AlertLocation?
        if let fix = request.fix {
            do { phoneFix = try HelpNowPlan.location(from: fix, now: now()) } catch { throw RPCError.invalidArgument(error.reason) }
        }
        let (alert, alreadyActive, names) = try await raise(for: caller, message: request.message, phoneFix: phoneFix, key: context.idempotencyKey,
                                                            logger: context.logger)
        return try await raiseReply(alert, alreadyActive: alreadyActive, names: names)
    }

    /// Raises `caller`'s helpNow (from the button, or from a check-in timer that ran out). With a
    /// key, raising again with it returns the alert raised then (after a restart too); while one
    /// is active, that one is returned and nothing new is sent. With `phoneFix` (the phone's own,
    /// checked) the alert carries it, named from alerts' copy of geo's places (by geo until that
    /// has loaded); without, geo's latest fix.
    func raise(for caller: UInt64, message: String, phoneFix: AlertsV1.AlertLocation? = nil, key: String, logger requestLogger: Logger)
        async throws -> (alert: AlertRecord, alreadyActive: Bool, names: [UInt64: AlertsV1.Person]?) {
        // Who and where, from the other services, at the same time; none of them can stop the alert.
        // They start with the read of this person's alerts, not after it: a raise waited for that
        // read before asking (`docs/benchmarks.md`, issue 16, item 124). A raise the read answers
        // (a retry, or one while an alert is active) leaves, and the lookups are cancelled unread.
        // The circle from alerts' copy when it holds it as it is (`CircleCopy`): no wait for
        // social (item 167 of `docs/benchmarks.md`); otherwise social's answer, kept in the copy.
        let peers = peers, logger = logger, copy = circleCopy
        let copied = copy.circle(of: caller)
        async let circleLookup: [CircleContact] = {
            if let copied { return copied }
            let before = copy.clock(caller)
            do {
                return try await self.circle(of: caller) { answer in
                    if let before { copy.keep(answer, of: caller, readAfter: before) }
                }
            } catch {
                if !Task.isCancelled {
                    logger.error("helpNow: the core circle could not be read; the alert goes to nobody", metadata: ["error": "\(error)"])
                }
                return []
            }
        }()
        // The phone's own fix named from alerts' copy of geo's places when it has loaded: no
        // question to geo (item 167); otherwise geo names it, or gives its latest fix.
        let named: AlertsV1.AlertLocation? = phoneFix.flatMap { fix in
            placeBook.name(lat: fix.latitude, lon: fix.longitude).map { place in
                var location = fix
                location.placeName = place
                return location
            }
        }
        async let locationLookup: AlertsV1.AlertLocation = {
            if let named { return named }
            do { return try await peers.latestLocation(of: caller, phoneFix: phoneFix) } catch {
                // The phone's own fix still goes, without a place name.
                if !Task.isCancelled { logger.warning("helpNow: no location from geo", metadata: ["error": "\(error)", "phone fix": "\(phoneFix != nil)"]) }
                return phoneFix ?? AlertsV1.AlertLocation()
            }
        }()
        // One read for both: a retry of this raise (same key, even after a restart) gets the alert
        // as it was raised; otherwise an alert already active is the answer.
        if let (met, retry) = try await store.alertMeetingRaise(by: caller, key: key) { return (met, !retry, nil) }

        let (circle, location) = await (circleLookup, locationLookup)
        let plan = HelpNowPlan(initiator: caller, circle: circle, location: location, numbers: HelpNowPlan.Numbers(
            emergency: config.emergencyNumber, emergencyLabel: config.emergencyLabel,
            campusPolice: config.campusPoliceNumber, campusPoliceLabel: config.campusPoliceLabel))
        let users = plan.users
        let names = await people(Set(users + [caller]))
        let at = now()
        let text = Self.helpText(names[caller], message, location)

        let alert: AlertRecord, grants: [GrantRecord]
        do {
            (alert, grants) = try await store.raiseAlert(NewAlert(initiator: caller, message: message, location: location, at: at, key: key,
                                                        recipients: plan.recipients, grants: plan.grants, promptNumber: plan.promptNumber,
                                                        promptLabel: plan.promptLabel) { id in
                plan.deliveries(source: AlertRecord.source(id), text: text).map { $0.about(caller) }
            })
        } catch AlertsConflict.alreadyActive {
            // A concurrent raise won: it is the active alert.
            if let raised = try await store.activeAlert(of: caller) { return (raised, true, nil) }
            throw RPCError.internal("helpNow could not be recorded")
        }
        emit(grants)
        emit(AlertsV1.AlertEvent(kind: .helpNow, requestId: alert.id, from: names[caller], text: text, atMs: at, location: location), to: users)
        deliveryBell.ring()
        maintenanceDue(at: at + config.helpEscalation.wholeMilliseconds) // its escalation
        requestLogger.notice("helpNow raised", metadata: ["alert": "\(alert.id)", "recipients": "\(circle.count)", "located": "\(location.known)"])
        return (alert, false, names)
    }

    func raiseReply(_ alert: AlertRecord, alreadyActive: Bool, names: [UInt64: AlertsV1.Person]? = nil) async throws -> AlertsV1.RaiseHelpNowResponse {
        AlertsV1.RaiseHelpNowResponse(alert: try await view(alert, names), alreadyActive: alreadyActive, notified: UInt32(alert.recipients.count),
                                      nobodyNotified: alert.recipients.isEmpty)
    }

    static func helpText(_ who: AlertsV1.Person?, _ message: String, _ location: AlertsV1.AlertLocation) -> String {
        var text = "HELP NOW: \(name(who)) needs help"
        if !message.isEmpty { text += ": \"\(message)\"" }
        if location.known {
            let latitude = fiveDecimals(location.latitude), longitude = fiveDecimals(location.longitude)
            let coordinates = "\(latitude),\(longitude)"
            text += location.placeName.isEmpty ? ". Last location \(coordinates)" : ". Last location near \(location.placeName) (\(coordinates))"
            text += " https://www.openstreetmap.org/?mlat=\(latitude)&mlon=\(longitude)"
        } else {
            text += ". Location unknown"
        }
        return text
    }

    /// `value` as `"%.5f"` prints it (five decimals: about a metre), by C's own formatter:
    /// Foundation's `String(format:)` went through NSString for each of the four numbers, about
    /// 1.4% of alerts' CPU in `frienso-bench stack` (`docs/benchmarks.md`, issue 16, item 44).
    static func fiveDecimals(_ value: Double) -> String {
        withUnsafeTemporaryAllocation(of: CChar.self, capacity: 64) { buffer in
            let written = withVaList([value]) { vsnprintf(buffer.baseAddress, buffer.count, "%.5f", $0) }
            // A number too long for the buffer (none a coordinate can be) is cut, never overrun.
            let count = Int(max(0, min(written, Int32(buffer.count - 1))))
            return String(decoding: UnsafeRawBufferPointer(start: buffer.baseAddress, count: count), as: UTF8.self)
        }
    }

    public func resolveHelpNow(_ request: AlertsV1.ResolveHelpNowRequest, _ context: RequestContext) async throws -> AlertsV1.ResolveHelpNowResponse {
        let byOperator = !request.operatorKey.isEmpty
        // Who raised it: the caller, or (for an operator, who names the alert) as the alert says.
        // The alert itself is read once, in `changeAlert`'s transaction, where the checks are.
        let caller: UInt64, initiator: UInt64
        if byOperator {
            try checkOperator(request.operatorKey, context, "resolving an alert as operator")
            guard request.alertId != 0 else { throw RPCError.invalidArgument("alert_id: an operator names the alert") }
            guard let found = try await store.alert(id: request.alertId) else { throw RPCError.notFound("no alert \(request.alertId)") }
            (caller, initiator) = (0, found.initiator)
        } else {
            caller = try context.requireCaller()
            initiator = caller
        }
        let at = now(), by = byOperator ? "operator" : "initiator"
        let initiatorPerson = await people([initiator])[initiator]
        let text = "\(Self.name(initiatorPerson)) is safe: the helpNow alert was resolved" + (byOperator ? " by an operator" : "")
        let requested = request.alertId
        let changed = try await store.changeAlert(requested == 0 ? .activeOf(caller) : .id(requested), at: at) { record in
            guard let record else {
                if requested == 0 { throw RPCError.failedPrecondition("you have no active helpNow alert") }
                throw RPCError.notFound("no alert \(requested)")
            }
            guard byOperator || record.initiator == caller else {
                throw RPCError.permissionDenied("alert \(requested) is not yours: only who raised it (or an operator) may resolve it")
            }
            guard record.state == .active else { return nil } // resolved before: answered as it is, below
            let alertID = record.id
            return AlertChange(resolvedBy: by, grants: record.recipients.filter { $0.user != 0 }.map {
                GrantRecord(subject: record.initiator, viewer: $0.user, reason: "help_now", expiresMs: at)
            }, messages: record.recipients.map { r in
                r.user != 0 ? Outgoing(source: "help_now_resolved:\(alertID)", recipient: .user(r.user), channels: [.push, .sms], body: text,
                                       about: record.initiator)
                            : Outgoing(source: "help_now_resolved:\(alertID)", recipient: .phone(r.phone), channels: [.sms], body: text,
                                       about: record.initiator)
            })
        }
        guard let (resolved, change) = changed else {
            // Resolving again (only by id: the active one is never resolved): the alert as it is.
            guard let current = try await store.alert(id: requested) else { throw RPCError.notFound("no alert \(requested)") }
            return AlertsV1.ResolveHelpNowResponse(alert: try await view(current))
        }
        emit(change.grants)
        emit(AlertsV1.AlertEvent(kind: .helpNowResolved, requestId: resolved.id, from: initiatorPerson, text: text, atMs: at),
             to: resolved.recipients.map(\.user).filter { $0 != 0 })
        deliveryBell.ring()
        context.logger.notice("helpNow resolved", metadata: ["alert": "\(resolved.id)", "by": "\(by)"])
        return AlertsV1.ResolveHelpNowResponse(alert: try await view(resolved))
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
        let changed = try await store.changeAlert(.id(alertID), at: at) { alert in
            guard let alert else { throw RPCError.notFound("no alert \(alertID)") }
            guard alert.initiator == caller else { throw RPCError.permissionDenied("alert \(alertID) is not yours") }
            return AlertChange(reportedCall: request.dialed)
        }
        guard let alert = changed?.record else { throw StoreInvariant("reporting the call changed nothing") }
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
        let name = Self.name(names[caller])
        let result = try await store.changeAlert(.id(alertID), at: at) { alert in
            guard let alert else { throw RPCError.notFound("no helpNow request \(alertID)") }
            guard let mine = alert.recipients.first(where: { $0.user == caller }) else {
                throw RPCError.permissionDenied("helpNow \(alertID) is not addressed to you")
            }
            guard alert.state == .active else { throw RPCError.failedPrecondition("this alert is resolved") }
            if action == .dismiss { return AlertChange(recipient: AnswerChange(user: caller, answer: nil)) }
            let answer: AlertsV1.Answer = action == .accept ? .accepted : .declined
            guard mine.answer != answer else { return nil }
            let text = answer == .accepted ? "\(name) is on the way" : "\(name) cannot help right now"
            return AlertChange(recipient: AnswerChange(user: caller, answer: answer),
                               messages: [Outgoing(source: "help_answer:\(alertID):\(caller):\(answer.rawValue)", recipient: .user(alert.initiator),
                                                   channels: [.push], body: text, about: caller)])
        }
        guard let (alert, change) = result, let answer = change.recipient?.answer else { return }
        emit(AlertsV1.AlertEvent(kind: .helpNowAnswer, requestId: alertID, from: names[caller],
                                 text: answer == .accepted ? "\(name) is on the way" : "\(name) cannot help right now",
                                 atMs: at, answer: answer), to: [alert.initiator])
        deliveryBell.ring()
    }

    func view(_ alert: AlertRecord, _ known: [UInt64: AlertsV1.Person]? = nil) async throws -> AlertsV1.HelpAlert {
        var names: [UInt64: AlertsV1.Person]
        if let known { names = known } else { names = await people(Set(alert.recipients.map(\.user).filter { $0 != 0 } + [alert.initiator])) }
        let deliveries = alert.deliveries
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
