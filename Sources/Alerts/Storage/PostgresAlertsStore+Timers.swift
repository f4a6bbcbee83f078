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
        for try await (id, owner, note, state, started, due, warn, warned, ended, alert, pin, failures) in try await connection.prepared(query, logger: logger)
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
                try await connection.prepared("""
                    UPDATE timers SET state = \(Int64(end.rawValue)), ended_ms = \(at), alert_id = \(Int64(change.alertID)) WHERE id = \(key)
                    """, logger: logger)
            }
            if change.warned { try await connection.prepared("UPDATE timers SET warned_ms = \(at) WHERE id = \(key)", logger: logger) }
            if change.failedTry { try await connection.prepared("UPDATE timers SET failures = failures + 1 WHERE id = \(key)", logger: logger) }
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
            try await PostgresServiceDatabase.first(connection.prepared(
                "SELECT min(CASE WHEN warned_ms = 0 THEN warn_ms ELSE due_ms END) FROM timers WHERE state = 1", logger: logger), Int64?.self) ?? nil
        }
    }

    // MARK: Grants

    /// Sets `grant` with the next version (the `grant_versions` sequence: increasing across
    /// instances; a number taken by a transaction that rolled back is skipped). - Returns: the
    /// grant as set.
    /// Sets `grants` in one statement (one round trip to the server, not one per grant:
    /// `docs/benchmarks.md`, issue 16, item 125), each with the next version, in their order.
    /// - Returns: them as set (with their versions), in the same order.
    func setGrants(_ connection: PostgresConnection, _ grants: [GrantRecord]) async throws -> [GrantRecord] {
        // One key twice in a statement is an error for `ON CONFLICT DO UPDATE`: such a list (none
        // that a change makes) is set one grant at a time, the later winning, as it always was.
        struct Key: Hashable { var subject: UInt64, viewer: UInt64, reason: String }
        let keys = grants.map { Key(subject: $0.subject, viewer: $0.viewer, reason: $0.reason) }
        guard grants.count > 1, Set(keys).count == keys.count else {
            var set: [GrantRecord] = []
            for grant in grants { set.append(try await setGrant(connection, grant)) }
            return set
        }
        var versions: [Key: Int64] = [:]
        for try await (subject, viewer, reason, version) in try await connection.prepared("""
            INSERT INTO grants (subject, viewer, reason, expires_ms, version)
            SELECT s, v, r, e, nextval('grant_versions')
            FROM unnest(\(grants.map { Int64($0.subject) })::bigint[], \(grants.map { Int64($0.viewer) })::bigint[],
                        \(grants.map(\.reason))::text[], \(grants.map(\.expiresMs))::bigint[]) AS g(s, v, r, e)
            ON CONFLICT (subject, viewer, reason) DO UPDATE SET expires_ms = excluded.expires_ms, version = excluded.version
            RETURNING subject, viewer, reason, version
            """, logger: logger).decode((Int64, Int64, String, Int64).self) {
            versions[Key(subject: UInt64(subject), viewer: UInt64(viewer), reason: reason)] = version
        }
        return try zip(grants, keys).map { grant, key in
            guard let version = versions[key] else { throw StoreInvariant("the grant just set has no version") }
            var set = grant
            set.version = version
            return set
        }
    }

    func setGrant(_ connection: PostgresConnection, _ grant: GrantRecord) async throws -> GrantRecord {
        guard let version = try await PostgresServiceDatabase.first(connection.prepared("""
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
            try await connection.prepared("DELETE FROM grants WHERE expires_ms < \(now - keepRevoked)", logger: logger)
            var grants: [GrantRecord] = []
            for try await (subject, viewer, reason, expires, version) in try await connection.prepared(
                "SELECT subject, viewer, reason, expires_ms, version FROM grants", logger: logger).decode((Int64, Int64, String, Int64, Int64).self) {
                grants.append(GrantRecord(subject: UInt64(subject), viewer: UInt64(viewer), reason: reason, expiresMs: expires, version: version))
            }
            return grants
        }
    }
}
