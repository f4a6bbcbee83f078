import Foundation
public import FriensoProto
import Identity
import Logging
import Storage
public import Wire

/// Check-in timers ("expect me home by 23:10"): a warning to the circle (and the owner) before
/// the time, then, if the owner has not ended it with their password or PIN, an automatic helpNow
/// with their last location. Kept in the database and driven by the maintenance loop, so a timer
/// fires after a restart as it would have without one (the helpNow is raised under the key
/// "timer:<id>": raising it twice finds the first).
extension AlertsService {
    static let maximumTimerNote = 280
    static let timerAttempts = 5

    public func startTimer(_ request: AlertsV1.StartTimerRequest, _ context: RequestContext) async throws -> AlertsV1.StartTimerResponse {
        let caller = try context.requireCaller()
        let at = now()
        guard (request.dueAtMs != 0) != (request.minutes != 0) else { throw RPCError.invalidArgument("give due_at_ms or minutes (one of them)") }
        let due = request.dueAtMs != 0 ? request.dueAtMs : at + Int64(request.minutes) * 60_000
        // Compared without subtracting: any Int64 may come in (the fuzz test sends Int64.min).
        guard due >= at + config.minTimer.wholeMilliseconds, due <= at + config.maxTimer.wholeMilliseconds else {
            throw RPCError.invalidArgument("the timer must end between \(Self.span(config.minTimer.wholeMilliseconds)) and \(Self.span(config.maxTimer.wholeMilliseconds)) from now")
        }
        guard request.note.count <= Self.maximumTimerNote else { throw RPCError.invalidArgument("note: at most \(Self.maximumTimerNote) characters") }
        if !request.pin.isEmpty {
            guard (4...8).contains(request.pin.count), request.pin.allSatisfy(\.isASCII), request.pin.allSatisfy(\.isNumber) else {
                throw RPCError.invalidArgument("pin: 4-8 digits")
            }
        }
        let pinHash = request.pin.isEmpty ? nil : Self.hashPIN(request.pin, salt: (0..<16).map { _ in UInt8.random(in: 0...255) })
        let key = context.idempotencyKey
        if !key.isEmpty, let earlier = try await store.timer(owner: caller, key: key) {
            return AlertsV1.StartTimerResponse(timer: earlier.proto)
        }
        // Someone must be there to warn and to alert.
        guard try await !circle(of: caller).isEmpty else {
            throw RPCError.failedPrecondition("your core circle is empty: nobody would be warned or alerted (add someone with `frienso circle add`)")
        }
        let warn = max(at, due - config.timerWarning.wholeMilliseconds)
        let timer: TimerRecord
        do {
            timer = try await store.startTimer(NewTimer(owner: caller, note: request.note, at: at, dueMs: due, warnMs: warn, pinHash: pinHash, key: key))
        } catch AlertsConflict.alreadyActive {
            throw RPCError.failedPrecondition("a check-in timer is already running: end it first (`frienso timer end`)")
        }
        maintenanceBell.ring()
        context.logger.info("check-in timer started", metadata: ["timer": "\(timer.id)", "due": "\(due)"])
        return AlertsV1.StartTimerResponse(timer: timer.proto)
    }

    public func endTimer(_ request: AlertsV1.EndTimerRequest, _ context: RequestContext) async throws -> AlertsV1.EndTimerResponse {
        let caller = try context.requireCaller()
        guard request.password.isEmpty != request.pin.isEmpty else { throw RPCError.invalidArgument("give your password or the timer's PIN (one of them)") }
        guard let timer = try await store.activeTimer(of: caller) else { throw RPCError.failedPrecondition("no check-in timer is running") }
        guard timer.failures < Self.timerAttempts else {
            throw RPCError.permissionDenied("too many wrong tries: this timer can no longer be ended early")
        }
        let valid: Bool
        if !request.pin.isEmpty {
            guard let stored = timer.pinHash, stored.count == 48 else { throw RPCError.failedPrecondition("this timer has no PIN: use your password") }
            valid = Self.hashPIN(request.pin, salt: Array(stored.prefix(16))) == stored
        } else {
            valid = try await peers.verifyPassword(user: caller, password: request.password)
        }
        let at = now()
        guard valid else {
            _ = try await store.changeTimer(id: timer.id, at: at) { _ in TimerChange(failedTry: true) }
            context.logger.notice("check-in timer: a wrong password or PIN", metadata: ["timer": "\(timer.id)", "failures": "\(timer.failures + 1)"])
            throw RPCError.permissionDenied("wrong \(request.pin.isEmpty ? "password" : "PIN") (\(Self.timerAttempts - timer.failures - 1) tries left)")
        }
        let names = timer.warnedMs != 0 ? await people([caller]) : [:]
        let circle = timer.warnedMs != 0 ? (try? await self.circle(of: caller).compactMap(\.user)) ?? [] : []
        let name = Self.name(names[caller])
        let ended = try await store.changeTimer(id: timer.id, at: at) { current in
            guard let current, current.state == .active else { return nil }
            // Those who were warned are told it is over.
            return TimerChange(end: .ended, messages: circle.map {
                Outgoing(source: "timer_end:\(timer.id)", recipient: .user($0), channels: [.push],
                         body: "\(name) ended their check-in timer: they are safe", about: caller)
            })
        }?.record
        guard let ended else { throw RPCError.failedPrecondition("the timer ran out meanwhile: your circle was alerted (resolve it with `frienso help-now resolve`)") }
        if !circle.isEmpty { deliveryBell.ring() }
        return AlertsV1.EndTimerResponse(timer: ended.proto)
    }

    public func getTimer(_ request: AlertsV1.GetTimerRequest, _ context: RequestContext) async throws -> AlertsV1.GetTimerResponse {
        let caller = try context.requireCaller()
        return AlertsV1.GetTimerResponse(timer: try await store.latestTimer(of: caller)?.proto)
    }

    static func hashPIN(_ pin: String, salt: [UInt8]) -> Data {
        Data(salt + SHA256.digest(salt + Array(pin.utf8)))
    }

    /// Warns for the timers whose warning is due, and raises helpNow for those that ran out.
    /// - Returns: warnings sent and alerts raised.
    @discardableResult
    public func runDueTimers() async throws -> (warned: Int, fired: Int) {
        let at = now()
        let (toWarn, toFire) = try await store.dueTimers(at: at)
        for timer in toWarn { try await warn(timer, at: at) }
        for timer in toFire { try await fire(timer) }
        return (toWarn.count, toFire.count)
    }

    private func warn(_ timer: TimerRecord, at: Int64) async throws {
        let circle = (try? await self.circle(of: timer.owner).compactMap(\.user)) ?? []
        let names = await people(Set(circle + [timer.owner]))
        let who = Self.name(names[timer.owner])
        let when = Self.clock(timer.dueMs)
        let note = timer.note.isEmpty ? "" : ": \"\(timer.note)\""
        let toCircle = "\(who)'s check-in timer runs out at \(when) and they have not ended it yet\(note). If it runs out, you get a helpNow."
        let toOwner = "Your check-in timer runs out at \(when): end it (`frienso timer end`) or your circle is alerted."
        let warned = try await store.changeTimer(id: timer.id, at: at) { current in
            guard let current, current.state == .active, current.warnedMs == 0 else { return nil }
            return TimerChange(warned: true, messages: circle.map {
                Outgoing(source: "timer_warning:\(timer.id)", recipient: .user($0), channels: [.push], body: toCircle, about: timer.owner)
            } + [Outgoing(source: "timer_warning:\(timer.id)", recipient: .user(timer.owner), channels: [.push], body: toOwner, about: timer.owner)])
        } != nil
        guard warned else { return }
        emit(AlertsV1.AlertEvent(kind: .timerWarning, requestId: timer.id, from: names[timer.owner], text: toCircle, atMs: at, endsAtMs: timer.dueMs), to: circle)
        emit(AlertsV1.AlertEvent(kind: .timerWarning, requestId: timer.id, from: names[timer.owner], text: toOwner, atMs: at, endsAtMs: timer.dueMs),
             to: [timer.owner])
        deliveryBell.ring()
        logger.info("check-in timer warning sent", metadata: ["timer": "\(timer.id)", "circle": "\(circle.count)"])
    }

    private func fire(_ timer: TimerRecord) async throws {
        let message = "Automatic alert: my check-in timer ran out at \(Self.clock(timer.dueMs))" + (timer.note.isEmpty ? "" : " (\(timer.note))")
        let (alert, alreadyActive, _) = try await raise(for: timer.owner, message: String(message.prefix(HelpNowPlan.maximumMessageLength)),
                                                        key: "timer:\(timer.id)", logger: logger)
        _ = try await store.changeTimer(id: timer.id, at: now()) { current in
            guard let current, current.state == .active else { return nil }
            return TimerChange(end: .fired, alertID: alert.id)
        }
        logger.notice("check-in timer ran out: helpNow raised", metadata: ["timer": "\(timer.id)", "alert": "\(alert.id)", "already active": "\(alreadyActive)"])
    }

    /// When the next timer needs attention (its warning or its end).
    func nextTimerAt() async throws -> Int64? {
        try await store.nextTimerAt()
    }
}
