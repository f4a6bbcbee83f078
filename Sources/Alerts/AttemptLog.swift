import FriensoProto
import GRDB
import Storage

/// The attempt log: every attempt to hand a delivery to its provider (see `DeliveryPass`).
extension AlertsStore {
    /// The provider's message id (`reference`) on each delivery, and every attempt to hand one
    /// over: when, to which provider, and what it answered (its id, or its error and Retry-After).
    static func migrateAttempts(_ migrator: inout DatabaseMigrator) {
        migrator.registerMigration("delivery_attempts") { db in
            try db.execute(sql: """
                ALTER TABLE outbox ADD COLUMN reference TEXT NOT NULL DEFAULT '';
                CREATE TABLE delivery_attempts (
                    delivery_id INTEGER NOT NULL REFERENCES outbox(id) ON DELETE CASCADE,
                    attempt INTEGER NOT NULL,
                    started_ms INTEGER NOT NULL,
                    finished_ms INTEGER NOT NULL DEFAULT 0,
                    provider TEXT NOT NULL,
                    outcome INTEGER NOT NULL,
                    reference TEXT NOT NULL DEFAULT '',
                    error TEXT NOT NULL DEFAULT '',
                    retry_after_ms INTEGER NOT NULL DEFAULT 0,
                    PRIMARY KEY (delivery_id, attempt)
                ) WITHOUT ROWID;
                CREATE INDEX delivery_attempts_sending ON delivery_attempts(delivery_id) WHERE outcome = 1;
                """)
        }
    }

    /// Attempts still SENDING belong to a pass that never finished (alerts stopped mid-pass):
    /// they become INTERRUPTED, and the message may have gone out.
    static func interruptAttempts(_ db: Database, at: Int64) throws {
        // `outcome = 1` written out (SENDING), not bound: SQLite uses a partial index only for
        // the literal its WHERE names, and this runs before every batch.
        try db.run(sql: "UPDATE delivery_attempts SET outcome = ?, finished_ms = ?, error = 'alerts stopped before the provider answered' WHERE outcome = 1",
                   arguments: [AlertsV1.AttemptOutcome.interrupted.rawValue, at])
    }

    static func beginAttempt(_ db: Database, delivery: UInt64, provider: String, at: Int64) throws {
        try db.run(sql: """
            INSERT INTO delivery_attempts (delivery_id, attempt, started_ms, provider, outcome)
            VALUES (?1, (SELECT COALESCE(MAX(attempt), 0) + 1 FROM delivery_attempts WHERE delivery_id = ?1), ?2, ?3, ?4)
            """, arguments: [delivery, at, provider, AlertsV1.AttemptOutcome.sending.rawValue])
    }

    /// Records the answer on the attempt begun for it (`begun`), or, for a provider that logs
    /// nothing before sending, as a new attempt.
    static func finishAttempt(_ db: Database, delivery: UInt64, provider: String, result: DeliveryResult, at: Int64, begun: Bool) throws {
        var (reference, error, retryAfter) = ("", "", Int64(0))
        switch result {
        case .delivered(let r): reference = r
        case .failed(let e, _), .deadAddress(let e): error = e
        case .retryAfter(let e, let after): (error, retryAfter) = (e, after.wholeMilliseconds)
        }
        let outcome = result.outcome.rawValue
        if begun {
            try db.run(sql: """
                UPDATE delivery_attempts SET outcome = ?, finished_ms = ?, reference = ?, error = ?, retry_after_ms = ?
                WHERE delivery_id = ? AND outcome = 1
                """, arguments: [outcome, at, reference, error, retryAfter, delivery])
            guard db.changesCount == 0 else { return }
        }
        try db.run(sql: """
            INSERT INTO delivery_attempts (delivery_id, attempt, started_ms, finished_ms, provider, outcome, reference, error, retry_after_ms)
            VALUES (?1, (SELECT COALESCE(MAX(attempt), 0) + 1 FROM delivery_attempts WHERE delivery_id = ?1), ?2, ?2, ?3, ?4, ?5, ?6, ?7)
            """, arguments: [delivery, at, provider, outcome, reference, error, retryAfter])
    }

    static func attempts(_ db: Database, of delivery: UInt64) throws -> [AlertsV1.DeliveryAttempt] {
        try Row.fetchAll(db, cached: """
            SELECT attempt, started_ms, finished_ms, provider, outcome, reference, error, retry_after_ms FROM delivery_attempts
            WHERE delivery_id = ? ORDER BY attempt
            """, arguments: [delivery]).map {
            AlertsV1.DeliveryAttempt(attempt: $0[0], startedAtMs: $0[1], finishedAtMs: $0[2], provider: $0[3],
                                     outcome: AlertsV1.AttemptOutcome(rawValue: $0[4]), reference: $0[5], error: $0[6], retryAfterMs: $0[7])
        }
    }

    /// Deletes what the outbox no longer needs: deliveries that ended (delivered, failed,
    /// skipped) before `cutoff` with their attempts (`ON DELETE CASCADE`), and the built-in
    /// recorders' copies of messages sent before it. Pending deliveries are never touched.
    /// - Returns: outbox rows deleted.
    func pruneOutbox(before cutoff: Int64) async throws -> Int {
        try await database.write { db in
            try db.run(sql: "DELETE FROM outbox WHERE status != ? AND updated_at_ms < ?",
                       arguments: [AlertsV1.DeliveryStatus.pending.rawValue, cutoff])
            let deleted = db.changesCount
            try db.run(sql: "DELETE FROM sent_messages WHERE sent_at_ms < ?", arguments: [cutoff])
            return deleted
        }
    }
}
