import Foundation
import FriensoProto
import Logging
import PostgresNIO
import Storage
import Wire

/// Watch sessions and helpNow alerts on PostgreSQL.
extension PostgresAlertsStore {
    // MARK: Watch sessions

    static func watch(_ connection: PostgresConnection, id: UInt64, logger: Logger) async throws -> WatchRecord? {
        var found: WatchRecord?
        for try await (id, initiator, note, state, started, ends, ended) in try await connection.prepared(
            "SELECT \(unescaped: RecordColumns.watch) FROM watch_sessions WHERE id = \(Int64(id))", logger: logger)
            .decode((Int64, Int64, String, Int64, Int64, Int64, Int64).self) {
            found = WatchRecord(id: UInt64(id), initiator: UInt64(initiator), note: note, state: AlertsV1.WatchState(rawValue: raw(state)),
                                startedAtMs: started, endsAtMs: ends, endedAtMs: ended, watchers: [])
        }
        guard var record = found else { return nil }
        for try await (user, answer, at) in try await connection.prepared(
            "SELECT watcher, answer, answered_at_ms FROM watchers WHERE session_id = \(Int64(id)) ORDER BY position", logger: logger)
            .decode((Int64, Int64, Int64).self) {
            record.watchers.append(WatcherRecord(user: UInt64(user), answer: AlertsV1.Answer(rawValue: raw(answer)), answeredAtMs: at))
        }
        return record
    }

    /// The sessions whose ids `query` selects, in its order.
    func watches(_ query: PostgresQuery) async throws -> [WatchRecord] {
        try await database.snapshot { connection in
            var records: [WatchRecord] = []
            for id in try await PostgresServiceDatabase.ids(connection.prepared(query, logger: logger)) {
                if let record = try await Self.watch(connection, id: id, logger: logger) { records.append(record) }
            }
            return records
        }
    }

    func watch(initiator: UInt64, key: String) async throws -> WatchRecord? {
        try await watches("SELECT id FROM watch_sessions WHERE initiator = \(Int64(initiator)) AND idempotency_key = \(key)").first
    }

    func activeWatch(of user: UInt64) async throws -> WatchRecord? {
        try await watches("SELECT id FROM watch_sessions WHERE initiator = \(Int64(user)) AND state = 1").first
    }

    func latestWatch(of user: UInt64) async throws -> WatchRecord? {
        try await watches("SELECT id FROM watch_sessions WHERE initiator = \(Int64(user)) ORDER BY id DESC LIMIT 1").first
    }

    func watching(_ user: UInt64) async throws -> [WatchRecord] {
        try await watches("""
            SELECT s.id FROM watchers w JOIN watch_sessions s ON s.id = w.session_id WHERE w.watcher = \(Int64(user)) AND s.state = 1 ORDER BY s.id DESC
            """)
    }

    func startWatch(_ new: NewWatch) async throws -> WatchRecord {
        do {
            return try await database.write { connection in
                guard let id = try await PostgresServiceDatabase.first(connection.prepared("""
                    INSERT INTO watch_sessions (initiator, note, state, started_at_ms, ends_at_ms, idempotency_key)
                    VALUES (\(Int64(new.initiator)), \(new.note), 1, \(new.at), \(new.endsAtMs), \(new.key)) RETURNING id
                    """, logger: logger), Int64.self).map(UInt64.init) else { throw StoreInvariant("the watch just written has no id") }
                if !new.watchers.isEmpty {
                    try await connection.prepared("""
                        INSERT INTO watchers (session_id, watcher, position, answer)
                        SELECT \(Int64(id)), w, p - 1, \(Int64(AlertsV1.Answer.pending.rawValue))
                        FROM unnest(\(new.watchers.map { Int64($0) })::bigint[]) WITH ORDINALITY AS r(w, p)
                        """, logger: logger)
                }
                try await enqueue(connection, new.messages(id), now: new.at)
                guard let record = try await Self.watch(connection, id: id, logger: logger) else { throw StoreInvariant("the watch just written is missing") }
                return record
            }
        } catch where Self.isSecondActive(error) {
            throw AlertsConflict.alreadyActive
        }
    }

    func changeWatch(_ target: RowTarget, at: Int64, _ decide: @escaping @Sendable (WatchRecord?) throws -> WatchChange?)
        async throws -> (record: WatchRecord, change: WatchChange)? {
        try await database.write { connection in
            let locked: UInt64? = switch target {
            case .id(let id):
                try await PostgresServiceDatabase.first(connection.prepared(
                    "SELECT id FROM watch_sessions WHERE id = \(Int64(id)) FOR UPDATE", logger: logger), Int64.self).map(UInt64.init)
            case .activeOf(let user):
                try await PostgresServiceDatabase.first(connection.prepared(
                    "SELECT id FROM watch_sessions WHERE initiator = \(Int64(user)) AND state = 1 FOR UPDATE", logger: logger), Int64.self).map(UInt64.init)
            }
            let session = if let locked { try await Self.watch(connection, id: locked, logger: logger) } else { nil as WatchRecord? }
            guard var change = try decide(session), let session else { return nil }
            let id = Int64(session.id)
            if let end = change.end {
                try await connection.prepared("UPDATE watch_sessions SET state = \(Int64(end.rawValue)), ended_at_ms = \(at) WHERE id = \(id)", logger: logger)
            }
            if let ends = change.endsAtMs {
                try await connection.prepared("UPDATE watch_sessions SET ends_at_ms = \(ends) WHERE id = \(id)", logger: logger)
            }
            if let watcher = change.watcher {
                if let answer = watcher.answer {
                    try await connection.prepared("""
                        UPDATE watchers SET answer = \(Int64(answer.rawValue)), answered_at_ms = \(at), dismissed = false
                        WHERE session_id = \(id) AND watcher = \(Int64(watcher.user))
                        """, logger: logger)
                } else {
                    try await connection.prepared("UPDATE watchers SET dismissed = true WHERE session_id = \(id) AND watcher = \(Int64(watcher.user))",
                                               logger: logger)
                }
            }
            change.grants = try await setGrants(connection, change.grants)
            try await enqueue(connection, change.messages, now: at)
            guard let record = try await Self.watch(connection, id: session.id, logger: logger) else { throw StoreInvariant("the watch just changed is missing") }
            return (record, change)
        }
    }

    func dueWatches(at: Int64) async throws -> [WatchRecord] {
        try await watches("SELECT id FROM watch_sessions WHERE state = 1 AND ends_at_ms <= \(at) ORDER BY id")
    }

    func nextWatchExpiry() async throws -> Int64? {
        try await database.read { connection in
            try await PostgresServiceDatabase.first(connection.prepared("SELECT min(ends_at_ms) FROM watch_sessions WHERE state = 1", logger: logger),
                                                    Int64?.self) ?? nil
        }
    }

    // MARK: helpNow alerts

    static func alert(_ connection: PostgresConnection, id: UInt64, logger: Logger) async throws -> AlertRecord? {
        let key = Int64(id)
        var found: AlertRecord?
        // The alert with its prompt and its escalation (at most one each): one statement.
        for try await alert in try await connection.prepared("""
            SELECT a.id, a.initiator, a.message, a.location, a.state, a.raised_at_ms, a.resolved_at_ms, a.resolved_by,
                   p.id, p.number, p.label, p.created_at_ms, p.reported, p.dialed, p.reported_at_ms,
                   e.number, e.label, e.location, e.created_at_ms, e.resent_to
            FROM help_alerts a LEFT JOIN emergency_prompts p ON p.alert_id = a.id LEFT JOIN escalations e ON e.alert_id = a.id
            WHERE a.id = \(key)
            """, logger: logger).decode((Int64, Int64, String, Data, Int64, Int64, Int64, String,
                                         Int64?, String?, String?, Int64?, Bool?, Bool?, Int64?,
                                         String?, String?, Data?, Int64?, Int64?).self).map(Self.alertRow) {
            found = alert
        }
        guard var record = found else { return nil }
        for try await (user, phone, answer, at) in try await connection.prepared(
            "SELECT user_id, phone, answer, answered_at_ms FROM recipients WHERE alert_id = \(key) ORDER BY position", logger: logger)
            .decode((Int64, String, Int64, Int64).self) {
            record.recipients.append(RecipientRecord(user: UInt64(user), phone: phone, answer: AlertsV1.Answer(rawValue: raw(answer)), answeredAtMs: at))
        }
        record.deliveries = try await summaries(connection, source: AlertRecord.source(record.id), logger: logger)
        return record
    }

    /// One row of `alert(_:id:logger:)`'s statement: the alert (without its recipients and
    /// deliveries), with its prompt (none: the empty prompt) and its escalation.
    private static func alertRow(_ r: (Int64, Int64, String, Data, Int64, Int64, Int64, String,
                                       Int64?, String?, String?, Int64?, Bool?, Bool?, Int64?,
                                       String?, String?, Data?, Int64?, Int64?)) -> AlertRecord {
        var alert = AlertRecord(id: UInt64(r.0), initiator: UInt64(r.1), message: r.2, location: AlertsV1.AlertLocation.stored(r.3),
                                state: AlertsV1.AlertState(rawValue: raw(r.4)), raisedAtMs: r.5, resolvedAtMs: r.6, resolvedBy: r.7,
                                recipients: [], prompt: AlertsV1.EmergencyPrompt(), escalation: nil)
        if let promptID = r.8 {
            alert.prompt = AlertsV1.EmergencyPrompt(promptId: UInt64(promptID), number: r.9 ?? "", label: r.10 ?? "", location: alert.location,
                                                    createdAtMs: r.11 ?? 0, reported: r.12 ?? false, dialed: r.13 ?? false, reportedAtMs: r.14 ?? 0)
        }
        if let number = r.15 {
            alert.escalation = AlertsV1.Escalation(escalatedAtMs: r.18 ?? 0, number: number, label: r.16 ?? "",
                                                   location: AlertsV1.AlertLocation.stored(r.17 ?? Data()), resentTo: UInt32(clamping: r.19 ?? 0))
        }
        return alert
    }

    /// The alerts whose ids `query` selects, in its order.
    func alerts(_ query: PostgresQuery) async throws -> [AlertRecord] {
        try await database.snapshot { connection in
            var records: [AlertRecord] = []
            for id in try await PostgresServiceDatabase.ids(connection.prepared(query, logger: logger)) {
                if let record = try await Self.alert(connection, id: id, logger: logger) { records.append(record) }
            }
            return records
        }
    }

    func alertMeetingRaise(by user: UInt64, key: String) async throws -> (alert: AlertRecord, retry: Bool)? {
        // The alert raised with the key, else the active one: one statement of two index searches
        // (as on SQLite, item 96), the key's first, outside a transaction. A raise meets
        // none as a rule; that was four statements (a read-only transaction, two searches).
        let u = Int64(user)
        let met = try await database.read { connection -> (UInt64, Bool)? in
            for try await (id, retry) in try await connection.prepared("""
                (SELECT id, true AS retry FROM help_alerts WHERE \(key) <> '' AND initiator = \(u) AND idempotency_key = \(key) LIMIT 1)
                UNION ALL
                (SELECT id, false FROM help_alerts WHERE initiator = \(u) AND state = 1)
                ORDER BY retry DESC LIMIT 1
                """, logger: logger).decode((Int64, Bool).self) {
                return (UInt64(id), retry)
            }
            return nil
        }
        // The alert as it is now (on a snapshot of its own); gone meanwhile (erased): none.
        guard let (id, retry) = met, let alert = try await alert(id: id) else { return nil }
        return (alert, retry)
    }

    /// Read straight by its id (no statement to find an id it already has), on a snapshot.
    func alert(id: UInt64) async throws -> AlertRecord? {
        try await database.snapshot { connection in try await Self.alert(connection, id: id, logger: logger) }
    }

    func activeAlert(of user: UInt64) async throws -> AlertRecord? {
        try await alerts("SELECT id FROM help_alerts WHERE initiator = \(Int64(user)) AND state = 1").first
    }

    func latestAlert(of user: UInt64) async throws -> AlertRecord? {
        try await alerts("SELECT id FROM help_alerts WHERE initiator = \(Int64(user)) ORDER BY id DESC LIMIT 1").first
    }

    func alerts(reaching user: UInt64) async throws -> [AlertRecord] {
        try await alerts("""
            SELECT DISTINCT a.id FROM recipients r JOIN help_alerts a ON a.id = r.alert_id WHERE r.user_id = \(Int64(user)) AND a.state = 1
            ORDER BY a.id DESC
            """)
    }

    func raiseAlert(_ new: NewAlert) async throws -> (record: AlertRecord, grants: [GrantRecord]) {
        do {
            return try await database.write { connection in
                guard let id = try await PostgresServiceDatabase.first(connection.prepared("""
                    INSERT INTO help_alerts (initiator, message, location, state, raised_at_ms, idempotency_key)
                    VALUES (\(Int64(new.initiator)), \(new.message), \(Data(new.location.serializedBytes())), 1, \(new.at), \(new.key)) RETURNING id
                    """, logger: logger), Int64.self).map(UInt64.init) else { throw StoreInvariant("the alert just written has no id") }
                if !new.recipients.isEmpty {
                    // One statement for the whole circle (item 125).
                    let contacts: [(user: Int64, phone: String)] = new.recipients.map { contact in
                        switch contact {
                        case .user(let u): (Int64(u), "")
                        case .phone(let p): (0, p)
                        }
                    }
                    try await connection.prepared("""
                        INSERT INTO recipients (alert_id, position, user_id, phone, answer)
                        SELECT \(Int64(id)), p - 1, u, ph, \(Int64(AlertsV1.Answer.pending.rawValue))
                        FROM unnest(\(contacts.map(\.user))::bigint[], \(contacts.map(\.phone))::text[]) WITH ORDINALITY AS r(u, ph, p)
                        """, logger: logger)
                }
                let grants = try await setGrants(connection, new.grants)
                guard let promptID = try await PostgresServiceDatabase.first(connection.prepared("""
                    INSERT INTO emergency_prompts (alert_id, user_id, number, label, created_at_ms)
                    VALUES (\(Int64(id)), \(Int64(new.initiator)), \(new.promptNumber), \(new.promptLabel), \(new.at)) RETURNING id
                    """, logger: logger), Int64.self).map(UInt64.init) else { throw StoreInvariant("the prompt just written has no id") }
                let queued = try await enqueue(connection, new.messages(id), now: new.at)
                // What was written, without reading it back: the alert's id is new, so the rows
                // `enqueue` added are all its source has.
                let deliveries = OutboxRows.raiseReadsBack ? try await Self.summaries(connection, source: AlertRecord.source(id), logger: logger)
                                                           : OutboxRows.summaries(queued: queued)
                return (AlertRecord(raised: new, id: id, promptID: promptID, deliveries: deliveries), grants)
            }
        } catch where Self.isSecondActive(error) {
            throw AlertsConflict.alreadyActive
        }
    }

    func changeAlert(_ target: RowTarget, at: Int64, _ decide: @escaping @Sendable (AlertRecord?) throws -> AlertChange?)
        async throws -> (record: AlertRecord, change: AlertChange)? {
        try await database.write { connection in
            let locked: UInt64? = switch target {
            case .id(let id):
                try await PostgresServiceDatabase.first(connection.prepared(
                    "SELECT id FROM help_alerts WHERE id = \(Int64(id)) FOR UPDATE", logger: logger), Int64.self).map(UInt64.init)
            case .activeOf(let user):
                try await PostgresServiceDatabase.first(connection.prepared(
                    "SELECT id FROM help_alerts WHERE initiator = \(Int64(user)) AND state = 1 FOR UPDATE", logger: logger), Int64.self).map(UInt64.init)
            }
            let alert = if let locked { try await Self.alert(connection, id: locked, logger: logger) } else { nil as AlertRecord? }
            guard var change = try decide(alert), let alert else { return nil }
            let id = Int64(alert.id)
            if let by = change.resolvedBy {
                try await connection.prepared("""
                    UPDATE help_alerts SET state = \(Int64(AlertsV1.AlertState.resolved.rawValue)), resolved_at_ms = \(at), resolved_by = \(by) WHERE id = \(id)
                    """, logger: logger)
            }
            if let recipient = change.recipient {
                if let answer = recipient.answer {
                    try await connection.prepared("""
                        UPDATE recipients SET answer = \(Int64(answer.rawValue)), answered_at_ms = \(at), dismissed = false
                        WHERE alert_id = \(id) AND user_id = \(Int64(recipient.user))
                        """, logger: logger)
                } else {
                    try await connection.prepared("UPDATE recipients SET dismissed = true WHERE alert_id = \(id) AND user_id = \(Int64(recipient.user))",
                                               logger: logger)
                }
            }
            if let e = change.escalation {
                try await connection.prepared("UPDATE help_alerts SET escalated_at_ms = \(at) WHERE id = \(id)", logger: logger)
                try await connection.prepared("""
                    INSERT INTO escalations (alert_id, number, label, location, created_at_ms, resent_to)
                    VALUES (\(id), \(e.number), \(e.label), \(Data((e.location ?? AlertsV1.AlertLocation()).serializedBytes())), \(at), \(Int64(e.resentTo)))
                    """, logger: logger)
            }
            if let dialed = change.reportedCall {
                try await connection.prepared("""
                    UPDATE emergency_prompts SET reported = true, dialed = \(dialed), reported_at_ms = \(at) WHERE alert_id = \(id)
                    """, logger: logger)
            }
            change.grants = try await setGrants(connection, change.grants)
            try await enqueue(connection, change.messages, now: at)
            // The alert as written, from the rows read above (no second read of them).
            var record = alert.applying(change, at: at)
            if change.messages.contains(where: { $0.source == AlertRecord.source(alert.id) }) {
                record.deliveries = try await Self.summaries(connection, source: AlertRecord.source(alert.id), logger: logger)
            }
            return (record, change)
        }
    }

    func escalationsDue(raisedBy: Int64) async throws -> [UInt64] {
        try await database.read { connection in
            try await PostgresServiceDatabase.ids(connection.prepared("""
                SELECT id FROM help_alerts a WHERE state = 1 AND escalated_at_ms = 0 AND raised_at_ms <= \(raisedBy)
                  AND NOT EXISTS (SELECT 1 FROM recipients r WHERE r.alert_id = a.id AND r.answer = \(Int64(AlertsV1.Answer.accepted.rawValue)))
                ORDER BY id
                """, logger: logger))
        }
    }

    func oldestUnescalated() async throws -> Int64? {
        try await database.read { connection in
            try await PostgresServiceDatabase.first(connection.prepared(
                """
                SELECT min(raised_at_ms) FROM help_alerts a WHERE state = 1 AND escalated_at_ms = 0
                  AND NOT EXISTS (SELECT 1 FROM recipients r WHERE r.alert_id = a.id AND r.answer = \(Int64(AlertsV1.Answer.accepted.rawValue)))
                """, logger: logger), Int64?.self) ?? nil
        }
    }

    /// An alert's deliveries, by the index on `source`. (SQLite finds them by a range of the
    /// `dedupe_key` index instead; here the key's index orders text by the database's collation,
    /// in which `|` and `}` need not sort as bytes do, so the index on `source` stays.)
    static func summaries(_ connection: PostgresConnection, source: String, logger: Logger) async throws -> [String: [AlertsV1.DeliverySummary]] {
        var rows: [OutboxRows.Summarised] = []
        for try await (user, address, channel, status, attempts) in try await connection.prepared(
            "SELECT recipient_user, address, channel, status, attempts FROM outbox WHERE source = \(source) ORDER BY id", logger: logger)
            .decode((Int64, String, Int64, Int64, Int64).self) {
            rows.append((user: UInt64(user), address: address, channel: AlertsV1.Channel(rawValue: raw(channel)),
                         status: AlertsV1.DeliveryStatus(rawValue: raw(status)), attempts: UInt32(clamping: attempts)))
        }
        return OutboxRows.summaries(rows)
    }
}
