import Foundation
import FriensoProto

/// A watch session row.
struct WatchRecord: Sendable {
    var id: UInt64
    var initiator: UInt64
    var note: String
    var state: AlertsV1.WatchState
    var startedAtMs: Int64
    var endsAtMs: Int64
    var endedAtMs: Int64
    var watchers: [WatcherRecord]

}

struct WatcherRecord: Sendable {
    var user: UInt64
    var answer: AlertsV1.Answer
    var answeredAtMs: Int64
}

/// A helpNow alert row with its recipients and emergency prompt.
struct AlertRecord: Sendable, Equatable {
    var id: UInt64
    var initiator: UInt64
    var message: String
    var location: AlertsV1.AlertLocation
    var state: AlertsV1.AlertState
    var raisedAtMs: Int64
    var resolvedAtMs: Int64
    var resolvedBy: String
    var recipients: [RecipientRecord]
    var prompt: AlertsV1.EmergencyPrompt
    var escalation: AlertsV1.Escalation?
    /// Its helpNow messages by recipient ("user:<id>", "phone:<number>"), read with the alert in
    /// the same transaction: what a view of the alert shows without a read of its own.
    var deliveries: [String: [AlertsV1.DeliverySummary]] = [:]

    /// The outbox source of alert `id`'s helpNow messages.
    static func source(_ id: UInt64) -> String { "help_now:\(id)" }
}

extension AlertRecord {
    /// The alert as `raiseAlert` has just written `new`, with the ids the database gave it and
    /// its prompt: what a read of those rows returns, built without one (`deliveries` is read).
    init(raised new: NewAlert, id: UInt64, promptID: UInt64, deliveries: [String: [AlertsV1.DeliverySummary]]) {
        self.init(id: id, initiator: new.initiator, message: new.message, location: new.location, state: .active, raisedAtMs: new.at,
                  resolvedAtMs: 0, resolvedBy: "",
                  recipients: new.recipients.map { contact in
                      switch contact {
                      case .user(let user): RecipientRecord(user: user, phone: "", answer: .pending, answeredAtMs: 0)
                      case .phone(let phone): RecipientRecord(user: 0, phone: phone, answer: .pending, answeredAtMs: 0)
                      }
                  },
                  prompt: AlertsV1.EmergencyPrompt(promptId: promptID, number: new.promptNumber, label: new.promptLabel, location: new.location,
                                                   createdAtMs: new.at),
                  escalation: nil, deliveries: deliveries)
    }

    /// This alert after `changeAlert` wrote `change` at `at`: what a read of its rows returns
    /// then, built from the rows as the transaction read them before the change, without a second
    /// read (`AlertRecordTests` compares the two on both engines). Its deliveries are as before:
    /// a change queues messages under sources of its own (`help_now_resolved:`, …), never the
    /// alert's helpNow source, which `changeAlert` checks.
    func applying(_ change: AlertChange, at: Int64) -> AlertRecord {
        var after = self
        if let by = change.resolvedBy {
            after.state = .resolved
            after.resolvedAtMs = at
            after.resolvedBy = by
        }
        if let recipient = change.recipient, let answer = recipient.answer { // a dismissal is not part of the record
            for i in after.recipients.indices where after.recipients[i].user == recipient.user {
                after.recipients[i].answer = answer
                after.recipients[i].answeredAtMs = at
            }
        }
        if let e = change.escalation {
            after.escalation = AlertsV1.Escalation(escalatedAtMs: at, number: e.number, label: e.label, location: e.location ?? AlertsV1.AlertLocation(),
                                                   resentTo: e.resentTo)
        }
        if let dialed = change.reportedCall {
            after.prompt.reported = true
            after.prompt.dialed = dialed
            after.prompt.reportedAtMs = at
        }
        return after
    }
}

struct RecipientRecord: Sendable, Equatable {
    var user: UInt64   // 0 for a phone number
    var phone: String  // set for a phone number
    var answer: AlertsV1.Answer
    var answeredAtMs: Int64
}

/// A message to queue in the outbox. `recipient` names who gets it: a user (the push goes to each
/// of their devices, the SMS to their phone) or a phone number.
struct Outgoing: Sendable {
    enum Recipient: Sendable, Hashable {
        case user(UInt64)
        case phone(String)
    }
    var source: String
    var recipient: Recipient
    var channels: Set<AlertsV1.Channel>
    var body: String
    /// Whose message it is (the person who raised, watched, answered, poked): erased with them.
    var about: UInt64 = 0

    /// The same message, marked as being about `user`.
    func about(_ user: UInt64) -> Outgoing {
        var copy = self
        copy.about = user
        return copy
    }
}

/// A grant as alerts keeps it: the truth it republishes to geo.
struct GrantRecord: Sendable, Equatable {
    var subject: UInt64
    var viewer: UInt64
    var reason: String
    /// `GrantRecord.untilResolved` for a helpNow grant (published to geo with a rolling expiry).
    var expiresMs: Int64
    /// Its place in the order of changes to grants, from the database's counter when it was set
    /// (0 until then): geo ignores a grant older than the one it applied for the same key.
    var version: Int64 = 0

    static let untilResolved = Int64.max
}

/// A check-in timer row.
struct TimerRecord: Sendable {
    var id: UInt64
    var owner: UInt64
    var note: String
    var state: AlertsV1.TimerState
    var startedMs: Int64
    var dueMs: Int64
    var warnMs: Int64
    var warnedMs: Int64
    var endedMs: Int64
    var alertID: UInt64
    var pinHash: Data?
    var failures: Int

    var proto: AlertsV1.CheckInTimer {
        AlertsV1.CheckInTimer(timerId: id, note: note, state: state, startedAtMs: startedMs, dueAtMs: dueMs, warnAtMs: warnMs, warnedAtMs: warnedMs,
                              endedAtMs: endedMs, alertId: alertID, hasPin: pinHash != nil, failedAttempts: UInt32(failures))
    }
}

extension AlertsV1.AlertLocation {
    /// A stored location (an alert's, an escalation's) as both engines keep it: the message's
    /// bytes; unknown when they do not decode.
    static func stored(_ bytes: Data) -> AlertsV1.AlertLocation {
        (try? AlertsV1.AlertLocation(serializedBytes: Array(bytes))) ?? AlertsV1.AlertLocation()
    }
}

/// The columns every engine reads a record from, in this order.
enum RecordColumns {
    static let watch = "id, initiator, note, state, started_at_ms, ends_at_ms, ended_at_ms"
    static let timer = "id, owner, note, state, started_ms, due_ms, warn_ms, warned_ms, ended_ms, alert_id, pin_hash, failures"
    /// The outbox columns a `Delivery` is read from.
    static let delivery = """
        id, source, channel, recipient_user, address, body, status, attempts, last_error, created_at_ms, updated_at_ms, next_attempt_ms, provider, reference
        """
    /// How many columns `delivery` names (a query may add its own after them).
    static let deliveryCount = 14
}
