import FriensoProto
import Foundation
import Identity
import Logging
import NIOCore
import PostgresNIO
import Storage
import Wire

/// The email outbox on PostgreSQL (the SQLite side: `Email.swift`).
extension PostgresAccountsStore {
    func dueEmails(now: Int64) async throws -> [EmailMessage] {
        try await database.transaction { connection in
            try await connection.prepared(Self.expireEmails(now: now), logger: logger)
            var due: [EmailMessage] = []
            let rows = try await connection.prepared(Self.dueEmails(now: now), logger: logger)
            for try await (id, address, subject, body) in rows.decode((Int64, String, String, String).self) {
                due.append(EmailMessage(deliveryID: UInt64(id), idempotencyKey: "frienso-email-\(id)", to: address, subject: subject, body: body))
            }
            return due
        }
    }

    /// The worker's two statements (once a second, in one transaction). The pending status is
    /// written into the text, not bound: after five runs of a prepared statement PostgreSQL may
    /// keep a generic plan, which cannot prove `status = $1` implies the partial index's
    /// `status = 1`; these then walked the whole outbox (every email ever kept: 67 and 86 ms at
    /// 1M; `EmailOutboxPlanTests`; `docs/benchmarks.md`, issue 16, item 155).
    static func expireEmails(now: Int64) -> PostgresQuery {
        """
        UPDATE email_outbox SET status = \(EmailStatus.failed), body = '', last_error = 'expired before it could be sent', done_ms = \(now)
        WHERE status = \(unescaped: String(EmailStatus.pending)) AND expires_ms <= \(now)
        """
    }

    static func dueEmails(now: Int64) -> PostgresQuery {
        """
        SELECT id, address, subject, body FROM email_outbox WHERE status = \(unescaped: String(EmailStatus.pending)) AND next_attempt_ms <= \(now)
        ORDER BY id LIMIT 50
        """
    }

    /// The hourly prune's statements, as on SQLite (`SQLiteAccountsStore.pruneEmailsSQL`): the
    /// outbox read from the oldest id up to the first email queued since `cutoff`, the recording
    /// provider's copies through their index by time.
    static func pruneEmails(before cutoff: Int64) -> PostgresQuery {
        """
        DELETE FROM email_outbox
        WHERE id < COALESCE((SELECT id FROM email_outbox WHERE created_ms >= \(cutoff) ORDER BY id LIMIT 1), \(unescaped: String(Int64.max)))
          AND status != \(unescaped: String(EmailStatus.pending)) AND done_ms < \(cutoff)
        RETURNING 1
        """
    }

    static func pruneSentEmails(before cutoff: Int64) -> PostgresQuery {
        "DELETE FROM sent_emails WHERE sent_at_ms < \(cutoff) RETURNING 1"
    }

    func pruneEmails(before cutoff: Int64) async throws -> Int {
        try await database.transaction { connection in
            try await PostgresServiceDatabase.count(connection.prepared(Self.pruneEmails(before: cutoff), logger: logger))
                + PostgresServiceDatabase.count(connection.prepared(Self.pruneSentEmails(before: cutoff), logger: logger))
        }
    }

    func emailSent(_ id: UInt64, provider: String, reference: String, now: Int64) async throws {
        try await database.transaction { connection in
            try await connection.prepared("""
                UPDATE email_outbox SET status = \(EmailStatus.sent), body = '', provider = \(provider), reference = \(reference),
                    attempts = attempts + 1, done_ms = \(now) WHERE id = \(Int64(id))
                """, logger: logger)
        }
    }

    func emailFailed(_ id: UInt64, error: String, final: Bool, now: Int64) async throws {
        try await database.transaction { connection in
            let attempts = try await Self.int(connection.prepared("SELECT attempts FROM email_outbox WHERE id = \(Int64(id))", logger: logger)) + 1
            let delay = Int64(min(60_000, 1_000 << min(attempts, 6)))
            let status = final ? EmailStatus.failed : EmailStatus.pending
            try await connection.prepared("""
                UPDATE email_outbox SET attempts = \(attempts), last_error = \(error), next_attempt_ms = \(now + delay), status = \(status),
                    body = CASE WHEN \(final) THEN '' ELSE body END, done_ms = CASE WHEN \(final) THEN \(now) ELSE 0 END
                WHERE id = \(Int64(id))
                """, logger: logger)
        }
    }

    func recordSentEmail(_ message: EmailMessage, at: Int64) async throws {
        try await database.transaction { connection in
            try await connection.prepared("""
                INSERT INTO sent_emails (idempotency_key, provider, address, subject, body, sent_at_ms)
                VALUES (\(message.idempotencyKey), 'recording', \(message.to), \(message.subject), \(message.body), \(at))
                ON CONFLICT DO NOTHING
                """, logger: logger)
        }
    }

    func recordedEmailBodies(to address: String) async throws -> [String] {
        try await database.read { connection in
            var bodies: [String] = []
            let rows = try await connection.prepared(
                "SELECT body FROM sent_emails WHERE address = \(address) ORDER BY sent_at_ms, idempotency_key COLLATE \"C\"", logger: logger)
            for try await body in rows.decode(String.self) { bodies.append(body) }
            return bodies
        }
    }
}
