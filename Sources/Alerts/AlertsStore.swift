import Foundation
import FriensoProto
import GRDB
import Storage

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

    static let columns = "id, initiator, note, state, started_at_ms, ends_at_ms, ended_at_ms"
    init(row: Row, watchers: [WatcherRecord]) {
        id = row[0]; initiator = row[1]; note = row[2]; state = AlertsV1.WatchState(rawValue: row[3])
        startedAtMs = row[4]; endsAtMs = row[5]; endedAtMs = row[6]
        self.watchers = watchers
    }
}

struct WatcherRecord: Sendable {
    var user: UInt64
    var answer: AlertsV1.Answer
    var answeredAtMs: Int64
}

/// A helpNow alert row with its recipients and emergency prompt.
struct AlertRecord: Sendable {
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
}

struct RecipientRecord: Sendable {
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

    static let untilResolved = Int64.max
}

/// The alerts database.
final class AlertsStore: Sendable {
    let database: ServiceDatabase

    init(path: String) throws {
        database = try ServiceDatabase.open(path)
        var migrator = DatabaseMigrator()
        migrator.registerMigration("v1") { db in
            try db.create(table: "watch_sessions") { t in
                t.autoIncrementedPrimaryKey("id")
                t.column("initiator", .integer).notNull().indexed()
                t.column("note", .text).notNull()
                t.column("state", .integer).notNull()
                t.column("started_at_ms", .integer).notNull()
                t.column("ends_at_ms", .integer).notNull()
                t.column("ended_at_ms", .integer).notNull().defaults(to: 0)
                t.column("idempotency_key", .text).notNull().defaults(to: "")
            }
            // One active session per user, enforced by the database.
            try db.execute(sql: "CREATE UNIQUE INDEX watch_one_active ON watch_sessions(initiator) WHERE state = 1")
            try db.execute(sql: "CREATE INDEX watch_active_ends ON watch_sessions(ends_at_ms) WHERE state = 1")
            try db.create(table: "watchers") { t in
                t.column("session_id", .integer).notNull().references("watch_sessions")
                t.column("watcher", .integer).notNull().indexed()
                t.column("position", .integer).notNull()
                t.column("answer", .integer).notNull()
                t.column("answered_at_ms", .integer).notNull().defaults(to: 0)
                t.column("dismissed", .boolean).notNull().defaults(to: false)
                t.primaryKey(["session_id", "watcher"])
            }
            try db.create(table: "help_alerts") { t in
                t.autoIncrementedPrimaryKey("id")
                t.column("initiator", .integer).notNull().indexed()
                t.column("message", .text).notNull()
                t.column("location", .blob).notNull()  // AlertLocation, encoded
                t.column("state", .integer).notNull()
                t.column("raised_at_ms", .integer).notNull()
                t.column("resolved_at_ms", .integer).notNull().defaults(to: 0)
                t.column("resolved_by", .text).notNull().defaults(to: "")
                t.column("idempotency_key", .text).notNull().defaults(to: "")
            }
            try db.execute(sql: "CREATE UNIQUE INDEX help_one_active ON help_alerts(initiator) WHERE state = 1")
            try db.create(table: "recipients") { t in
                t.column("alert_id", .integer).notNull().references("help_alerts")
                t.column("position", .integer).notNull()
                t.column("user_id", .integer).notNull().indexed()
                t.column("phone", .text).notNull()
                t.column("answer", .integer).notNull()
                t.column("answered_at_ms", .integer).notNull().defaults(to: 0)
                t.column("dismissed", .boolean).notNull().defaults(to: false)
                t.primaryKey(["alert_id", "position"])
            }
            try db.create(table: "emergency_prompts") { t in
                t.autoIncrementedPrimaryKey("id")
                t.column("alert_id", .integer).notNull().unique().references("help_alerts")
                t.column("user_id", .integer).notNull()
                t.column("number", .text).notNull()
                t.column("label", .text).notNull()
                t.column("created_at_ms", .integer).notNull()
                t.column("reported", .boolean).notNull().defaults(to: false)
                t.column("dialed", .boolean).notNull().defaults(to: false)
                t.column("reported_at_ms", .integer).notNull().defaults(to: 0)
            }
            try db.create(table: "grants") { t in
                t.column("subject", .integer).notNull()
                t.column("viewer", .integer).notNull()
                t.column("reason", .text).notNull()
                t.column("expires_ms", .integer).notNull()
                t.primaryKey(["subject", "viewer", "reason"])
            }
            try db.create(table: "devices") { t in
                t.primaryKey("token", .text)
                t.column("user_id", .integer).notNull().indexed()
                t.column("platform", .integer).notNull()
                t.column("app_version", .text).notNull()
                t.column("registered_at_ms", .integer).notNull()
            }
            try db.create(table: "outbox") { t in
                t.autoIncrementedPrimaryKey("id")
                t.column("dedupe_key", .text).notNull().unique()
                t.column("source", .text).notNull()
                t.column("channel", .integer).notNull()
                t.column("recipient_user", .integer).notNull()
                t.column("address", .text).notNull()
                t.column("body", .text).notNull()
                t.column("status", .integer).notNull()
                t.column("attempts", .integer).notNull().defaults(to: 0)
                t.column("last_error", .text).notNull().defaults(to: "")
                t.column("provider", .text).notNull().defaults(to: "")
                t.column("created_at_ms", .integer).notNull()
                t.column("updated_at_ms", .integer).notNull()
                t.column("next_attempt_ms", .integer).notNull()
            }
            try db.execute(sql: "CREATE INDEX outbox_due ON outbox(next_attempt_ms) WHERE status = 1")
            try db.execute(sql: "CREATE INDEX outbox_source ON outbox(source)")
            // What the built-in providers sent: one row per provider idempotency key, so a delivery
            // retried after a crash between sending and marking it is not sent twice.
            try db.create(table: "sent_messages") { t in
                t.primaryKey("idempotency_key", .text)
                t.column("provider", .text).notNull()
                t.column("channel", .integer).notNull()
                t.column("address", .text).notNull()
                t.column("body", .text).notNull()
                t.column("sent_at_ms", .integer).notNull()
            }
            try db.create(table: "resources") { t in
                t.column("campus", .text).notNull()
                t.column("position", .integer).notNull()
                t.column("title", .text).notNull()
                t.column("detail", .text).notNull()
                t.column("phone", .text).notNull()
                t.column("url", .text).notNull()
                t.primaryKey(["campus", "position"])
            }
            // coreFriend requests the member hid from their inbox (the request itself is social's).
            try db.create(table: "dismissed_circle_requests") { t in
                t.column("member", .integer).notNull()
                t.column("owner", .integer).notNull()
                t.column("requested_at_ms", .integer).notNull()
                t.primaryKey(["member", "owner", "requested_at_ms"])
            }
            try db.create(table: "cursors") { t in
                t.primaryKey("name", .text)
                t.column("value", .integer).notNull()
            }
        }
        SQLiteReplyStore.migrate(&migrator)
        // Whose each message is, so erasing a deleted account finds the messages about them
        // (rows from before this migration are found by their source instead).
        migrator.registerMigration("outbox_about") { db in
            try db.execute(sql: "ALTER TABLE outbox ADD COLUMN about_user INTEGER NOT NULL DEFAULT 0")
            try db.execute(sql: "CREATE INDEX outbox_about ON outbox(about_user) WHERE about_user != 0")
            try db.execute(sql: "CREATE INDEX outbox_recipient ON outbox(recipient_user) WHERE recipient_user != 0")
        }
        Self.migrateTimers(&migrator)
        Self.migrateEscalation(&migrator)
        Self.migrateAttempts(&migrator)
        try database.migrate(migrator)
    }

    // MARK: Grants

    static func setGrant(_ db: Database, _ grant: GrantRecord) throws {
        try db.run(sql: "INSERT OR REPLACE INTO grants (subject, viewer, reason, expires_ms) VALUES (?, ?, ?, ?)",
                       arguments: [grant.subject, grant.viewer, grant.reason, grant.expiresMs])
    }

    /// Grants to (re)publish: live ones, and revocations of the last `keepRevoked` ms (older
    /// revocations are deleted: geo has long dropped them by their expiry).
    func grantsToPublish(now: Int64, keepRevoked: Int64) async throws -> [GrantRecord] {
        try await database.write { db in
            try db.run(sql: "DELETE FROM grants WHERE expires_ms < ?", arguments: [now - keepRevoked])
            return try Row.fetchAll(db, cached: "SELECT subject, viewer, reason, expires_ms FROM grants").map {
                GrantRecord(subject: $0[0], viewer: $0[1], reason: $0[2], expiresMs: $0[3])
            }
        }
    }

    // MARK: Outbox

    /// Queues `messages`: a push row per registered device, an SMS row per phone; a channel with
    /// nowhere to go is recorded as SKIPPED, never left out silently. Rows are unique by source,
    /// channel and recipient, so queueing the same thing twice queues it once.
    /// - Returns: how many rows are due for delivery.
    @discardableResult
    static func enqueue(_ db: Database, _ messages: [Outgoing], now: Int64) throws -> Int {
        var due = 0
        for message in messages {
            for channel in message.channels.sorted(by: { $0.rawValue < $1.rawValue }) {
                switch (channel, message.recipient) {
                case (.push, .user(let user)):
                    let tokens = try String.fetchAll(db, cached: "SELECT token FROM devices WHERE user_id = ? ORDER BY registered_at_ms", arguments: [user])
                    if tokens.isEmpty {
                        due += try insert(db, message, channel, user: user, address: "", key: "user:\(user)", status: .skipped,
                                          error: "no registered device", now: now)
                    }
                    for token in tokens {
                        due += try insert(db, message, channel, user: user, address: token, key: "device:\(token)", status: .pending, error: "", now: now)
                    }
                case (.sms, .user(let user)):
                    // The phone number is looked up (accounts) when it is sent.
                    due += try insert(db, message, channel, user: user, address: "", key: "user:\(user)", status: .pending, error: "", now: now)
                case (.sms, .phone(let phone)):
                    due += try insert(db, message, channel, user: 0, address: phone, key: "phone:\(phone)", status: .pending, error: "", now: now)
                default:
                    continue // no push to a bare phone number
                }
            }
        }
        return due
    }

    private static func insert(_ db: Database, _ m: Outgoing, _ channel: AlertsV1.Channel, user: UInt64, address: String, key: String,
                               status: AlertsV1.DeliveryStatus, error: String, now: Int64) throws -> Int {
        try db.run(sql: """
            INSERT OR IGNORE INTO outbox (dedupe_key, source, channel, recipient_user, address, body, status, last_error,
                                          created_at_ms, updated_at_ms, next_attempt_ms, about_user)
            VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
            """, arguments: ["\(m.source)|\(channel.rawValue)|\(key)", m.source, channel.rawValue, user, address, m.body,
                             status.rawValue, error, now, now, now, m.about])
        return db.changesCount > 0 && status == .pending ? 1 : 0
    }

    /// The outbox columns `delivery(_:)` reads, by position (GRDB's by-name lookup costs a
    /// lowercased string per access, on the delivery path).
    static let deliveryColumns = """
        id, source, channel, recipient_user, address, body, status, attempts, last_error, created_at_ms, updated_at_ms, next_attempt_ms, provider, reference
        """
    /// How many columns `deliveryColumns` names (a query may add its own after them).
    static let deliveryColumnCount = 14

    static func delivery(_ row: Row) -> AlertsV1.Delivery {
        AlertsV1.Delivery(deliveryId: row[0], source: row[1], channel: AlertsV1.Channel(rawValue: row[2]), recipientUserId: row[3],
                          address: row[4], body: row[5], status: AlertsV1.DeliveryStatus(rawValue: row[6]), attempts: row[7], lastError: row[8],
                          createdAtMs: row[9], updatedAtMs: row[10], nextAttemptAtMs: row[11], provider: row[12], reference: row[13])
    }

    func outbox(status: AlertsV1.DeliveryStatus, recipient: UInt64, beforeID: UInt64, limit: Int) async throws -> [AlertsV1.Delivery] {
        try await database.read { db in
            var sql = "SELECT \(Self.deliveryColumns) FROM outbox WHERE id < ?"
            var arguments: StatementArguments = [beforeID == 0 ? Int64.max : Int64(clamping: beforeID)]
            if status != .unspecified { sql += " AND status = ?"; _ = arguments.append(contentsOf: [status.rawValue]) }
            if recipient != 0 { sql += " AND recipient_user = ?"; _ = arguments.append(contentsOf: [recipient]) }
            sql += " ORDER BY id DESC LIMIT ?"
            _ = arguments.append(contentsOf: [limit])
            return try Row.fetchAll(db, cached: sql, arguments: arguments).map { row in
                var d = Self.delivery(row)
                d.attemptLog = try Self.attempts(db, of: d.deliveryId)
                return d
            }
        }
    }

    /// Delivery summaries by source and recipient user (0 with the phone for phone numbers).
    func summaries(source: String) async throws -> [String: [AlertsV1.DeliverySummary]] {
        try await database.read { db in
            var result: [String: [AlertsV1.DeliverySummary]] = [:]
            for row in try Row.fetchAll(db, cached: "SELECT recipient_user, address, channel, status, attempts FROM outbox WHERE source = ? ORDER BY id",
                                        arguments: [source]) {
                let user: UInt64 = row[0]
                let key = user != 0 ? "user:\(user)" : "phone:\(row[1] as String)"
                result[key, default: []].append(AlertsV1.DeliverySummary(channel: AlertsV1.Channel(rawValue: row[2]),
                                                                         status: AlertsV1.DeliveryStatus(rawValue: row[3]), attempts: row[4]))
            }
            return result
        }
    }

    // MARK: Cursors

    static func cursor(_ db: Database, _ name: String) throws -> UInt64 {
        try UInt64.fetchOne(db, cached: "SELECT value FROM cursors WHERE name = ?", arguments: [name]) ?? 0
    }

    static func setCursor(_ db: Database, _ name: String, _ value: UInt64) throws {
        try db.run(sql: "INSERT OR REPLACE INTO cursors (name, value) VALUES (?, ?)", arguments: [name, value])
    }
}
