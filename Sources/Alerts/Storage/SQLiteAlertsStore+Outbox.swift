import Foundation
import FriensoProto
import GRDB
import Storage
import Wire

/// The outbox, devices, the inbox, resources and export on SQLite (erasure: `+Erasure`).
extension SQLiteAlertsStore {
    // MARK: Queueing

    /// Queues `messages` in the caller's transaction (`OutboxRows`). - Returns: the rows added, in
    /// the order of their ids (a row already queued under its `dedupeKey` is not among them).
    @discardableResult
    static func enqueue(_ db: Database, _ messages: [Outgoing], now: Int64) throws -> [OutboxRows.Row] {
        guard !messages.isEmpty else { return [] }
        var tokens: [UInt64: [String]] = [:]
        for user in OutboxRows.pushUsers(messages) {
            tokens[user] = try String.fetchAll(db, cached: "SELECT token FROM devices WHERE user_id = ? ORDER BY registered_at_ms, token", arguments: [user])
        }
        var added: [OutboxRows.Row] = []
        for row in OutboxRows.rows(messages, tokens: tokens) {
            try db.run(sql: """
                INSERT OR IGNORE INTO outbox (dedupe_key, source, channel, recipient_user, address, body, status, last_error,
                                              created_at_ms, updated_at_ms, next_attempt_ms, about_user)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                """, binding: row.dedupeKey, row.message.source, row.channel.rawValue, row.user, row.address, row.message.body,
                               row.status.rawValue, row.error, now, now, now, row.message.about)
            if db.changesCount == 1 { added.append(row) }
        }
        return added
    }

    func enqueue(_ messages: [Outgoing], at: Int64, cursor: (name: String, value: UInt64)?) async throws -> Int {
        try await database.write { db in
            let added = try Self.enqueue(db, messages, now: at).count
            if let cursor {
                try db.run(sql: "INSERT INTO cursors (name, value) VALUES (?, ?) ON CONFLICT (name) DO UPDATE SET value = max(value, excluded.value)",
                           arguments: [cursor.name, cursor.value])
            }
            return added
        }
    }

    func cursor(_ name: String) async throws -> UInt64 {
        try await database.read { db in try UInt64.fetchOne(db, cached: "SELECT value FROM cursors WHERE name = ?", arguments: [name]) ?? 0 }
    }

    // MARK: Deliveries

    static func delivery(_ row: CurrentRow) throws -> AlertsV1.Delivery {
        try AlertsV1.Delivery(deliveryId: row[0], source: row[1], channel: AlertsV1.Channel(rawValue: row[2]), recipientUserId: row[3],
                          address: row[4], body: row[5], status: AlertsV1.DeliveryStatus(rawValue: row[6]), attempts: row[7], lastError: row[8],
                          createdAtMs: row[9], updatedAtMs: row[10], nextAttemptAtMs: row[11], provider: row[12], reference: row[13])
    }

    func outbox(status: AlertsV1.DeliveryStatus, recipient: UInt64, beforeID: UInt64, limit: Int) async throws -> [AlertsV1.Delivery] {
        try await database.read { db in
            var sql = "SELECT \(RecordColumns.delivery) FROM outbox WHERE id < ?"
            var arguments: StatementArguments = [beforeID == 0 ? Int64.max : Int64(clamping: beforeID)]
            if status != .unspecified { sql += " AND status = ?"; _ = arguments.append(contentsOf: [status.rawValue]) }
            if recipient != 0 { sql += " AND recipient_user = ?"; _ = arguments.append(contentsOf: [recipient]) }
            sql += " ORDER BY id DESC LIMIT ?"
            _ = arguments.append(contentsOf: [limit])
            return try Row.fetchAll(db, cached: sql, arguments: arguments) { row in
                var d = try Self.delivery(row)
                d.attemptLog = try Self.attempts(db, of: d.deliveryId)
                return d
            }
        }
    }

    /// One instance takes every due row: SQLite's file is this process's alone.
    func takeDue(at: Int64, limit: Int, claimUntil: Int64) async throws -> (rows: [AlertsV1.Delivery], platforms: [UInt64: AlertsV1.Platform]) {
        try await database.read { db in
            var platforms: [UInt64: AlertsV1.Platform] = [:]
            let rows = try Row.fetchAll(db, cached: """
                SELECT \(RecordColumns.delivery), (SELECT platform FROM devices WHERE token = outbox.address AND outbox.channel = ?)
                FROM outbox WHERE status = 1 AND next_attempt_ms <= ? ORDER BY next_attempt_ms, id LIMIT ?
                """, binding: AlertsV1.Channel.push.rawValue, at, limit) { row -> AlertsV1.Delivery in
                let d = try Self.delivery(row)
                if let platform = try row[RecordColumns.deliveryCount] as Int32? { platforms[d.deliveryId] = AlertsV1.Platform(rawValue: platform) }
                return d
            }
            return (rows, platforms)
        }
    }

    func beginAttempts(_ attempts: [(delivery: UInt64, provider: String)], at: Int64) async throws {
        try await database.write { db in
            // `outcome = 1` written out (SENDING), not bound: SQLite uses a partial index only for
            // the literal its WHERE names.
            try db.run(sql: "UPDATE delivery_attempts SET outcome = ?, finished_ms = ?, error = ? WHERE outcome = 1",
                       arguments: [AlertsV1.AttemptOutcome.interrupted.rawValue, at, AttemptLog.interrupted])
            for attempt in attempts {
                try db.run(sql: """
                    INSERT INTO delivery_attempts (delivery_id, attempt, started_ms, provider, outcome)
                    VALUES (?1, (SELECT COALESCE(MAX(attempt), 0) + 1 FROM delivery_attempts WHERE delivery_id = ?1), ?2, ?3, ?4)
                    """, binding: attempt.delivery, at, attempt.provider, AlertsV1.AttemptOutcome.sending.rawValue)
            }
        }
    }

    func finishPass(_ updated: [AlertsV1.Delivery], answers: [(delivery: UInt64, provider: String, result: DeliveryResult)],
                    begun: Set<UInt64>, at: Int64, deadTokens: Set<String>,
                    sent: [(message: OutgoingMessage, provider: String)]) async throws -> Int64? {
        try await database.write { db in
            for s in sent { try Self.recordSent(db, s.message, provider: s.provider, at: at) }
            for d in updated {
                try db.run(sql: """
                    UPDATE outbox SET status = ?, attempts = ?, provider = ?, address = ?, last_error = ?, updated_at_ms = ?, next_attempt_ms = ?,
                    reference = ? WHERE id = ?
                    """, binding: d.status.rawValue, d.attempts, d.provider, d.address, d.lastError, d.updatedAtMs, d.nextAttemptAtMs,
                                   d.reference, d.deliveryId)
            }
            for answer in answers {
                let a = AttemptLog.Answer(answer.result)
                if begun.contains(answer.delivery) {
                    try db.run(sql: """
                        UPDATE delivery_attempts SET outcome = ?, finished_ms = ?, reference = ?, error = ?, retry_after_ms = ?
                        WHERE delivery_id = ? AND outcome = 1
                        """, binding: a.outcome, at, a.reference, a.error, a.retryAfterMs, answer.delivery)
                    if db.changesCount > 0 { continue }
                }
                try db.run(sql: """
                    INSERT INTO delivery_attempts (delivery_id, attempt, started_ms, finished_ms, provider, outcome, reference, error, retry_after_ms)
                    VALUES (?1, (SELECT COALESCE(MAX(attempt), 0) + 1 FROM delivery_attempts WHERE delivery_id = ?1), ?2, ?2, ?3, ?4, ?5, ?6, ?7)
                    """, binding: answer.delivery, at, answer.provider, a.outcome, a.reference, a.error, a.retryAfterMs)
            }
            for token in deadTokens { try db.run(sql: "DELETE FROM devices WHERE token = ?", arguments: [token]) }
            return try Self.nextDue(db)
        }
    }

    static func attempts(_ db: Database, of delivery: UInt64) throws -> [AlertsV1.DeliveryAttempt] {
        try Row.fetchAll(db, cached: """
            SELECT attempt, started_ms, finished_ms, provider, outcome, reference, error, retry_after_ms FROM delivery_attempts
            WHERE delivery_id = ? ORDER BY attempt
            """, binding: delivery) {
            try AlertsV1.DeliveryAttempt(attempt: $0[0], startedAtMs: $0[1], finishedAtMs: $0[2], provider: $0[3],
                                     outcome: AlertsV1.AttemptOutcome(rawValue: $0[4]), reference: $0[5], error: $0[6], retryAfterMs: $0[7])
        }
    }

    func nextDue() async throws -> Int64? {
        try await database.read { db in try Self.nextDue(db) }
    }

    static func nextDue(_ db: Database) throws -> Int64? {
        try Int64.fetchOne(db, cached: "SELECT MIN(next_attempt_ms) FROM outbox WHERE status = 1")
    }

    func pendingByChannel() async throws -> [(channel: AlertsV1.Channel, count: Int, oldestMs: Int64)] {
        try await database.read { db in
            try Row.fetchAll(db, cached: "SELECT channel, COUNT(*), MIN(created_at_ms) FROM outbox WHERE status = 1 GROUP BY channel") {
                try (AlertsV1.Channel(rawValue: $0[0]), $0[1], $0[2])
            }
        }
    }

    func recordSent(_ messages: [OutgoingMessage], provider: String, at: Int64) async throws {
        try await database.write { db in
            for m in messages { try Self.recordSent(db, m, provider: provider, at: at) }
        }
    }

    static func recordSent(_ db: Database, _ m: OutgoingMessage, provider: String, at: Int64) throws {
        try db.run(sql: """
            INSERT OR IGNORE INTO sent_messages (idempotency_key, provider, channel, address, body, sent_at_ms) VALUES (?, ?, ?, ?, ?, ?)
            """, arguments: [m.idempotencyKey, provider, m.channel.rawValue, m.address, m.body, at])
    }

    func sentMessages() async throws -> [(channel: Int32, address: String, body: String)] {
        try await database.read { db in
            try Row.fetchAll(db, sql: "SELECT channel, address, body FROM sent_messages ORDER BY rowid") { try ($0[0], $0[1], $0[2]) }
        }
    }

    // MARK: Devices, inbox, resources

    func registerDevice(token: String, user: UInt64, platform: AlertsV1.Platform, appVersion: String, at: Int64) async throws -> UInt64? {
        try await database.write { db in
            let previous = try UInt64.fetchOne(db, cached: "SELECT user_id FROM devices WHERE token = ?", arguments: [token])
            try db.run(sql: "INSERT OR REPLACE INTO devices (token, user_id, platform, app_version, registered_at_ms) VALUES (?, ?, ?, ?, ?)",
                       arguments: [token, user, platform.rawValue, appVersion, at])
            return previous.flatMap { $0 == user ? nil : $0 }
        }
    }

    func unregisterDevice(token: String, user: UInt64) async throws -> Bool {
        try await database.write { db in
            try db.run(sql: "DELETE FROM devices WHERE token = ? AND user_id = ?", arguments: [token, user])
            return db.changesCount == 1
        }
    }

    func devices(of user: UInt64) async throws -> [AlertsV1.Device] {
        try await database.read { db in
            try Row.fetchAll(db, cached: "SELECT token, platform, app_version, registered_at_ms FROM devices WHERE user_id = ? ORDER BY registered_at_ms, token",
                             binding: user) {
                try AlertsV1.Device(token: $0[0], platform: AlertsV1.Platform(rawValue: $0[1]), appVersion: $0[2], registeredAtMs: $0[3])
            }
        }
    }

    func inbox(of user: UInt64, at: Int64) async throws -> InboxRows {
        try await database.read { db in
            var rows = InboxRows()
            rows.watches = try Row.fetchAll(db, cached: """
                SELECT s.id, s.initiator, s.note, s.started_at_ms, s.ends_at_ms FROM watchers w JOIN watch_sessions s ON s.id = w.session_id
                WHERE w.watcher = ? AND w.answer = 1 AND w.dismissed = 0 AND s.state = 1 AND s.ends_at_ms > ? ORDER BY s.id DESC
                """, binding: user, at) { try ($0[0], $0[1], $0[2], $0[3], $0[4]) }
            rows.alerts = try Row.fetchAll(db, cached: """
                SELECT a.id, a.initiator, a.message, a.raised_at_ms, a.location FROM recipients r JOIN help_alerts a ON a.id = r.alert_id
                WHERE r.user_id = ? AND r.answer = 1 AND r.dismissed = 0 AND a.state = 1 ORDER BY a.id DESC
                """, binding: user) {
                try ($0[0], $0[1], $0[2], $0[3], AlertsV1.AlertLocation.stored($0[4]))
            }
            rows.dismissed = Set(try Row.fetchAll(db, cached: "SELECT owner, requested_at_ms FROM dismissed_circle_requests WHERE member = ?",
                                                  binding: user) { try "\($0[0] as UInt64):\($0[1] as Int64)" })
            return rows
        }
    }

    func dismissCircleRequest(member: UInt64, owner: UInt64, requestedAtMs: Int64) async throws {
        try await database.write { db in
            try db.run(sql: "INSERT OR IGNORE INTO dismissed_circle_requests (member, owner, requested_at_ms) VALUES (?, ?, ?)",
                       arguments: [member, owner, requestedAtMs])
        }
    }

    func replaceResources(_ byCampus: [String: [AlertsV1.Resource]]) async throws {
        try await database.write { db in
            for (campus, resources) in byCampus {
                try db.run(sql: "DELETE FROM resources WHERE campus = ?", arguments: [campus])
                for (position, r) in resources.enumerated() {
                    try db.run(sql: "INSERT INTO resources (campus, position, title, detail, phone, url) VALUES (?, ?, ?, ?, ?, ?)",
                               arguments: [campus, position, r.title, r.detail, r.phone, r.url])
                }
            }
        }
    }

    func resources(campus: String) async throws -> [AlertsV1.Resource] {
        try await database.read { db in
            try Row.fetchAll(db, cached: """
                SELECT campus, title, detail, phone, url FROM resources WHERE ? = '' OR campus = ? COLLATE NOCASE ORDER BY campus, position
                """, binding: campus, campus) {
                try AlertsV1.Resource(campus: $0[0], title: $0[1], detail: $0[2], phone: $0[3], url: $0[4])
            }
        }
    }

    // MARK: Export

    func exportRows(of user: UInt64) async throws -> ExportRows {
        try await database.read { db in
            var rows = ExportRows()
            rows.watches = try Self.watches(db, "SELECT id FROM watch_sessions WHERE initiator = ? ORDER BY id DESC", [user])
            rows.watched = try Self.watches(db, "SELECT DISTINCT session_id FROM watchers WHERE watcher = ? ORDER BY session_id DESC", [user])
            rows.alerts = try Self.alerts(db, "SELECT id FROM help_alerts WHERE initiator = ? ORDER BY id DESC", [user])
            rows.alertsReceived = try Self.alerts(db, "SELECT DISTINCT alert_id FROM recipients WHERE user_id = ? ORDER BY alert_id DESC", [user])
            rows.deliveries = try Row.fetchAll(db, cached: """
                SELECT \(RecordColumns.delivery) FROM outbox WHERE recipient_user = ?1 OR about_user = ?1 ORDER BY id DESC
                """, binding: user, as: Self.delivery)
            rows.timers = try Self.timers(db, "owner = ? ORDER BY id DESC", [user])
            return rows
        }
    }
}
