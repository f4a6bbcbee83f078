import Foundation
import FriensoProto
import Logging
import PostgresNIO
import Storage
import Wire

/// Check-in timers and grants on PostgreSQL.
extension PostgresAlertsStore {
    // MARK: Check-in timers

    func timers(_ connection: PostgresConnection, _ query: PostgresQuery) async throws -> [TimerRecord] {
        var timers: [TimerRecord] = []
        for try await (id, owner, note, state, started, due, warn, warned, ended, alert, pin, failures) in try await connection.query(query, logger: logger)
            .decode((Int64, Int64, String, Int64, Int64, Int64, Int64, Int64, Int64, Int64, Data?, Int64).self) {
            timers.append(TimerRecord(id: UInt64(id), owner: UInt64(owner), note: note, state: AlertsV1.TimerState(rawValue: Self.raw(state)),
                                      startedMs: started, dueMs: due, warnMs: warn, warnedMs: warned, endedMs: ended, alertID: UInt64(alert),
                                      pinHash: pin, failures: Int(failures)))
        }
        return timers
    }

    func timers(_ query: PostgresQuery) async throws -> [TimerRecord] {
        try await database.read { connection in try await timers(connection, query) }
    }

    func timer(owner: UInt64, key: String) async throws -> TimerRecord? {
        try await timers("SELECT \(unescaped: RecordColumns.timer) FROM timers WHERE owner = \(Int64(owner)) AND idempotency_key = \(key)").first
    }

    func activeTimer(of owner: UInt64) async throws -> TimerRecord? {
        try await timers("SELECT \(unescaped: RecordColumns.timer) FROM timers WHERE owner = \(Int64(owner)) AND state = 1").first
    }

    func latestTimer(of owner: UInt64) async throws -> TimerRecord? {
        try await timers("""
            SELECT \(unescaped: RecordColumns.timer) FROM timers WHERE owner = \(Int64(owner)) ORDER BY state = 1 DESC, id DESC LIMIT 1
            """).first
    }

    func startTimer(_ new: NewTimer) async throws -> TimerRecord {
        do {
            return try await database.write { connection in
                guard let timer = try await timers(connection, """
                    INSERT INTO timers (owner, note, state, started_ms, due_ms, warn_ms, pin_hash, idempotency_key)
                    VALUES (\(Int64(new.owner)), \(new.note), 1, \(new.at), \(new.dueMs), \(new.warnMs), \(new.pinHash), \(new.key))
                    RETURNING \(unescaped: RecordColumns.timer)
                    """).first else { throw StoreInvariant("the timer just written is missing") }
                return timer
            }
        } catch where Self.isSecondActive(error) {
            throw AlertsConflict.alreadyActive
        }
    }

    func changeTimer(id: UInt64, at: Int64, _ decide: @escaping @Sendable (TimerRecord?) throws -> TimerChange?)
        async throws -> (record: TimerRecord, change: TimerChange)? {
        try await database.write { connection in
            let key = Int64(id)
            let timer = try await timers(connection, "SELECT \(unescaped: RecordColumns.timer) FROM timers WHERE id = \(key) FOR UPDATE").first
            guard let change = try decide(timer), timer != nil else { return nil }
            if let end = change.end {
                try await connection.query("""
                    UPDATE timers SET state = \(Int64(end.rawValue)), ended_ms = \(at), alert_id = \(Int64(change.alertID)) WHERE id = \(key)
                    """, logger: logger)
            }
            if change.warned { try await connection.query("UPDATE timers SET warned_ms = \(at) WHERE id = \(key)", logger: logger) }
            if change.failedTry { try await connection.query("UPDATE timers SET failures = failures + 1 WHERE id = \(key)", logger: logger) }
            try await enqueue(connection, change.messages, now: at)
            guard let record = try await timers(connection, "SELECT \(unescaped: RecordColumns.timer) FROM timers WHERE id = \(key)").first else {
                throw StoreInvariant("the timer just changed is missing")
            }
            return (record, change)
        }
    }

    func dueTimers(at: Int64) async throws -> (warn: [TimerRecord], fire: [TimerRecord]) {
        try await database.snapshot { connection in
            (try await timers(connection, """
                SELECT \(unescaped: RecordColumns.timer) FROM timers WHERE state = 1 AND warned_ms = 0 AND warn_ms <= \(at) AND due_ms > \(at) ORDER BY id
                """),
             try await timers(connection, "SELECT \(unescaped: RecordColumns.timer) FROM timers WHERE state = 1 AND due_ms <= \(at) ORDER BY id"))
        }
    }

    func nextTimerAt() async throws -> Int64? {
        try await database.read { connection in
            try await PostgresServiceDatabase.first(connection.query(
                "SELECT min(CASE WHEN warned_ms = 0 THEN warn_ms ELSE due_ms END) FROM timers WHERE state = 1", logger: logger), Int64?.self) ?? nil
        }
    }

    // MARK: Grants

    /// Sets `grant` with the next version (the `grant_versions` sequence: increasing across
    /// instances; a number taken by a transaction that rolled back is skipped). - Returns: the
    /// grant as set.
    func setGrant(_ connection: PostgresConnection, _ grant: GrantRecord) async throws -> GrantRecord {
        guard let version = try await PostgresServiceDatabase.first(connection.query("""
            INSERT INTO grants (subject, viewer, reason, expires_ms, version)
            VALUES (\(Int64(grant.subject)), \(Int64(grant.viewer)), \(grant.reason), \(grant.expiresMs), nextval('grant_versions'))
            ON CONFLICT (subject, viewer, reason) DO UPDATE SET expires_ms = excluded.expires_ms, version = excluded.version
            RETURNING version
            """, logger: logger), Int64.self) else { throw StoreInvariant("the grant just set has no version") }
        var set = grant
        set.version = version
        return set
    }

    func grantsToPublish(now: Int64, keepRevoked: Int64) async throws -> [GrantRecord] {
        try await database.transaction { connection in
            try await connection.query("DELETE FROM grants WHERE expires_ms < \(now - keepRevoked)", logger: logger)
            var grants: [GrantRecord] = []
            for try await (subject, viewer, reason, expires, version) in try await connection.query(
                "SELECT subject, viewer, reason, expires_ms, version FROM grants", logger: logger).decode((Int64, Int64, String, Int64, Int64).self) {
                grants.append(GrantRecord(subject: UInt64(subject), viewer: UInt64(viewer), reason: reason, expiresMs: expires, version: version))
            }
            return grants
        }
    }
}
