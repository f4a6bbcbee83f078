import FriensoProto
import GRDB
import Storage

/// What the maintenance pass reads each time it runs (at least once a second): the watches,
/// escalations and timers due, and when the next of each is.
extension SQLiteAlertsStore {
    func dueWatches(at: Int64) async throws -> [WatchRecord] {
        try await database.read { db in try Self.watches(db, Self.dueWatchesSQL, [at]) }
    }

    /// Each read of what is due orders by `+id`: with `ORDER BY id` SQLite walked the whole table
    /// in id order (every alert, timer and watch ever kept) rather than search the partial index
    /// of the active rows and sort those few (`MaintenanceQueryPlanTests`; `docs/benchmarks.md`,
    /// issue 16, item 152).
    static let dueWatchesSQL = "SELECT id FROM watch_sessions WHERE state = 1 AND ends_at_ms <= ? ORDER BY +id"
    static let escalationsDueSQL = """
        SELECT id FROM help_alerts a WHERE state = 1 AND escalated_at_ms = 0 AND raised_at_ms <= ?
          AND NOT EXISTS (SELECT 1 FROM recipients r WHERE r.alert_id = a.id AND r.answer = ?)
        ORDER BY +id
        """
    static let timersToWarn = "state = 1 AND warned_ms = 0 AND warn_ms <= ? AND due_ms > ? ORDER BY +id"
    static let timersToFire = "state = 1 AND due_ms <= ? ORDER BY +id"

    func nextWatchExpiry() async throws -> Int64? {
        try await database.read { db in try Int64.fetchOne(db, cached: "SELECT MIN(ends_at_ms) FROM watch_sessions WHERE state = 1") }
    }

    func escalationsDue(raisedBy: Int64) async throws -> [UInt64] {
        try await database.read { db in
            try UInt64.fetchAll(db, cached: Self.escalationsDueSQL, arguments: [raisedBy, AlertsV1.Answer.accepted.rawValue])
        }
    }

    func oldestUnescalated() async throws -> Int64? {
        try await database.read { db in
            try Int64.fetchOne(db, cached: """
                SELECT MIN(raised_at_ms) FROM help_alerts a WHERE state = 1 AND escalated_at_ms = 0
                  AND NOT EXISTS (SELECT 1 FROM recipients r WHERE r.alert_id = a.id AND r.answer = ?)
                """, arguments: [AlertsV1.Answer.accepted.rawValue])
        }
    }

    func dueTimers(at: Int64) async throws -> (warn: [TimerRecord], fire: [TimerRecord]) {
        try await database.read { db in
            (try Self.timers(db, Self.timersToWarn, [at, at]), try Self.timers(db, Self.timersToFire, [at]))
        }
    }

    func nextTimerAt() async throws -> Int64? {
        try await database.read { db in
            try Int64.fetchOne(db, cached: "SELECT MIN(CASE WHEN warned_ms = 0 THEN warn_ms ELSE due_ms END) FROM timers WHERE state = 1")
        }
    }

    /// The hourly prune of deliveries ended before `?1` (`Retention.pruneSQL`: below the first
    /// delivery made since). Without the bound it walked the whole outbox, 90 days of deliveries,
    /// in the single writer and in the loop that escalates alerts (issue 16, item 157).
    static let pruneOutboxSQL = Retention.pruneSQL(
        "outbox", madeAt: "created_at_ms", where: "status != \(AlertsV1.DeliveryStatus.pending.rawValue) AND updated_at_ms < ?1")
    /// The built-in providers' record of what they sent, likewise (rowids grow with time).
    static let pruneSentSQL = Retention.pruneSQL("sent_messages", id: "rowid", madeAt: "sent_at_ms", where: "sent_at_ms < ?1")

    func pruneOutbox(before cutoff: Int64) async throws -> Int {
        try await database.write { db in
            try db.run(sql: Self.pruneOutboxSQL, arguments: [cutoff])
            let deleted = db.changesCount
            try db.run(sql: Self.pruneSentSQL, arguments: [cutoff])
            return deleted
        }
    }
}
