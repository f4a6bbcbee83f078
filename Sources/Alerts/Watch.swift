import Foundation
public import FriensoProto
import Storage
public import Wire

/// watchMe: a session with a duration; the core circle is asked to watch; accepted watchers may
/// see the initiator's location until it ends.
extension AlertsService {
    public func startWatch(_ request: AlertsV1.StartWatchRequest, _ context: RequestContext) async throws -> AlertsV1.StartWatchResponse {
        let caller = try context.requireCaller()
        let duration = try watchRules.start(durationSeconds: request.durationSeconds, note: request.note).get()
        let key = context.idempotencyKey
        if !key.isEmpty, let earlier = try await store.watch(initiator: caller, key: key) {
            return AlertsV1.StartWatchResponse(session: await view(earlier))
        }
        if let active = try await store.activeWatch(of: caller) {
            throw RPCError.failedPrecondition("watch \(active.id) is already active: extend or end it")
        }
        let watchers = try WatchRules.watchers(in: try await circle(of: caller)).get()
        let names = await people(Set(watchers + [caller]))
        let at = now(), ends = at + duration
        let text = "\(Self.name(names[caller])) asks you to watch them for \(Self.span(duration))" + (request.note.isEmpty ? "" : ": \(request.note)")
        let session: WatchRecord
        do {
            session = try await store.startWatch(NewWatch(initiator: caller, note: request.note, at: at, endsAtMs: ends, key: key, watchers: watchers) { id in
                watchers.map { Outgoing(source: "watch:\(id)", recipient: .user($0), channels: [.push], body: text, about: caller) }
            })
        } catch AlertsConflict.alreadyActive {
            throw RPCError.failedPrecondition("a watch is already active: extend or end it")
        }
        emit(AlertsV1.AlertEvent(kind: .watchRequest, requestId: session.id, from: names[caller], text: text, atMs: at, endsAtMs: ends),
             to: watchers)
        deliveryBell.ring()
        maintenanceBell.ring()
        context.logger.info("watch started", metadata: ["session": "\(session.id)", "watchers": "\(watchers.count)"])
        return AlertsV1.StartWatchResponse(session: await view(session, names))
    }

    public func extendWatch(_ request: AlertsV1.ExtendWatchRequest, _ context: RequestContext) async throws -> AlertsV1.ExtendWatchResponse {
        let caller = try context.requireCaller()
        let rules = watchRules
        let extra = try rules.extensionMs(seconds: request.extraSeconds).get()
        let at = now()
        let changed = try await store.changeWatch(.activeOf(caller), at: at) { active in
            guard let active, active.endsAtMs > at else { throw RPCError.failedPrecondition("no active watch to extend") }
            let ends = try rules.extended(endsAtMs: active.endsAtMs, byMs: extra, now: at).get()
            return WatchChange(endsAtMs: ends, grants: WatchRules.grants(of: caller, watchers: active.watchers, until: ends))
        }
        guard let (session, change) = changed else { throw StoreInvariant("an extension changed nothing") }
        let grants = change.grants
        emit(grants)
        let names = await people(Set(session.watchers.map(\.user) + [caller]))
        emit(AlertsV1.AlertEvent(kind: .watchExtended, requestId: session.id, from: names[caller],
                                 text: "\(Self.name(names[caller]))'s watch now runs until \(Self.clock(session.endsAtMs))",
                                 atMs: at, endsAtMs: session.endsAtMs), to: session.watchers.map(\.user))
        return AlertsV1.ExtendWatchResponse(session: await view(session, names))
    }

    public func endWatch(_ request: AlertsV1.EndWatchRequest, _ context: RequestContext) async throws -> AlertsV1.EndWatchResponse {
        let caller = try context.requireCaller()
        let at = now()
        let names = await people([caller])
        let name = Self.name(names[caller])
        let changed = try await store.changeWatch(.activeOf(caller), at: at) { active in
            guard let active else { throw RPCError.failedPrecondition("no active watch to end") }
            return Self.finish(active, as: .ended, at: at, initiatorName: name)
        }
        guard let ended = changed else { throw StoreInvariant("ending a watch changed nothing") }
        announceEnd(ended.record, grants: ended.change.grants, names: names)
        return AlertsV1.EndWatchResponse(session: await view(ended.record))
    }

    /// Ends every session whose time ran out (the maintenance loop calls it).
    /// - Returns: how many ended.
    @discardableResult
    public func expireDueWatches() async throws -> Int {
        let at = now()
        let due = try await store.dueWatches(at: at)
        guard !due.isEmpty else { return 0 }
        let names = await people(Set(due.map(\.initiator)))
        var ended = 0
        for session in due {
            let name = Self.name(names[session.initiator])
            // Another pass (another instance) may have ended it, or its owner extended it, meanwhile.
            guard let (record, change) = try await store.changeWatch(.id(session.id), at: at, { current in
                guard let current, current.state == .active, current.endsAtMs <= at else { return nil }
                return Self.finish(current, as: .expired, at: at, initiatorName: name)
            }) else { continue }
            announceEnd(record, grants: change.grants, names: names)
            logger.info("watch expired", metadata: ["session": "\(record.id)"])
            ended += 1
        }
        return ended
    }

    /// When the next active session ends.
    func nextWatchExpiry() async throws -> Int64? {
        try await store.nextWatchExpiry()
    }

    /// Ending `session`: its state, revoked grants, a push to accepted watchers.
    private static func finish(_ session: WatchRecord, as state: AlertsV1.WatchState, at: Int64, initiatorName: String) -> WatchChange {
        let accepted = session.watchers.filter { $0.answer == .accepted }.map(\.user)
        let text = state == .expired ? "\(initiatorName)'s watch ran out of time" : "\(initiatorName) ended their watch: they are safe"
        return WatchChange(end: state, grants: accepted.map { GrantRecord(subject: session.initiator, viewer: $0, reason: "watch", expiresMs: at) },
                           messages: accepted.map {
                               Outgoing(source: "watch_end:\(session.id)", recipient: .user($0), channels: [.push], body: text, about: session.initiator)
                           })
    }

    private func announceEnd(_ session: WatchRecord, grants: [GrantRecord], names: [UInt64: AlertsV1.Person]) {
        emit(grants)
        let how = session.state == .expired ? "ran out of time" : "was ended"
        emit(AlertsV1.AlertEvent(kind: .watchEnded, requestId: session.id, from: names[session.initiator],
                                 text: "\(Self.name(names[session.initiator]))'s watch \(how)", atMs: session.endedAtMs),
             to: session.watchers.map(\.user))
        deliveryBell.ring()
    }

    public func getWatch(_ request: AlertsV1.GetWatchRequest, _ context: RequestContext) async throws -> AlertsV1.GetWatchResponse {
        let caller = try context.requireCaller()
        let mine = try await store.latestWatch(of: caller)
        let watching = try await store.watching(caller)
        let ids = Set((mine.map { [$0] } ?? []).flatMap { $0.watchers.map(\.user) + [$0.initiator] } + watching.map(\.initiator) + [caller])
        let names = await people(ids)
        var response = AlertsV1.GetWatchResponse()
        if let mine { response.mine = await view(mine, names) }
        for session in watching {
            // A watcher sees the session, and their own answer, not the others'.
            var v = await view(session, names)
            v.watchers = v.watchers.filter { $0.person?.userId == caller }
            response.watching.append(v)
        }
        return response
    }

    /// A watcher's answer, from the inbox.
    func answerWatch(_ sessionID: UInt64, caller: UInt64, action: AlertsV1.InboxAction) async throws {
        let at = now()
        let names = await people([caller])
        let name = Self.name(names[caller])
        let result = try await store.changeWatch(.id(sessionID), at: at) { session in
            guard let session else { throw RPCError.notFound("no watch request \(sessionID)") }
            guard let mine = session.watchers.first(where: { $0.user == caller }) else {
                throw RPCError.permissionDenied("watch request \(sessionID) is not addressed to you")
            }
            guard session.state == .active, session.endsAtMs > at else { throw RPCError.failedPrecondition("this watch has ended") }
            if action == .dismiss { return WatchChange(watcher: AnswerChange(user: caller, answer: nil)) }
            let answer: AlertsV1.Answer = action == .accept ? .accepted : .declined
            guard mine.answer != answer else { return nil } // the same answer again changes nothing
            var grants: [GrantRecord] = []
            if answer == .accepted {
                grants.append(GrantRecord(subject: session.initiator, viewer: caller, reason: "watch", expiresMs: session.endsAtMs))
            } else if mine.answer == .accepted {
                grants.append(GrantRecord(subject: session.initiator, viewer: caller, reason: "watch", expiresMs: at))
            }
            let text = answer == .accepted ? "\(name) is watching you" : "\(name) cannot watch you"
            return WatchChange(watcher: AnswerChange(user: caller, answer: answer), grants: grants,
                               messages: [Outgoing(source: "watch_answer:\(sessionID):\(caller):\(answer.rawValue)", recipient: .user(session.initiator),
                                                   channels: [.push], body: text, about: caller)])
        }
        guard let (session, change) = result, let answer = change.watcher?.answer else { return }
        emit(change.grants)
        emit(AlertsV1.AlertEvent(kind: .watchAnswer, requestId: sessionID, from: names[caller],
                                 text: answer == .accepted ? "\(name) is watching you" : "\(name) declined to watch you",
                                 atMs: at, answer: answer), to: [session.initiator])
        deliveryBell.ring()
    }

    func view(_ session: WatchRecord, _ known: [UInt64: AlertsV1.Person]? = nil) async -> AlertsV1.WatchSession {
        var names: [UInt64: AlertsV1.Person]
        if let known { names = known } else { names = await people(Set(session.watchers.map(\.user) + [session.initiator])) }
        return AlertsV1.WatchSession(
            sessionId: session.id, initiator: names[session.initiator] ?? AlertsV1.Person(userId: session.initiator), note: session.note,
            state: session.state, startedAtMs: session.startedAtMs, endsAtMs: session.endsAtMs, endedAtMs: session.endedAtMs,
            watchers: session.watchers.map {
                AlertsV1.Watcher(person: names[$0.user] ?? AlertsV1.Person(userId: $0.user), answer: $0.answer, answeredAtMs: $0.answeredAtMs)
            })
    }

    static func span(_ ms: Int64) -> String {
        let minutes = ms / 60_000
        if minutes < 60 { return "\(minutes) min" }
        return minutes % 60 == 0 ? "\(minutes / 60) h" : "\(minutes / 60) h \(minutes % 60) min"
    }

    /// "18:05 UTC" (a value type, made once, rather than a DateFormatter per message).
    private static let hourMinute = Date.VerbatimFormatStyle(
        format: "\(hour: .twoDigits(clock: .twentyFourHour, hourCycle: .zeroBased)):\(minute: .twoDigits)",
        timeZone: TimeZone(identifier: "UTC")!, calendar: Calendar(identifier: .gregorian))

    static func clock(_ ms: Int64) -> String {
        Date(timeIntervalSince1970: TimeInterval(ms) / 1000).formatted(hourMinute) + " UTC"
    }
}

extension AlertsService {
    var watchRules: WatchRules { WatchRules(minimumMs: config.minWatch.wholeMilliseconds, maximumMs: config.maxWatch.wholeMilliseconds) }
}

/// A watch rule's refusal as the status a client gets (the rules know no statuses).
extension WatchRules.Refusal: RPCErrorConvertible {
    var rpcError: RPCError {
        let span = AlertsService.span
        return switch self {
        case .duration(let least, let most):
            .invalidArgument("duration_seconds: \(least / 1000)-\(most / 1000) (\(span(least)) to \(span(most)))")
        case .noteTooLong(let limit):
            .invalidArgument("note: at most \(limit) characters")
        case .noWatcher:
            .failedPrecondition("nobody could watch: your core circle has no accepted members (frienso circle add)")
        case .extension_(let most):
            .invalidArgument("extra_seconds: 60-\(most / 1000)")
        case .tooLong(let most, let endsIn):
            .failedPrecondition("a watch may run at most \(span(most)) from now; it ends in \(span(endsIn))")
        }
    }
}
