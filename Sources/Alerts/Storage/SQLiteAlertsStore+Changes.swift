import Foundation
import FriensoProto
import GRDB
import Storage
import Wire

/// Watch sessions, helpNow alerts and check-in timers on SQLite.
extension SQLiteAlertsStore {
    // MARK: Watch sessions

    static func watch(_ db: Database, id: UInt64) throws -> WatchRecord? {
        guard var watch = try Row.fetchOne(db, cached: "SELECT \(RecordColumns.watch) FROM watch_sessions WHERE id = ?", binding: id, as: { row in
            try WatchRecord(id: row[0], initiator: row[1], note: row[2], state: AlertsV1.WatchState(rawValue: row[3]), startedAtMs: row[4],
                        endsAtMs: row[5], endedAtMs: row[6], watchers: [])
        }) else { return nil }
        watch.watchers = try Row.fetchAll(db, cached: "SELECT watcher, answer, answered_at_ms FROM watchers WHERE session_id = ? ORDER BY position",
                                          binding: id) { try WatcherRecord(user: $0[0], answer: AlertsV1.Answer(rawValue: $0[1]), answeredAtMs: $0[2]) }
        return watch
    }

    static func watches(_ db: Database, _ sql: String, _ arguments: StatementArguments) throws -> [WatchRecord] {
        try UInt64.fetchAll(db, cached: sql, arguments: arguments).compactMap { try watch(db, id: $0) }
    }

    func watch(initiator: UInt64, key: String) async throws -> WatchRecord? {
        try await database.read { db in
            try Self.watches(db, "SELECT id FROM watch_sessions WHERE initiator = ? AND idempotency_key = ?", [initiator, key]).first
        }
    }

    func activeWatch(of user: UInt64) async throws -> WatchRecord? {
        try await database.read { db in try Self.watches(db, "SELECT id FROM watch_sessions WHERE initiator = ? AND state = 1", [user]).first }
    }

    func latestWatch(of user: UInt64) async throws -> WatchRecord? {
        try await database.read { db in
            try Self.watches(db, "SELECT id FROM watch_sessions WHERE initiator = ? ORDER BY id DESC LIMIT 1", [user]).first
        }
    }

    func watching(_ user: UInt64) async throws -> [WatchRecord] {
        try await database.read { db in
            try Self.watches(db, """
                SELECT s.id FROM watchers w JOIN watch_sessions s ON s.id = w.session_id WHERE w.watcher = ? AND s.state = 1 ORDER BY s.id DESC
                """, [user])
        }
    }

    func startWatch(_ new: NewWatch) async throws -> WatchRecord {
        do {
            return try await database.write { db in
                try db.run(sql: """
                    INSERT INTO watch_sessions (initiator, note, state, started_at_ms, ends_at_ms, idempotency_key) VALUES (?, ?, 1, ?, ?, ?)
                    """, binding: new.initiator, new.note, new.at, new.endsAtMs, new.key)
                let id = UInt64(db.lastInsertedRowID)
                for (position, watcher) in new.watchers.enumerated() {
                    try db.run(sql: "INSERT INTO watchers (session_id, watcher, position, answer) VALUES (?, ?, ?, ?)",
                               binding: id, watcher, position, AlertsV1.Answer.pending.rawValue)
                }
                try Self.enqueue(db, new.messages(id), now: new.at)
                guard let record = try Self.watch(db, id: id) else { throw StoreInvariant("the watch just written is missing") }
                return record
            }
        } catch let error as DatabaseError where error.resultCode == .SQLITE_CONSTRAINT {
            throw AlertsConflict.alreadyActive
        }
    }

    func changeWatch(_ target: RowTarget, at: Int64, _ decide: @escaping @Sendable (WatchRecord?) throws -> WatchChange?)
        async throws -> (record: WatchRecord, change: WatchChange)? {
        try await database.write { db in
            let session = switch target {
            case .id(let id): try Self.watch(db, id: id)
            case .activeOf(let user): try Self.watches(db, "SELECT id FROM watch_sessions WHERE initiator = ? AND state = 1", [user]).first
            }
            guard var change = try decide(session), let session else { return nil }
            if let end = change.end {
                try db.run(sql: "UPDATE watch_sessions SET state = ?, ended_at_ms = ? WHERE id = ?", binding: end.rawValue, at, session.id)
            }
            if let ends = change.endsAtMs {
                try db.run(sql: "UPDATE watch_sessions SET ends_at_ms = ? WHERE id = ?", binding: ends, session.id)
            }
            if let watcher = change.watcher {
                if let answer = watcher.answer {
                    try db.run(sql: "UPDATE watchers SET answer = ?, answered_at_ms = ?, dismissed = 0 WHERE session_id = ? AND watcher = ?",
                               binding: answer.rawValue, at, session.id, watcher.user)
                } else {
                    try db.run(sql: "UPDATE watchers SET dismissed = 1 WHERE session_id = ? AND watcher = ?", binding: session.id, watcher.user)
                }
            }
            change.grants = try change.grants.map { try Self.setGrant(db, $0) }
            try Self.enqueue(db, change.messages, now: at)
            guard let record = try Self.watch(db, id: session.id) else { throw StoreInvariant("the watch just changed is missing") }
            return (record, change)
        }
    }

    // MARK: helpNow alerts

    static func alert(_ db: Database, id: UInt64) throws -> AlertRecord? {
        // Each row decoded where the statement holds it (item 116): the alert first, its parts after.
        guard var alert = try Row.fetchOne(db, cached: """
            SELECT id, initiator, message, location, state, raised_at_ms, resolved_at_ms, resolved_by FROM help_alerts WHERE id = ?
            """, binding: id, as: { row in
                try AlertRecord(id: row[0], initiator: row[1], message: row[2], location: AlertsV1.AlertLocation.stored(row[3]),
                            state: AlertsV1.AlertState(rawValue: row[4]), raisedAtMs: row[5], resolvedAtMs: row[6], resolvedBy: row[7],
                            recipients: [], prompt: AlertsV1.EmergencyPrompt(), escalation: nil)
            }) else { return nil }
        alert.recipients = try Row.fetchAll(db, cached: "SELECT user_id, phone, answer, answered_at_ms FROM recipients WHERE alert_id = ? ORDER BY position",
                                            binding: id) {
            try RecipientRecord(user: $0[0], phone: $0[1], answer: AlertsV1.Answer(rawValue: $0[2]), answeredAtMs: $0[3])
        }
        let location = alert.location
        if let prompt = try Row.fetchOne(db, cached: """
            SELECT id, number, label, created_at_ms, reported, dialed, reported_at_ms FROM emergency_prompts WHERE alert_id = ?
            """, binding: id, as: { p in
                try AlertsV1.EmergencyPrompt(promptId: p[0], number: p[1], label: p[2], location: location, createdAtMs: p[3],
                                         reported: p[4], dialed: p[5], reportedAtMs: p[6])
            }) {
            alert.prompt = prompt
        }
        alert.escalation = try Row.fetchOne(db, cached: "SELECT number, label, location, created_at_ms, resent_to FROM escalations WHERE alert_id = ?",
                                            binding: id) {
            try AlertsV1.Escalation(escalatedAtMs: $0[3], number: $0[0], label: $0[1],
                                location: AlertsV1.AlertLocation.stored($0[2]),
                                resentTo: $0[4])
        }
        alert.deliveries = try summaries(db, source: AlertRecord.source(id))
        return alert
    }

    static func alerts(_ db: Database, _ sql: String, _ arguments: StatementArguments) throws -> [AlertRecord] {
        try UInt64.fetchAll(db, cached: sql, arguments: arguments).compactMap { try alert(db, id: $0) }
    }

    func alertMeetingRaise(by user: UInt64, key: String) async throws -> (alert: AlertRecord, retry: Bool)? {
        try await database.read { db in
            guard let (id, retry) = try Self.meetingRaise(db, by: user, key: key), let alert = try Self.alert(db, id: id) else { return nil }
            return (alert, retry)
        }
    }

    /// The alert raised with the key (when there is one), else the active one: two index searches
    /// (`help_alerts_by_key`, then `help_one_active`), whatever the number of alerts the person
    /// raised before. `FRIENSO_RAISE_LOOKUP=scan` reads it with the one query of before item 96,
    /// which walked them all (A/B runs only).
    static func meetingRaise(_ db: Database, by user: UInt64, key: String) throws -> (id: UInt64, retry: Bool)? {
        if scansForRaise {
            return try Row.fetchOne(db, cached: meetingRaiseByScan, binding: user, key) { try ($0[0], $0[1]) }
        }
        if !key.isEmpty, let id = try UInt64.fetchOne(db, cached: raisedWithKey, arguments: [user, key]) { return (id, true) }
        return try UInt64.fetchOne(db, cached: activeOf, arguments: [user]).map { ($0, false) }
    }

    static let raisedWithKey = "SELECT id FROM help_alerts WHERE initiator = ? AND idempotency_key = ?"
    static let activeOf = "SELECT id FROM help_alerts WHERE initiator = ? AND state = 1"
    static let meetingRaiseByScan = """
        SELECT id, (?2 <> '' AND idempotency_key = ?2) AS retry FROM help_alerts
        WHERE initiator = ?1 AND ((?2 <> '' AND idempotency_key = ?2) OR state = 1) ORDER BY retry DESC LIMIT 1
        """
    static let scansForRaise = ProcessInfo.processInfo.environment["FRIENSO_RAISE_LOOKUP"] == "scan"

    func alert(id: UInt64) async throws -> AlertRecord? {
        try await database.read { db in try Self.alert(db, id: id) }
    }

    func activeAlert(of user: UInt64) async throws -> AlertRecord? {
        try await database.read { db in try Self.alerts(db, "SELECT id FROM help_alerts WHERE initiator = ? AND state = 1", [user]).first }
    }

    func latestAlert(of user: UInt64) async throws -> AlertRecord? {
        try await database.read { db in
            try Self.alerts(db, "SELECT id FROM help_alerts WHERE initiator = ? ORDER BY id DESC LIMIT 1", [user]).first
        }
    }

    func alerts(reaching user: UInt64) async throws -> [AlertRecord] {
        try await database.read { db in
            try Self.alerts(db, """
                SELECT DISTINCT a.id FROM recipients r JOIN help_alerts a ON a.id = r.alert_id WHERE r.user_id = ? AND a.state = 1 ORDER BY a.id DESC
                """, [user])
        }
    }

    func raiseAlert(_ new: NewAlert) async throws -> (record: AlertRecord, grants: [GrantRecord]) {
        do {
            return try await database.write { db in
                try db.run(sql: """
                    INSERT INTO help_alerts (initiator, message, location, state, raised_at_ms, idempotency_key) VALUES (?, ?, ?, 1, ?, ?)
                    """, binding: new.initiator, new.message, Data(new.location.serializedBytes()), new.at, new.key)
                let id = UInt64(db.lastInsertedRowID)
                for (position, contact) in new.recipients.enumerated() {
                    let (user, phone): (UInt64, String) = switch contact {
                    case .user(let u): (u, "")
                    case .phone(let p): (0, p)
                    }
                    try db.run(sql: "INSERT INTO recipients (alert_id, position, user_id, phone, answer) VALUES (?, ?, ?, ?, ?)",
                               binding: id, position, user, phone, AlertsV1.Answer.pending.rawValue)
                }
                let grants = try new.grants.map { try Self.setGrant(db, $0) }
                try db.run(sql: "INSERT INTO emergency_prompts (alert_id, user_id, number, label, created_at_ms) VALUES (?, ?, ?, ?, ?)",
                           binding: id, new.initiator, new.promptNumber, new.promptLabel, new.at)
                let promptID = UInt64(db.lastInsertedRowID)
                let queued = try Self.enqueue(db, new.messages(id), now: new.at)
                // What was written, without reading it back: the alert's id is new, so the rows
                // `enqueue` added are all its source has.
                let deliveries = OutboxRows.raiseReadsBack ? try Self.summaries(db, source: AlertRecord.source(id)) : OutboxRows.summaries(queued: queued)
                return (AlertRecord(raised: new, id: id, promptID: promptID, deliveries: deliveries), grants)
            }
        } catch let error as DatabaseError where error.resultCode == .SQLITE_CONSTRAINT {
            throw AlertsConflict.alreadyActive
        }
    }

    func changeAlert(_ target: RowTarget, at: Int64, _ decide: @escaping @Sendable (AlertRecord?) throws -> AlertChange?)
        async throws -> (record: AlertRecord, change: AlertChange)? {
        try await database.write { db in
            let alert = switch target {
            case .id(let id): try Self.alert(db, id: id)
            case .activeOf(let user): try Self.alerts(db, "SELECT id FROM help_alerts WHERE initiator = ? AND state = 1", [user]).first
            }
            guard var change = try decide(alert), let alert else { return nil }
            if let by = change.resolvedBy {
                try db.run(sql: "UPDATE help_alerts SET state = ?, resolved_at_ms = ?, resolved_by = ? WHERE id = ?",
                           binding: AlertsV1.AlertState.resolved.rawValue, at, by, alert.id)
            }
            if let recipient = change.recipient {
                if let answer = recipient.answer {
                    try db.run(sql: "UPDATE recipients SET answer = ?, answered_at_ms = ?, dismissed = 0 WHERE alert_id = ? AND user_id = ?",
                               binding: answer.rawValue, at, alert.id, recipient.user)
                } else {
                    try db.run(sql: "UPDATE recipients SET dismissed = 1 WHERE alert_id = ? AND user_id = ?", binding: alert.id, recipient.user)
                }
            }
            if let e = change.escalation {
                try db.run(sql: "UPDATE help_alerts SET escalated_at_ms = ? WHERE id = ?", binding: at, alert.id)
                try db.run(sql: "INSERT INTO escalations (alert_id, number, label, location, created_at_ms, resent_to) VALUES (?, ?, ?, ?, ?, ?)",
                           binding: alert.id, e.number, e.label, Data((e.location ?? AlertsV1.AlertLocation()).serializedBytes()), at, e.resentTo)
            }
            if let dialed = change.reportedCall {
                try db.run(sql: "UPDATE emergency_prompts SET reported = 1, dialed = ?, reported_at_ms = ? WHERE alert_id = ?",
                           binding: dialed, at, alert.id)
            }
            change.grants = try change.grants.map { try Self.setGrant(db, $0) }
            try Self.enqueue(db, change.messages, now: at)
            // The alert as written, from the rows read above (no second read of them).
            var record = alert.applying(change, at: at)
            if change.messages.contains(where: { $0.source == AlertRecord.source(alert.id) }) {
                record.deliveries = try Self.summaries(db, source: AlertRecord.source(alert.id))
            }
            return (record, change)
        }
    }

    /// An alert's deliveries, found by a range of the `dedupe_key` index (`OutboxRows.keyRange`;
    /// SQLite compares text as bytes). An index of its own on `source` cost a page write in every
    /// commit that queued a message (issue 16, `docs/benchmarks.md` item 77).
    static func summaries(_ db: Database, source: String) throws -> [String: [AlertsV1.DeliverySummary]] {
        let (lower, upper) = OutboxRows.keyRange(of: source)
        return OutboxRows.summaries(try Row.fetchAll(db, cached: summariesSQL, binding: lower, upper, source) { row -> OutboxRows.Summarised in
            try (user: row[0], address: row[1], channel: AlertsV1.Channel(rawValue: row[2]), status: AlertsV1.DeliveryStatus(rawValue: row[3]),
             attempts: row[4])
        })
    }

    /// `summaries(_:source:)`'s query (its plan is tested).
    static let summariesSQL = """
        SELECT recipient_user, address, channel, status, attempts FROM outbox
        WHERE dedupe_key >= ? AND dedupe_key < ? AND source = ? ORDER BY id
        """

    // MARK: Check-in timers

    static func timer(_ row: CurrentRow) throws -> TimerRecord {
        try TimerRecord(id: row[0], owner: row[1], note: row[2], state: AlertsV1.TimerState(rawValue: row[3]), startedMs: row[4], dueMs: row[5],
                    warnMs: row[6], warnedMs: row[7], endedMs: row[8], alertID: row[9], pinHash: row[10], failures: row[11])
    }

    static func timers(_ db: Database, _ condition: String, _ arguments: StatementArguments) throws -> [TimerRecord] {
        try Row.fetchAll(db, cached: "SELECT \(RecordColumns.timer) FROM timers WHERE \(condition)", arguments: arguments, as: timer)
    }

    func timer(owner: UInt64, key: String) async throws -> TimerRecord? {
        try await database.read { db in try Self.timers(db, "owner = ? AND idempotency_key = ?", [owner, key]).first }
    }

    func activeTimer(of owner: UInt64) async throws -> TimerRecord? {
        try await database.read { db in try Self.timers(db, "owner = ? AND state = 1", [owner]).first }
    }

    func latestTimer(of owner: UInt64) async throws -> TimerRecord? {
        try await database.read { db in try Self.timers(db, "owner = ? ORDER BY state = 1 DESC, id DESC LIMIT 1", [owner]).first }
    }

    func startTimer(_ new: NewTimer) async throws -> TimerRecord {
        do {
            return try await database.write { db in
                try db.run(sql: """
                    INSERT INTO timers (owner, note, state, started_ms, due_ms, warn_ms, pin_hash, idempotency_key) VALUES (?, ?, 1, ?, ?, ?, ?, ?)
                    """, binding: new.owner, new.note, new.at, new.dueMs, new.warnMs, new.pinHash, new.key)
                guard let timer = try Self.timers(db, "id = ?", [db.lastInsertedRowID]).first else {
                    throw StoreInvariant("the timer just written is missing")
                }
                return timer
            }
        } catch let error as DatabaseError where error.resultCode == .SQLITE_CONSTRAINT {
            throw AlertsConflict.alreadyActive
        }
    }

    func changeTimer(id: UInt64, at: Int64, _ decide: @escaping @Sendable (TimerRecord?) throws -> TimerChange?)
        async throws -> (record: TimerRecord, change: TimerChange)? {
        try await database.write { db in
            let timer = try Self.timers(db, "id = ?", [id]).first
            guard let change = try decide(timer), let timer else { return nil }
            if let end = change.end {
                try db.run(sql: "UPDATE timers SET state = ?, ended_ms = ?, alert_id = ? WHERE id = ?", binding: end.rawValue, at, change.alertID, id)
            }
            if change.warned { try db.run(sql: "UPDATE timers SET warned_ms = ? WHERE id = ?", binding: at, id) }
            if change.failedTry { try db.run(sql: "UPDATE timers SET failures = failures + 1 WHERE id = ?", binding: id) }
            try Self.enqueue(db, change.messages, now: at)
            guard let record = try Self.timers(db, "id = ?", [timer.id]).first else { throw StoreInvariant("the timer just changed is missing") }
            return (record, change)
        }
    }

    // MARK: Grants

    /// Sets `grant` with the next version (a counter in `cursors`, moved in the same transaction
    /// on the single writer). - Returns: the grant as set.
    ///
    /// A grant set again (the same person's circle at each helpNow, its expiry at the resolve) is
    /// updated where it is: `INSERT OR REPLACE` deleted the row and inserted it under a new rowid,
    /// writing the key's index page as well as the table's (issue 16, `docs/benchmarks.md` item 79).
    static func setGrant(_ db: Database, _ grant: GrantRecord) throws -> GrantRecord {
        try db.run(sql: "INSERT INTO cursors (name, value) VALUES ('grant_version', 1) ON CONFLICT (name) DO UPDATE SET value = value + 1")
        let version = try Int64.fetchOne(db, cached: "SELECT value FROM cursors WHERE name = 'grant_version'") ?? 1
        try db.run(sql: replacesGrants ? "INSERT OR REPLACE INTO grants (subject, viewer, reason, expires_ms, version) VALUES (?, ?, ?, ?, ?)" : """
            INSERT INTO grants (subject, viewer, reason, expires_ms, version) VALUES (?, ?, ?, ?, ?)
            ON CONFLICT (subject, viewer, reason) DO UPDATE SET expires_ms = excluded.expires_ms, version = excluded.version
            """, binding: grant.subject, grant.viewer, grant.reason, grant.expiresMs, version)
        var set = grant
        set.version = version
        return set
    }

    /// `FRIENSO_GRANT_WRITES=replace`: grants set by `INSERT OR REPLACE`, as before item 79 (A/B runs only).
    static let replacesGrants = ProcessInfo.processInfo.environment["FRIENSO_GRANT_WRITES"] == "replace"

    func grantsToPublish(now: Int64, keepRevoked: Int64) async throws -> [GrantRecord] {
        try await database.write { db in
            try db.run(sql: "DELETE FROM grants WHERE expires_ms < ?", arguments: [now - keepRevoked])
            return try Row.fetchAll(db, cached: "SELECT subject, viewer, reason, expires_ms, version FROM grants") {
                try GrantRecord(subject: $0[0], viewer: $0[1], reason: $0[2], expiresMs: $0[3], version: $0[4])
            }
        }
    }
}
