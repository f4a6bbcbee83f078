import FriensoProto
import Foundation
import GRDB
public import Logging
import Storage
import Wire

/// One email to send.
public struct EmailMessage: Sendable {
    public var deliveryID: UInt64
    /// Stable across retries of this delivery, for a provider that deduplicates.
    public var idempotencyKey: String
    public var to: String
    public var subject: String
    public var body: String

    public init(deliveryID: UInt64, idempotencyKey: String, to: String, subject: String, body: String) {
        self.deliveryID = deliveryID
        self.idempotencyKey = idempotencyKey
        self.to = to
        self.subject = subject
        self.body = body
    }
}

public enum EmailResult: Sendable, Equatable {
    case delivered(reference: String)
    case failed(String, retryable: Bool)
}

/// Where emails go: the built-in recording provider, or a real one (issue 19: SMTP).
public protocol EmailProvider: Sendable {
    var name: String { get }
    func send(_ message: EmailMessage) async -> EmailResult
}

/// The built-in provider: no network; each email is recorded in the `sent_emails` table (what a
/// deployment without email credentials shows an operator, and what the tests read) and logged
/// by its subject and a shortened address, never its body (a reset code is a secret).
final class RecordingEmailProvider: EmailProvider {
    let name = "recording"
    private let store: any AccountsStorage
    private let logger: Logger
    private let now: @Sendable () -> Int64

    init(store: any AccountsStorage, logger: Logger, now: @escaping @Sendable () -> Int64) {
        self.store = store
        self.logger = logger
        self.now = now
    }

    func send(_ message: EmailMessage) async -> EmailResult {
        let at = now()
        do {
            try await store.recordSentEmail(message, at: at)
        } catch {
            return .failed("could not record: \(error)", retryable: true)
        }
        logger.info("email sent (recorded)", metadata: ["delivery": "\(message.deliveryID)", "to": "\(Self.redact(message.to))",
                                                        "subject": "\(message.subject)"])
        return .delivered(reference: message.idempotencyKey)
    }

    /// "an…@example.org": enough to tell addresses apart in a log.
    static func redact(_ address: String) -> String {
        guard let at = address.firstIndex(of: "@") else { return "…" }
        return "\(address.prefix(2))…\(address[at...])"
    }
}

extension AccountsService {
    /// Sends the emails that are due: one attempt each, retried with backoff until their expiry
    /// (a reset code's email is worth nothing once the code expired). A sent email's body is
    /// cleared from the outbox: the code in it is kept nowhere but in the provider's hands.
    /// - Returns: emails delivered.
    @discardableResult
    public func deliverEmails(logger: Logger) async -> Int {
        let now = config.now()
        let due: [EmailMessage]
        do { due = try await store.dueEmails(now: now) } catch {
            logger.error("cannot read the email outbox", metadata: ["error": "\(error)"])
            return 0
        }
        var delivered = 0
        for message in due {
            let result = await email.send(message)
            do {
                switch result {
                case .delivered(let reference):
                    try await store.emailSent(message.deliveryID, provider: email.name, reference: reference, now: config.now())
                    delivered += 1
                case .failed(let error, let retryable):
                    logger.warning("email failed", metadata: ["delivery": "\(message.deliveryID)", "error": "\(error)", "retry": "\(retryable)"])
                    try await store.emailFailed(message.deliveryID, error: error, final: !retryable, now: config.now())
                }
            } catch {
                logger.error("cannot record an email's outcome", metadata: ["delivery": "\(message.deliveryID)", "error": "\(error)"])
            }
        }
        return delivered
    }
}

extension AccountsService {
    /// Deletes the emails done before `emailRetention` (and the recording provider's copies of
    /// them). Run at start and hourly (`PeriodicPrune`, started by `frienso-accounts`). - Returns: rows deleted.
    public func pruneEmails() async throws -> Int {
        try await store.pruneEmails(before: config.now() - config.emailRetention.wholeMilliseconds)
    }
}

extension SQLiteAccountsStore {
    static func migrateEmail(_ migrator: inout DatabaseMigrator) {
        migrator.registerMigration("email") { db in
            try db.execute(sql: """
                CREATE TABLE email_outbox (
                    id INTEGER PRIMARY KEY AUTOINCREMENT, user_id INTEGER NOT NULL, address TEXT NOT NULL, subject TEXT NOT NULL,
                    body TEXT NOT NULL, status INTEGER NOT NULL, attempts INTEGER NOT NULL DEFAULT 0, last_error TEXT NOT NULL DEFAULT '',
                    provider TEXT NOT NULL DEFAULT '', created_ms INTEGER NOT NULL, next_attempt_ms INTEGER NOT NULL,
                    expires_ms INTEGER NOT NULL, done_ms INTEGER NOT NULL DEFAULT 0
                );
                CREATE INDEX email_outbox_due ON email_outbox(next_attempt_ms) WHERE status = 1;
                CREATE INDEX email_outbox_user ON email_outbox(user_id);
                CREATE TABLE sent_emails (
                    idempotency_key TEXT PRIMARY KEY, provider TEXT NOT NULL, address TEXT NOT NULL, subject TEXT NOT NULL,
                    body TEXT NOT NULL, sent_at_ms INTEGER NOT NULL
                );
                """)
        }
    }

    static func enqueueEmail(_ db: Database, user: UInt64, to address: String, subject: String, body: String, now: Int64, expires: Int64) throws {
        try db.run(sql: """
            INSERT INTO email_outbox (user_id, address, subject, body, status, created_ms, next_attempt_ms, expires_ms) VALUES (?, ?, ?, ?, ?, ?, ?, ?)
            """, arguments: [user, address, subject, body, EmailStatus.pending, now, now, expires])
    }

    /// The emails due, 50 at a time, found by the partial index of the pending ones and sorted:
    /// with `ORDER BY id` (no `+`) SQLite walked the whole outbox in id order, every email ever
    /// sent, once a second in a write transaction (`EmailOutboxPlanTests`; `docs/benchmarks.md`,
    /// issue 16, item 152). The pending status is in the text, as on PostgreSQL (item 155): the
    /// partial index's `status = 1` is then matched by the statement itself, not by SQLite
    /// preparing it again once a value is bound.
    static let dueEmailsSQL = "SELECT id, address, subject, body FROM email_outbox WHERE status = \(EmailStatus.pending) AND next_attempt_ms <= ? ORDER BY +id LIMIT 50"
    /// Past its expiry, an email is not worth sending: failed for good (the same index).
    static let expireEmailsSQL = """
        UPDATE email_outbox SET status = ?, body = '', last_error = 'expired before it could be sent', done_ms = ?
        WHERE status = \(EmailStatus.pending) AND expires_ms <= ?
        """

    func dueEmails(now: Int64) async throws -> [EmailMessage] {
        try await database.write { db in
            try db.run(sql: Self.expireEmailsSQL, arguments: [EmailStatus.failed, now, now])
            return try Row.fetchAll(db, sql: Self.dueEmailsSQL, arguments: [now]) { row in
                let id: UInt64 = try row[0]
                return try EmailMessage(deliveryID: id, idempotencyKey: "frienso-email-\(id)", to: row[1], subject: row[2], body: row[3])
            }
        }
    }

    func emailSent(_ id: UInt64, provider: String, reference: String, now: Int64) async throws {
        try await database.write { db in
            try db.run(sql: "UPDATE email_outbox SET status = ?, body = '', provider = ?, reference = ?, attempts = attempts + 1, done_ms = ? WHERE id = ?",
                       arguments: [EmailStatus.sent, provider, reference, now, id])
        }
    }

    func emailFailed(_ id: UInt64, error: String, final: Bool, now: Int64) async throws {
        try await database.write { db in
            let attempts = (try Int.fetchOne(db, sql: "SELECT attempts FROM email_outbox WHERE id = ?", arguments: [id]) ?? 0) + 1
            let delay = Int64(min(60_000, 1_000 << min(attempts, 6)))
            try db.run(sql: """
                UPDATE email_outbox SET attempts = ?, last_error = ?, next_attempt_ms = ?, status = ?, body = CASE WHEN ? THEN '' ELSE body END,
                    done_ms = CASE WHEN ? THEN ? ELSE 0 END WHERE id = ?
                """, arguments: [attempts, error, now + delay, final ? EmailStatus.failed : EmailStatus.pending, final, final, now, id])
        }
    }

    func recordSentEmail(_ message: EmailMessage, at: Int64) async throws {
        try await database.write { db in
            try db.run(sql: "INSERT OR IGNORE INTO sent_emails (idempotency_key, provider, address, subject, body, sent_at_ms) VALUES (?, ?, ?, ?, ?, ?)",
                       arguments: [message.idempotencyKey, "recording", message.to, message.subject, message.body, at])
        }
    }

    func recordedEmailBodies(to address: String) async throws -> [String] {
        try await database.read { db in
            try String.fetchAll(db, sql: "SELECT body FROM sent_emails WHERE address = ? ORDER BY sent_at_ms, idempotency_key", arguments: [address])
        }
    }

    // MARK: Retention

    /// The recording provider's copies are pruned by time (`pruneEmails`); one index write per
    /// email recorded, against a walk of every copy each hour.
    static func migrateEmailRetention(_ migrator: inout DatabaseMigrator) {
        migrator.registerMigration("email_retention") { db in
            try db.execute(sql: "CREATE INDEX sent_emails_at ON sent_emails(sent_at_ms)")
        }
    }

    /// The hourly prune of emails done (sent, or failed for good) before `?1`, below the first
    /// email queued since (`Retention.pruneSQL`, as alerts' outbox).
    static let pruneEmailsSQL = Retention.pruneSQL("email_outbox", madeAt: "created_ms", where: "status != \(EmailStatus.pending) AND done_ms < ?1")
    static let pruneSentEmailsSQL = "DELETE FROM sent_emails WHERE sent_at_ms < ?"

    func pruneEmails(before cutoff: Int64) async throws -> Int {
        try await database.write { db in
            try db.run(sql: Self.pruneEmailsSQL, arguments: [cutoff])
            let deleted = db.changesCount
            try db.run(sql: Self.pruneSentEmailsSQL, arguments: [cutoff])
            return deleted + db.changesCount
        }
    }
}
