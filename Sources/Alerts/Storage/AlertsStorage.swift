import Foundation
import FriensoProto
import Wire

/// What alerts keeps, and how: watch sessions, helpNow alerts with their recipients, prompts and
/// escalations, check-in timers, location grants, devices, the delivery outbox with its attempt
/// log, campus resources, dismissed circle requests, cursors into other services' records, and
/// idempotent replies. Two engines implement it with the same behaviour (the alerts tests run on
/// both): `SQLiteAlertsStore` (the embedded default, `alerts.sqlite` in the data folder) and
/// `PostgresAlertsStore` (the `alerts` schema of a PostgreSQL database).
///
/// The rules live in the service, once; the storage reads and writes. A change that depends on a
/// row as it is (answering a watch, resolving an alert, warning for a timer) is decided by a pure
/// `decide` closure the storage calls inside the transaction with the row as the transaction sees
/// it, after it locked the row (SQLite: the single writer; PostgreSQL: `SELECT … FOR UPDATE`), so
/// two requests, or two instances' maintenance passes, never both act on one state. Every change
/// is one transaction, committed before it returns; with an idempotency key in scope it carries
/// the request's claim (`ServiceDatabase`, `PostgresServiceDatabase`).
protocol AlertsStorage: Sendable {
    /// Where replies to idempotent requests are kept (the same database).
    var replies: any ReplyStore { get }

    // Watch sessions (`Watch.swift`).
    func watch(initiator: UInt64, key: String) async throws -> WatchRecord?
    func activeWatch(of user: UInt64) async throws -> WatchRecord?
    /// The latest session `user` started.
    func latestWatch(of user: UInt64) async throws -> WatchRecord?
    /// Active sessions `user` was asked to watch, newest first.
    func watching(_ user: UInt64) async throws -> [WatchRecord]
    /// - Throws: `AlertsConflict.alreadyActive` when the initiator has an active session.
    func startWatch(_ new: NewWatch) async throws -> WatchRecord
    /// Changes one session as `decide` says. - Returns: the session after, and the change (its
    /// grants as set, with their versions); nil when `decide` changed nothing.
    func changeWatch(_ target: RowTarget, at: Int64, _ decide: @escaping @Sendable (WatchRecord?) throws -> WatchChange?)
        async throws -> (record: WatchRecord, change: WatchChange)?
    /// Active sessions whose end is at or before `at`.
    func dueWatches(at: Int64) async throws -> [WatchRecord]
    func nextWatchExpiry() async throws -> Int64?

    // helpNow alerts (`HelpNow.swift`, `Escalation.swift`).
    /// What a raise by `user` meets, in one read: the alert raised earlier with `key` (a retry;
    /// `retry` true), else `user`'s active alert; nil when neither.
    func alertMeetingRaise(by user: UInt64, key: String) async throws -> (alert: AlertRecord, retry: Bool)?
    func alert(id: UInt64) async throws -> AlertRecord?
    func activeAlert(of user: UInt64) async throws -> AlertRecord?
    func latestAlert(of user: UInt64) async throws -> AlertRecord?
    /// Active alerts that reached `user`, newest first.
    func alerts(reaching user: UInt64) async throws -> [AlertRecord]
    /// - Returns: the alert, and its grants as set (with their versions).
    /// - Throws: `AlertsConflict.alreadyActive` when the initiator has an active alert.
    func raiseAlert(_ new: NewAlert) async throws -> (record: AlertRecord, grants: [GrantRecord])
    func changeAlert(_ target: RowTarget, at: Int64, _ decide: @escaping @Sendable (AlertRecord?) throws -> AlertChange?)
        async throws -> (record: AlertRecord, change: AlertChange)?
    /// Active alerts raised at or before `raisedBy`, not escalated, that nobody accepted.
    func escalationsDue(raisedBy: Int64) async throws -> [UInt64]
    /// When the oldest active alert that may still escalate (not escalated, nobody accepted) was raised.
    func oldestUnescalated() async throws -> Int64?

    // Check-in timers (`Timers.swift`).
    func timer(owner: UInt64, key: String) async throws -> TimerRecord?
    func activeTimer(of owner: UInt64) async throws -> TimerRecord?
    /// The active timer, else the latest.
    func latestTimer(of owner: UInt64) async throws -> TimerRecord?
    /// - Throws: `AlertsConflict.alreadyActive` when the owner has a running timer.
    func startTimer(_ new: NewTimer) async throws -> TimerRecord
    func changeTimer(id: UInt64, at: Int64, _ decide: @escaping @Sendable (TimerRecord?) throws -> TimerChange?)
        async throws -> (record: TimerRecord, change: TimerChange)?
    /// Running timers whose warning is due (not yet warned, not yet due), and those that ran out.
    func dueTimers(at: Int64) async throws -> (warn: [TimerRecord], fire: [TimerRecord])
    /// When the next running timer needs attention (its warning or its end).
    func nextTimerAt() async throws -> Int64?

    // Grants.
    /// Grants to (re)publish: live ones, and revocations of the last `keepRevoked` ms (older
    /// revocations are deleted: geo has long dropped them by their expiry).
    func grantsToPublish(now: Int64, keepRevoked: Int64) async throws -> [GrantRecord]

    // Devices, the inbox and campus resources (`Inbox.swift`).
    /// Registers (or moves) a device token. - Returns: the user it belonged to before, if another.
    func registerDevice(token: String, user: UInt64, platform: AlertsV1.Platform, appVersion: String, at: Int64) async throws -> UInt64?
    /// - Returns: false when `user` has no device with that token.
    func unregisterDevice(token: String, user: UInt64) async throws -> Bool
    /// `user`'s devices, oldest registration first.
    func devices(of user: UInt64) async throws -> [AlertsV1.Device]
    func inbox(of user: UInt64, at: Int64) async throws -> InboxRows
    func dismissCircleRequest(member: UInt64, owner: UInt64, requestedAtMs: Int64) async throws
    /// Replaces each campus's resources with the given ones, in their order.
    func replaceResources(_ byCampus: [String: [AlertsV1.Resource]]) async throws
    /// Every campus's resources (`campus` empty) or one campus's (any case).
    func resources(campus: String) async throws -> [AlertsV1.Resource]

    // The outbox (`Delivery.swift`, `AttemptLog.swift`).
    /// Queues `messages` (see `OutboxRows`), and with `cursor` moves that cursor forward to its
    /// value in the same transaction. - Returns: how many rows it added (none: every one was
    /// queued before, by an earlier pull or another instance).
    @discardableResult
    func enqueue(_ messages: [Outgoing], at: Int64, cursor: (name: String, value: UInt64)?) async throws -> Int
    func cursor(_ name: String) async throws -> UInt64
    /// Newest first, with their attempt logs.
    func outbox(status: AlertsV1.DeliveryStatus, recipient: UInt64, beforeID: UInt64, limit: Int) async throws -> [AlertsV1.Delivery]
    /// Pending rows due by `at`, oldest due first, each push row with its device's platform (none:
    /// the device was unregistered since). The rows are this pass's: another instance's pass
    /// takes others (PostgreSQL: row locks skipped, then a claim until `claimUntil`).
    func takeDue(at: Int64, limit: Int, claimUntil: Int64) async throws -> (rows: [AlertsV1.Delivery], platforms: [UInt64: AlertsV1.Platform])
    /// Logs SENDING attempts for messages about to leave the machine (an attempt of these
    /// deliveries still SENDING belongs to a pass that never finished: it becomes INTERRUPTED).
    func beginAttempts(_ attempts: [(delivery: UInt64, provider: String)], at: Int64) async throws
    /// Records a pass: the rows as they are after it, each provider answer in the attempt log,
    /// the tokens a provider called dead unregistered, and the built-in providers' record of what
    /// they sent (`sent`, as `recordSent` writes it: in the same transaction, so a message counts
    /// as sent exactly when its row is marked). - Returns: when the next pending row is due as
    /// the pass commits (`nextDue`, read in the same transaction); nil: none pending.
    func finishPass(_ updated: [AlertsV1.Delivery], answers: [(delivery: UInt64, provider: String, result: DeliveryResult)],
                    begun: Set<UInt64>, at: Int64, deadTokens: Set<String>,
                    sent: [(message: OutgoingMessage, provider: String)]) async throws -> Int64?
    /// When the next pending row is due.
    func nextDue() async throws -> Int64?
    /// Pending rows by channel: how many, and the oldest one's creation.
    func pendingByChannel() async throws -> [(channel: AlertsV1.Channel, count: Int, oldestMs: Int64)]
    /// Deletes deliveries that ended before `cutoff` (with their attempts) and the built-in
    /// recorders' copies of messages sent before it. - Returns: outbox rows deleted.
    func pruneOutbox(before cutoff: Int64) async throws -> Int
    /// The built-in providers' record: each message once by its idempotency key.
    func recordSent(_ messages: [OutgoingMessage], provider: String, at: Int64) async throws
    /// What the built-in providers recorded, in order: (channel, address, body).
    func sentMessages() async throws -> [(channel: Int32, address: String, body: String)]

    // Erasure and export (`Erasure.swift`, `Export.swift`).
    /// Deletes every row about `user` (see `AlertsService.eraseUser`). - Returns: rows deleted.
    func erase(_ user: UInt64, addresses: [String], traces: [String]) async throws -> Int
    /// After an erasure: leaves no copy of erased rows where the engine keeps old pages (SQLite:
    /// the WAL, truncated; PostgreSQL: dead tuples, vacuumed).
    func scrubErasedRows() async throws
    func exportRows(of user: UInt64) async throws -> ExportRows
}

/// Which row a change is about.
enum RowTarget: Sendable {
    case id(UInt64)
    /// The active one of this user (at most one: the database enforces it).
    case activeOf(UInt64)
}

/// A second active watch, alert or timer of one person: the database refused it.
enum AlertsConflict: Error {
    case alreadyActive
}

struct NewWatch: Sendable {
    var initiator: UInt64
    var note: String
    var at: Int64
    var endsAtMs: Int64
    var key: String
    var watchers: [UInt64]
    /// What to queue, given the new session's id.
    var messages: @Sendable (UInt64) -> [Outgoing]
}

/// A change to a watch session, decided from the session as the transaction sees it.
struct WatchChange: Sendable {
    /// The session ends (ENDED, EXPIRED) at the change's time.
    var end: AlertsV1.WatchState?
    var endsAtMs: Int64?
    var watcher: AnswerChange?
    var grants: [GrantRecord] = []
    var messages: [Outgoing] = []
}

/// A watcher's or recipient's answer: `answer` set (answered now, undismissed), or nil (dismissed).
struct AnswerChange: Sendable {
    var user: UInt64
    var answer: AlertsV1.Answer?
}

struct NewAlert: Sendable {
    var initiator: UInt64
    var message: String
    var location: AlertsV1.AlertLocation
    var at: Int64
    var key: String
    var recipients: [CircleContact]
    var grants: [GrantRecord]
    var promptNumber: String
    var promptLabel: String
    var messages: @Sendable (UInt64) -> [Outgoing]
}

/// A change to a helpNow alert, decided from the alert as the transaction sees it.
struct AlertChange: Sendable {
    /// Resolved, by whom ("initiator", "operator"), at the change's time.
    var resolvedBy: String?
    var recipient: AnswerChange?
    var escalation: AlertsV1.Escalation?
    /// The emergency call was reported: whether it was dialed.
    var reportedCall: Bool?
    var grants: [GrantRecord] = []
    var messages: [Outgoing] = []
}

struct NewTimer: Sendable {
    var owner: UInt64
    var note: String
    var at: Int64
    var dueMs: Int64
    var warnMs: Int64
    var pinHash: Data?
    var key: String
}

/// A change to a check-in timer, decided from the timer as the transaction sees it.
struct TimerChange: Sendable {
    /// The timer ends (ENDED, FIRED) at the change's time, with the alert it raised.
    var end: AlertsV1.TimerState?
    var alertID: UInt64 = 0
    var warned = false
    var failedTry = false
    var messages: [Outgoing] = []
}

/// The inbox's own rows: sessions `user` has not answered, alerts they have not answered, and the
/// circle requests they dismissed ("<owner>:<requested at>").
struct InboxRows: Sendable {
    var watches: [(id: UInt64, initiator: UInt64, note: String, startedAtMs: Int64, endsAtMs: Int64)] = []
    var alerts: [(id: UInt64, initiator: UInt64, message: String, raisedAtMs: Int64, location: AlertsV1.AlertLocation)] = []
    var dismissed: Set<String> = []
}

/// Everything alerts keeps about one person, newest first.
struct ExportRows: Sendable {
    var watches: [WatchRecord] = []
    var watched: [WatchRecord] = []
    var alerts: [AlertRecord] = []
    var alertsReceived: [AlertRecord] = []
    var deliveries: [AlertsV1.Delivery] = []
    var timers: [TimerRecord] = []
}

/// How queued messages become outbox rows, on either engine: a push row per registered device of
/// a user (SKIPPED, with the reason, when they have none), an SMS row per user (the number is
/// looked up when it is sent) or phone number. Rows are unique by source, channel and recipient
/// (`dedupeKey`), so queueing the same thing twice queues it once.
enum OutboxRows {
    struct Row: Sendable {
        var message: Outgoing
        var channel: AlertsV1.Channel
        var user: UInt64
        var address: String
        var dedupeKey: String
        var status: AlertsV1.DeliveryStatus
        var error: String
    }

    /// The rows for `messages`, given each user's device tokens (oldest registration first).
    static func rows(_ messages: [Outgoing], tokens: [UInt64: [String]]) -> [Row] {
        var rows: [Row] = []
        for message in messages {
            for channel in message.channels.sorted(by: { $0.rawValue < $1.rawValue }) {
                func row(_ user: UInt64, _ address: String, _ key: String, _ status: AlertsV1.DeliveryStatus = .pending, _ error: String = "") -> Row {
                    Row(message: message, channel: channel, user: user, address: address, dedupeKey: "\(message.source)|\(channel.rawValue)|\(key)",
                        status: status, error: error)
                }
                switch (channel, message.recipient) {
                case (.push, .user(let user)):
                    let devices = tokens[user] ?? []
                    if devices.isEmpty { rows.append(row(user, "", "user:\(user)", .skipped, "no registered device")) }
                    for token in devices { rows.append(row(user, token, "device:\(token)")) }
                case (.sms, .user(let user)):
                    rows.append(row(user, "", "user:\(user)"))
                case (.sms, .phone(let phone)):
                    rows.append(row(0, phone, "phone:\(phone)"))
                default:
                    continue // no push to a bare phone number
                }
            }
        }
        return rows
    }

    /// The `dedupeKey`s of `source`'s rows (`<source>|…`, above) lie in `lower..<upper` in byte
    /// order (`}` follows `|`), with those of any source that starts with `source` and `|`: a
    /// lookup by this range also checks the source.
    static func keyRange(of source: String) -> (lower: String, upper: String) {
        (source + "|", source + "}")
    }

    /// What a delivery summary is made of: an outbox row's recipient, channel, status and attempts.
    typealias Summarised = (user: UInt64, address: String, channel: AlertsV1.Channel, status: AlertsV1.DeliveryStatus, attempts: UInt32)

    /// The per-recipient delivery summaries of an alert (`AlertRecord.deliveries`), from its
    /// outbox rows in the order they were queued (by id): keyed `user:<id>`, or `phone:<number>`
    /// for a number outside the app. Both engines' reads and a raise's own rows come through here.
    static func summaries(_ rows: some Sequence<Summarised>) -> [String: [AlertsV1.DeliverySummary]] {
        var result: [String: [AlertsV1.DeliverySummary]] = [:]
        for row in rows {
            result[row.user != 0 ? "user:\(row.user)" : "phone:\(row.address)", default: []]
                .append(AlertsV1.DeliverySummary(channel: row.channel, status: row.status, attempts: row.attempts))
        }
        return result
    }

    /// The summaries of rows just queued (`enqueue`'s answer): what reading them back would give,
    /// since a new row has had no attempt yet.
    static func summaries(queued rows: [Row]) -> [String: [AlertsV1.DeliverySummary]] {
        summaries(rows.lazy.map { row -> Summarised in (user: row.user, address: row.address, channel: row.channel, status: row.status, attempts: 0) })
    }

    /// `FRIENSO_RAISE_SUMMARIES=read-back`: a raise reads its outbox rows back for its reply, as
    /// before issue 16's item 77 (for A/B runs of `frienso-bench`; the launcher's children inherit it).
    static let raiseReadsBack = ProcessInfo.processInfo.environment["FRIENSO_RAISE_SUMMARIES"] == "read-back"

    /// Users whose devices `rows(_:tokens:)` needs.
    static func pushUsers(_ messages: [Outgoing]) -> Set<UInt64> {
        Set(messages.compactMap { m in
            guard m.channels.contains(.push), case .user(let user) = m.recipient else { return nil }
            return user
        })
    }

    /// The sources of deliveries about `user`'s own alerts, watches and timers (rows older than
    /// the `about_user` column are found by them), and the patterns of their answers' sources.
    static func erasedSources(alerts: [UInt64], watches: [UInt64], timers: [UInt64], user: UInt64) -> (sources: [String], patterns: [String]) {
        // Appended kind by kind: one `+` chain of three closures took the type checker 1.7 s.
        var sources: [String] = []
        for alert in alerts {
            sources += ["help_now:\(alert)", "help_now_resolved:\(alert)", "help_now_resend:\(alert)", "help_now_escalated:\(alert)"]
        }
        for watch in watches { sources += ["watch:\(watch)", "watch_end:\(watch)"] }
        for timer in timers { sources += ["timer_warning:\(timer)", "timer_end:\(timer)"] }
        return (sources, ["help_answer:%:\(user):%", "watch_answer:%:\(user):%"])
    }
}
