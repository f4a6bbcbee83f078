import Foundation
public import FriensoProto
import GRDB
public import Wire

/// watchMe: a session with a duration; the core circle is asked to watch; accepted watchers may
/// see the initiator's location until it ends.
extension AlertsService {
    public func startWatch(_ request: AlertsV1.StartWatchRequest, _ context: RequestContext) async throws -> AlertsV1.StartWatchResponse {
        let caller = try context.requireCaller()
        let duration = try watchRules.start(durationSeconds: request.durationSeconds, note: request.note).get()
        let key = context.idempotencyKey
        if !key.isEmpty, let earlier = try await store.database.read({ db in
            try UInt64.fetchOne(db, cached: "SELECT id FROM watch_sessions WHERE initiator = ? AND idempotency_key = ?", arguments: [caller, key])
                .flatMap { try AlertsStore.watch(db, id: $0) }
        }) {
            return AlertsV1.StartWatchResponse(session: await view(earlier))
        }
        if let active = try await store.database.read({ db in try AlertsStore.activeWatch(db, of: caller) }) {
            throw RPCError.failedPrecondition("watch \(active.id) is already active: extend or end it")
        }
        let watchers = try WatchRules.watchers(in: try await peers.circle(of: caller)).get()
        let names = await people(Set(watchers + [caller]))
        let at = now(), ends = at + duration
        let text = "\(Self.name(names[caller])) asks you to watch them for \(Self.span(duration))" + (request.note.isEmpty ? "" : ": \(request.note)")
        let session: WatchRecord
        do {
            session = try await store.database.write { db in
                try db.run(sql: """
                    INSERT INTO watch_sessions (initiator, note, state, started_at_ms, ends_at_ms, idempotency_key) VALUES (?, ?, 1, ?, ?, ?)
                    """, arguments: [caller, request.note, at, ends, key])
                let id = UInt64(db.lastInsertedRowID)
                for (position, watcher) in watchers.enumerated() {
                    try db.run(sql: "INSERT INTO watchers (session_id, watcher, position, answer) VALUES (?, ?, ?, ?)",
                                   arguments: [id, watcher, position, AlertsV1.Answer.pending.rawValue])
                }
                try AlertsStore.enqueue(db, watchers.map { Outgoing(source: "watch:\(id)", recipient: .user($0), channels: [.push], body: text, about: caller) }, now: at)
                guard let record = try AlertsStore.watch(db, id: id) else { throw RPCError.internal("watch vanished") }
                return record
            }
        } catch let error as DatabaseError where error.resultCode == .SQLITE_CONSTRAINT {
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
        let (session, grants) = try await store.database.write { db -> (WatchRecord, [GrantRecord]) in
            guard let active = try AlertsStore.activeWatch(db, of: caller), active.endsAtMs > at else {
                throw RPCError.failedPrecondition("no active watch to extend")
            }
            let ends = try rules.extended(endsAtMs: active.endsAtMs, byMs: extra, now: at).get()
            try db.run(sql: "UPDATE watch_sessions SET ends_at_ms = ? WHERE id = ?", arguments: [ends, active.id])
            let grants = WatchRules.grants(of: caller, watchers: active.watchers, until: ends)
            for g in grants { try AlertsStore.setGrant(db, g) }
            guard let record = try AlertsStore.watch(db, id: active.id) else { throw RPCError.internal("watch vanished") }
            return (record, grants)
        }
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
        let ended = try await store.database.write { db -> (WatchRecord, [GrantRecord]) in
            guard let active = try AlertsStore.activeWatch(db, of: caller) else { throw RPCError.failedPrecondition("no active watch to end") }
            return try Self.finish(db, active, as: .ended, at: at, initiatorName: Self.name(names[caller]))
        }
        announceEnd(ended.0, grants: ended.1, names: names)
        return AlertsV1.EndWatchResponse(session: await view(ended.0))
    }

    /// Ends every session whose time ran out (the maintenance loop calls it).
    /// - Returns: how many ended.
    @discardableResult
    public func expireDueWatches() async throws -> Int {
        let at = now()
        let due = try await store.database.read { db in try AlertsStore.dueWatches(db, now: at) }
        guard !due.isEmpty else { return 0 }
        let initiators = try await store.database.read { db in
            try UInt64.fetchAll(db, sql: "SELECT initiator FROM watch_sessions WHERE id IN (\(due.map { _ in "?" }.joined(separator: ",")))",
                                arguments: StatementArguments(due))
        }
        let names = await people(Set(initiators))
        let ended = try await store.database.write { db -> [(WatchRecord, [GrantRecord])] in
            try due.compactMap { id in
                guard let session = try AlertsStore.watch(db, id: id), session.state == .active, session.endsAtMs <= at else { return nil }
                return try Self.finish(db, session, as: .expired, at: at, initiatorName: Self.name(names[session.initiator]))
            }
        }
        for (session, grants) in ended {
            announceEnd(session, grants: grants, names: names)
            logger.info("watch expired", metadata: ["session": "\(session.id)"])
        }
        return ended.count
    }

    /// When the next active session ends.
    func nextWatchExpiry() async throws -> Int64? {
        try await store.database.read { db in try AlertsStore.nextWatchExpiry(db) }
    }

    /// Ends `session` in the transaction: state, revoked grants, a push to accepted watchers.
    private static func finish(_ db: Database, _ session: WatchRecord, as state: AlertsV1.WatchState, at: Int64,
                               initiatorName: String) throws -> (WatchRecord, [GrantRecord]) {
        try db.run(sql: "UPDATE watch_sessions SET state = ?, ended_at_ms = ? WHERE id = ?", arguments: [state.rawValue, at, session.id])
        let accepted = session.watchers.filter { $0.answer == .accepted }.map(\.user)
        let grants = accepted.map { GrantRecord(subject: session.initiator, viewer: $0, reason: "watch", expiresMs: at) }
        for g in grants { try AlertsStore.setGrant(db, g) }
        let text = state == .expired ? "\(initiatorName)'s watch ran out of time" : "\(initiatorName) ended their watch: they are safe"
        try AlertsStore.enqueue(db, accepted.map { Outgoing(source: "watch_end:\(session.id)", recipient: .user($0), channels: [.push], body: text, about: session.initiator) },
                                now: at)
        guard let record = try AlertsStore.watch(db, id: session.id) else { throw RPCError.internal("watch vanished") }
        return (record, grants)
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
        let result = try await store.database.write { db -> (WatchRecord, [GrantRecord], AlertsV1.Answer)? in
            guard let session = try AlertsStore.watch(db, id: sessionID) else { throw RPCError.notFound("no watch request \(sessionID)") }
            guard let mine = session.watchers.first(where: { $0.user == caller }) else {
                throw RPCError.permissionDenied("watch request \(sessionID) is not addressed to you")
            }
            guard session.state == .active, session.endsAtMs > at else { throw RPCError.failedPrecondition("this watch has ended") }
            if action == .dismiss {
                try db.run(sql: "UPDATE watchers SET dismissed = 1 WHERE session_id = ? AND watcher = ?", arguments: [sessionID, caller])
                return nil
            }
            let answer: AlertsV1.Answer = action == .accept ? .accepted : .declined
            guard mine.answer != answer else { return nil } // the same answer again changes nothing
            try db.run(sql: "UPDATE watchers SET answer = ?, answered_at_ms = ?, dismissed = 0 WHERE session_id = ? AND watcher = ?",
                           arguments: [answer.rawValue, at, sessionID, caller])
            var grants: [GrantRecord] = []
            if answer == .accepted {
                grants.append(GrantRecord(subject: session.initiator, viewer: caller, reason: "watch", expiresMs: session.endsAtMs))
            } else if mine.answer == .accepted {
                grants.append(GrantRecord(subject: session.initiator, viewer: caller, reason: "watch", expiresMs: at))
            }
            for g in grants { try AlertsStore.setGrant(db, g) }
            let text = answer == .accepted ? "\(Self.name(names[caller])) is watching you" : "\(Self.name(names[caller])) cannot watch you"
            try AlertsStore.enqueue(db, [Outgoing(source: "watch_answer:\(sessionID):\(caller):\(answer.rawValue)", recipient: .user(session.initiator),
                                                  channels: [.push], body: text, about: caller)], now: at)
            return (session, grants, answer)
        }
        guard let (session, grants, answer) = result else { return }
        emit(grants)
        emit(AlertsV1.AlertEvent(kind: .watchAnswer, requestId: sessionID, from: names[caller],
                                 text: answer == .accepted ? "\(Self.name(names[caller])) is watching you" : "\(Self.name(names[caller])) declined to watch you",
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

/// Storage of watch sessions (inside the transactions the handlers open).
extension AlertsStore {

    static func watch(_ db: Database, id: UInt64) throws -> WatchRecord? {
        guard let row = try Row.fetchOne(db, cached: "SELECT \(WatchRecord.columns) FROM watch_sessions WHERE id = ?", arguments: [id]) else { return nil }
        let watchers = try Row.fetchAll(db, cached: "SELECT watcher, answer, answered_at_ms FROM watchers WHERE session_id = ? ORDER BY position",
                                        arguments: [id]).map { WatcherRecord(user: $0[0], answer: AlertsV1.Answer(rawValue: $0[1]), answeredAtMs: $0[2]) }
        return WatchRecord(row: row, watchers: watchers)
    }

    static func activeWatch(_ db: Database, of user: UInt64) throws -> WatchRecord? {
        try UInt64.fetchOne(db, cached: "SELECT id FROM watch_sessions WHERE initiator = ? AND state = 1", arguments: [user])
            .flatMap { try watch(db, id: $0) }
    }

    func latestWatch(of user: UInt64) async throws -> WatchRecord? {
        try await database.read { db in
            try UInt64.fetchOne(db, cached: "SELECT id FROM watch_sessions WHERE initiator = ? ORDER BY id DESC LIMIT 1", arguments: [user])
                .flatMap { try Self.watch(db, id: $0) }
        }
    }

    func watching(_ user: UInt64) async throws -> [WatchRecord] {
        try await database.read { db in
            try UInt64.fetchAll(db, cached: """
                SELECT s.id FROM watchers w JOIN watch_sessions s ON s.id = w.session_id
                WHERE w.watcher = ? AND s.state = 1 ORDER BY s.id DESC
                """, arguments: [user]).compactMap { try Self.watch(db, id: $0) }
        }
    }

    /// Active sessions whose time ran out by `now`.
    static func dueWatches(_ db: Database, now: Int64) throws -> [UInt64] {
        try UInt64.fetchAll(db, cached: "SELECT id FROM watch_sessions WHERE state = 1 AND ends_at_ms <= ?", arguments: [now])
    }

    static func nextWatchExpiry(_ db: Database) throws -> Int64? {
        try Int64.fetchOne(db, cached: "SELECT MIN(ends_at_ms) FROM watch_sessions WHERE state = 1")
    }
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
