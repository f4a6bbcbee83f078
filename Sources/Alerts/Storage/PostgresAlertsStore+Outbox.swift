import Foundation
import FriensoProto
import Logging
import PostgresNIO
import Storage
import Wire

/// The outbox, devices, the inbox and resources on PostgreSQL.
extension PostgresAlertsStore {
    // MARK: Queueing

    /// Queues `messages` in the caller's transaction (`OutboxRows`). - Returns: the rows added, in
    /// the order of their ids (a row already queued under its `dedupeKey` is not among them).
    @discardableResult
    func enqueue(_ connection: PostgresConnection, _ messages: [Outgoing], now: Int64) async throws -> [OutboxRows.Row] {
        guard !messages.isEmpty else { return [] }
        var tokens: [UInt64: [String]] = [:]
        for user in OutboxRows.pushUsers(messages) {
            var list: [String] = []
            for try await token in try await connection.query(
                "SELECT token FROM devices WHERE user_id = \(Int64(user)) ORDER BY registered_at_ms", logger: logger).decode(String.self) {
                list.append(token)
            }
            tokens[user] = list
        }
        var added: [OutboxRows.Row] = []
        for row in OutboxRows.rows(messages, tokens: tokens) {
            let inserted = try await PostgresServiceDatabase.count(connection.query("""
                INSERT INTO outbox (dedupe_key, source, channel, recipient_user, address, body, status, last_error,
                                    created_at_ms, updated_at_ms, next_attempt_ms, about_user)
                VALUES (\(row.dedupeKey), \(row.message.source), \(Int64(row.channel.rawValue)), \(Int64(row.user)), \(row.address), \(row.message.body),
                        \(Int64(row.status.rawValue)), \(row.error), \(now), \(now), \(now), \(Int64(row.message.about)))
                ON CONFLICT (dedupe_key) DO NOTHING RETURNING 1
                """, logger: logger))
            if inserted == 1 { added.append(row) }
        }
        return added
    }

    func enqueue(_ messages: [Outgoing], at: Int64, cursor: (name: String, value: UInt64)?) async throws -> Int {
        try await database.write { connection in
            let added = try await enqueue(connection, messages, now: at).count
            if let cursor {
                try await connection.query("""
                    INSERT INTO cursors (name, value) VALUES (\(cursor.name), \(Int64(cursor.value)))
                    ON CONFLICT (name) DO UPDATE SET value = greatest(cursors.value, excluded.value)
                    """, logger: logger)
            }
            return added
        }
    }

    func cursor(_ name: String) async throws -> UInt64 {
        try await database.read { connection in
            UInt64(try await PostgresServiceDatabase.first(connection.query("SELECT value FROM cursors WHERE name = \(name)", logger: logger), Int64.self) ?? 0)
        }
    }

    // MARK: Deliveries

    /// Deliveries from rows of `RecordColumns.delivery`, with an extra column of `Extra`.
    func deliveries<Extra: PostgresDecodable & Sendable>(_ rows: PostgresRowSequence, extra: Extra.Type) async throws -> [(AlertsV1.Delivery, Extra)] {
        var result: [(AlertsV1.Delivery, Extra)] = []
        for try await (id, source, channel, user, address, body, status, attempts, error, created, updated, next, provider, reference, more) in rows
            .decode((Int64, String, Int64, Int64, String, String, Int64, Int64, String, Int64, Int64, Int64, String, String, Extra).self) {
            result.append((AlertsV1.Delivery(deliveryId: UInt64(id), source: source, channel: AlertsV1.Channel(rawValue: Self.raw(channel)),
                                             recipientUserId: UInt64(user), address: address, body: body,
                                             status: AlertsV1.DeliveryStatus(rawValue: Self.raw(status)), attempts: UInt32(clamping: attempts),
                                             lastError: error, createdAtMs: created, updatedAtMs: updated, nextAttemptAtMs: next,
                                             provider: provider, reference: reference), more))
        }
        return result
    }

    func outbox(status: AlertsV1.DeliveryStatus, recipient: UInt64, beforeID: UInt64, limit: Int) async throws -> [AlertsV1.Delivery] {
        try await database.snapshot { connection in
            let before = beforeID == 0 ? Int64.max : Int64(clamping: beforeID)
            let rows = try await deliveries(connection.query("""
                SELECT \(unescaped: RecordColumns.delivery), 0::bigint FROM outbox
                WHERE id < \(before) AND (\(Int64(status.rawValue)) = 0 OR status = \(Int64(status.rawValue)))
                  AND (\(Int64(recipient)) = 0 OR recipient_user = \(Int64(recipient)))
                ORDER BY id DESC LIMIT \(Int64(limit))
                """, logger: logger), extra: Int64.self).map(\.0)
            var result: [AlertsV1.Delivery] = []
            for var d in rows {
                d.attemptLog = try await attempts(connection, of: d.deliveryId)
                result.append(d)
            }
            return result
        }
    }

    /// Takes the due rows no other pass holds (`FOR UPDATE SKIP LOCKED`), claimed by this
    /// instance until `claimUntil`; rows this instance claimed before are its own dead pass's
    /// (one pass at a time per instance) and are taken again at once. An attempt of a taken row
    /// still SENDING belongs to a pass that never finished: it becomes INTERRUPTED.
    func takeDue(at: Int64, limit: Int, claimUntil: Int64) async throws -> (rows: [AlertsV1.Delivery], platforms: [UInt64: AlertsV1.Platform]) {
        try await database.transaction { connection in
            let taken = try await deliveries(connection.query("""
                WITH due AS (
                    SELECT id AS due_id FROM outbox WHERE status = 1 AND next_attempt_ms <= \(at) AND (claimed_until_ms <= \(at) OR claimed_by = \(instance))
                    ORDER BY next_attempt_ms, id LIMIT \(Int64(limit)) FOR UPDATE SKIP LOCKED)
                UPDATE outbox o SET claimed_by = \(instance), claimed_until_ms = \(claimUntil) FROM due WHERE o.id = due.due_id
                RETURNING \(unescaped: RecordColumns.delivery),
                    (SELECT platform FROM devices d WHERE d.token = o.address AND o.channel = \(Int64(AlertsV1.Channel.push.rawValue)))
                """, logger: logger), extra: Int64?.self)
            let ids = taken.map { Int64($0.0.deliveryId) }
            if !ids.isEmpty {
                try await connection.query("""
                    UPDATE delivery_attempts SET outcome = \(Int64(AlertsV1.AttemptOutcome.interrupted.rawValue)), finished_ms = \(at),
                        error = \(AttemptLog.interrupted)
                    WHERE outcome = 1 AND delivery_id = ANY(\(ids))
                    """, logger: logger)
            }
            var platforms: [UInt64: AlertsV1.Platform] = [:]
            for (d, platform) in taken {
                if let platform { platforms[d.deliveryId] = AlertsV1.Platform(rawValue: Self.raw(platform)) }
            }
            let rows = taken.map(\.0).sorted { ($0.nextAttemptAtMs, $0.deliveryId) < ($1.nextAttemptAtMs, $1.deliveryId) }
            return (rows, platforms)
        }
    }

    func beginAttempts(_ attempts: [(delivery: UInt64, provider: String)], at: Int64) async throws {
        try await database.transaction { connection in
            for attempt in attempts {
                try await connection.query("""
                    INSERT INTO delivery_attempts (delivery_id, attempt, started_ms, provider, outcome)
                    SELECT \(Int64(attempt.delivery)), COALESCE(max(attempt), 0) + 1, \(at), \(attempt.provider),
                           \(Int64(AlertsV1.AttemptOutcome.sending.rawValue))
                    FROM delivery_attempts WHERE delivery_id = \(Int64(attempt.delivery))
                    """, logger: logger)
            }
        }
    }

    /// Records the pass on the rows this instance still holds: a row another instance took
    /// after this pass's claim ran out is that instance's to record.
    func finishPass(_ updated: [AlertsV1.Delivery], answers: [(delivery: UInt64, provider: String, result: DeliveryResult)],
                    begun: Set<UInt64>, at: Int64, deadTokens: Set<String>,
                    sent: [(message: OutgoingMessage, provider: String)]) async throws -> Int64? {
        try await database.transaction { connection in
            // Every message the built-in providers took (a row whose claim ran out too: the other
            // instance's record of it, with the same key, then changes nothing).
            for s in sent { try await recordSent(connection, s.message, provider: s.provider, at: at) }
            var held = Set<UInt64>()
            for d in updated {
                let changed = try await PostgresServiceDatabase.count(connection.query("""
                    UPDATE outbox SET status = \(Int64(d.status.rawValue)), attempts = \(Int64(d.attempts)), provider = \(d.provider),
                        address = \(d.address), last_error = \(d.lastError), updated_at_ms = \(d.updatedAtMs), next_attempt_ms = \(d.nextAttemptAtMs),
                        reference = \(d.reference), claimed_by = '', claimed_until_ms = 0
                    WHERE id = \(Int64(d.deliveryId)) AND claimed_by = \(instance) RETURNING 1
                    """, logger: logger))
                if changed > 0 { held.insert(d.deliveryId) } else {
                    logger.warning("a delivery's claim ran out before its pass finished: another instance took it",
                                   metadata: ["delivery": "\(d.deliveryId)"])
                }
            }
            for answer in answers where held.contains(answer.delivery) {
                let a = AttemptLog.Answer(answer.result)
                let key = Int64(answer.delivery)
                if begun.contains(answer.delivery) {
                    let finished = try await PostgresServiceDatabase.count(connection.query("""
                        UPDATE delivery_attempts SET outcome = \(Int64(a.outcome)), finished_ms = \(at), reference = \(a.reference), error = \(a.error),
                            retry_after_ms = \(a.retryAfterMs)
                        WHERE delivery_id = \(key) AND outcome = 1 RETURNING 1
                        """, logger: logger))
                    if finished > 0 { continue }
                }
                try await connection.query("""
                    INSERT INTO delivery_attempts (delivery_id, attempt, started_ms, finished_ms, provider, outcome, reference, error, retry_after_ms)
                    SELECT \(key), COALESCE(max(attempt), 0) + 1, \(at), \(at), \(answer.provider), \(Int64(a.outcome)), \(a.reference), \(a.error),
                           \(a.retryAfterMs)
                    FROM delivery_attempts WHERE delivery_id = \(key)
                    """, logger: logger)
            }
            if !deadTokens.isEmpty {
                try await connection.query("DELETE FROM devices WHERE token = ANY(\(Array(deadTokens)))", logger: logger)
            }
            return try await nextDue(connection)
        }
    }

    func attempts(_ connection: PostgresConnection, of delivery: UInt64) async throws -> [AlertsV1.DeliveryAttempt] {
        var attempts: [AlertsV1.DeliveryAttempt] = []
        for try await (attempt, started, finished, provider, outcome, reference, error, retryAfter) in try await connection.query("""
            SELECT attempt, started_ms, finished_ms, provider, outcome, reference, error, retry_after_ms FROM delivery_attempts
            WHERE delivery_id = \(Int64(delivery)) ORDER BY attempt
            """, logger: logger).decode((Int64, Int64, Int64, String, Int64, String, String, Int64).self) {
            attempts.append(AlertsV1.DeliveryAttempt(attempt: UInt32(clamping: attempt), startedAtMs: started, finishedAtMs: finished, provider: provider,
                                                     outcome: AlertsV1.AttemptOutcome(rawValue: Self.raw(outcome)), reference: reference, error: error,
                                                     retryAfterMs: retryAfter))
        }
        return attempts
    }

    /// When the next pending row is due, or a claim on one runs out.
    func nextDue() async throws -> Int64? {
        try await database.read { connection in try await nextDue(connection) }
    }

    private func nextDue(_ connection: PostgresConnection) async throws -> Int64? {
        try await PostgresServiceDatabase.first(connection.query(
            "SELECT min(greatest(next_attempt_ms, claimed_until_ms)) FROM outbox WHERE status = 1", logger: logger), Int64?.self) ?? nil
    }

    func pendingByChannel() async throws -> [(channel: AlertsV1.Channel, count: Int, oldestMs: Int64)] {
        try await database.read { connection in
            var result: [(channel: AlertsV1.Channel, count: Int, oldestMs: Int64)] = []
            for try await (channel, count, oldest) in try await connection.query(
                "SELECT channel, count(*), min(created_at_ms) FROM outbox WHERE status = 1 GROUP BY channel", logger: logger)
                .decode((Int64, Int64, Int64).self) {
                result.append((AlertsV1.Channel(rawValue: Self.raw(channel)), Int(count), oldest))
            }
            return result
        }
    }

    func pruneOutbox(before cutoff: Int64) async throws -> Int {
        try await database.transaction { connection in
            let deleted = try await PostgresServiceDatabase.count(connection.query("""
                DELETE FROM outbox WHERE status != \(Int64(AlertsV1.DeliveryStatus.pending.rawValue)) AND updated_at_ms < \(cutoff) RETURNING 1
                """, logger: logger))
            try await connection.query("DELETE FROM sent_messages WHERE sent_at_ms < \(cutoff)", logger: logger)
            return deleted
        }
    }

    func recordSent(_ messages: [OutgoingMessage], provider: String, at: Int64) async throws {
        try await database.transaction { connection in
            for m in messages { try await recordSent(connection, m, provider: provider, at: at) }
        }
    }

    private func recordSent(_ connection: PostgresConnection, _ m: OutgoingMessage, provider: String, at: Int64) async throws {
        try await connection.query("""
            INSERT INTO sent_messages (idempotency_key, provider, channel, address, body, sent_at_ms)
            VALUES (\(m.idempotencyKey), \(provider), \(Int64(m.channel.rawValue)), \(m.address), \(m.body), \(at))
            ON CONFLICT (idempotency_key) DO NOTHING
            """, logger: logger)
    }

    func sentMessages() async throws -> [(channel: Int32, address: String, body: String)] {
        try await database.read { connection in
            var sent: [(channel: Int32, address: String, body: String)] = []
            for try await (channel, address, body) in try await connection.query(
                "SELECT channel, address, body FROM sent_messages ORDER BY seq", logger: logger).decode((Int64, String, String).self) {
                sent.append((Self.raw(channel), address, body))
            }
            return sent
        }
    }

    // MARK: Devices, inbox, resources

    func registerDevice(token: String, user: UInt64, platform: AlertsV1.Platform, appVersion: String, at: Int64) async throws -> UInt64? {
        try await database.write { connection in
            let previous = try await PostgresServiceDatabase.first(connection.query(
                "SELECT user_id FROM devices WHERE token = \(token) FOR UPDATE", logger: logger), Int64.self).map(UInt64.init)
            try await connection.query("""
                INSERT INTO devices (token, user_id, platform, app_version, registered_at_ms)
                VALUES (\(token), \(Int64(user)), \(Int64(platform.rawValue)), \(appVersion), \(at))
                ON CONFLICT (token) DO UPDATE SET user_id = excluded.user_id, platform = excluded.platform, app_version = excluded.app_version,
                    registered_at_ms = excluded.registered_at_ms
                """, logger: logger)
            return previous.flatMap { $0 == user ? nil : $0 }
        }
    }

    func unregisterDevice(token: String, user: UInt64) async throws -> Bool {
        try await database.write { connection in
            try await PostgresServiceDatabase.count(connection.query(
                "DELETE FROM devices WHERE token = \(token) AND user_id = \(Int64(user)) RETURNING 1", logger: logger)) == 1
        }
    }

    func devices(of user: UInt64) async throws -> [AlertsV1.Device] {
        try await database.read { connection in
            var devices: [AlertsV1.Device] = []
            for try await (token, platform, version, at) in try await connection.query(
                "SELECT token, platform, app_version, registered_at_ms FROM devices WHERE user_id = \(Int64(user)) ORDER BY registered_at_ms",
                logger: logger).decode((String, Int64, String, Int64).self) {
                devices.append(AlertsV1.Device(token: token, platform: AlertsV1.Platform(rawValue: Self.raw(platform)), appVersion: version,
                                               registeredAtMs: at))
            }
            return devices
        }
    }

    func inbox(of user: UInt64, at: Int64) async throws -> InboxRows {
        try await database.snapshot { connection in
            var rows = InboxRows()
            let id = Int64(user)
            for try await (session, initiator, note, started, ends) in try await connection.query("""
                SELECT s.id, s.initiator, s.note, s.started_at_ms, s.ends_at_ms FROM watchers w JOIN watch_sessions s ON s.id = w.session_id
                WHERE w.watcher = \(id) AND w.answer = 1 AND NOT w.dismissed AND s.state = 1 AND s.ends_at_ms > \(at) ORDER BY s.id DESC
                """, logger: logger).decode((Int64, Int64, String, Int64, Int64).self) {
                rows.watches.append((UInt64(session), UInt64(initiator), note, started, ends))
            }
            for try await (alert, initiator, message, raised, location) in try await connection.query("""
                SELECT a.id, a.initiator, a.message, a.raised_at_ms, a.location FROM recipients r JOIN help_alerts a ON a.id = r.alert_id
                WHERE r.user_id = \(id) AND r.answer = 1 AND NOT r.dismissed AND a.state = 1 ORDER BY a.id DESC
                """, logger: logger).decode((Int64, Int64, String, Int64, Data).self) {
                rows.alerts.append((UInt64(alert), UInt64(initiator), message, raised, AlertsV1.AlertLocation.stored(location)))
            }
            for try await (owner, requested) in try await connection.query(
                "SELECT owner, requested_at_ms FROM dismissed_circle_requests WHERE member = \(id)", logger: logger).decode((Int64, Int64).self) {
                rows.dismissed.insert("\(owner):\(requested)")
            }
            return rows
        }
    }

    func dismissCircleRequest(member: UInt64, owner: UInt64, requestedAtMs: Int64) async throws {
        try await database.write { connection in
            try await connection.query("""
                INSERT INTO dismissed_circle_requests (member, owner, requested_at_ms) VALUES (\(Int64(member)), \(Int64(owner)), \(requestedAtMs))
                ON CONFLICT DO NOTHING
                """, logger: logger)
        }
    }

    func replaceResources(_ byCampus: [String: [AlertsV1.Resource]]) async throws {
        try await database.write { connection in
            for (campus, resources) in byCampus {
                try await connection.query("DELETE FROM resources WHERE campus = \(campus)", logger: logger)
                for (position, r) in resources.enumerated() {
                    try await connection.query("""
                        INSERT INTO resources (campus, position, title, detail, phone, url)
                        VALUES (\(campus), \(Int64(position)), \(r.title), \(r.detail), \(r.phone), \(r.url))
                        """, logger: logger)
                }
            }
        }
    }

    func resources(campus: String) async throws -> [AlertsV1.Resource] {
        try await database.read { connection in
            var resources: [AlertsV1.Resource] = []
            // SQLite's COLLATE NOCASE folds ASCII letters only: so does this.
            for try await (campus, title, detail, phone, url) in try await connection.query("""
                SELECT campus, title, detail, phone, url FROM resources
                WHERE \(campus) = '' OR translate(campus, 'ABCDEFGHIJKLMNOPQRSTUVWXYZ', 'abcdefghijklmnopqrstuvwxyz')
                                      = translate(\(campus), 'ABCDEFGHIJKLMNOPQRSTUVWXYZ', 'abcdefghijklmnopqrstuvwxyz')
                ORDER BY campus COLLATE "C", position
                """, logger: logger).decode((String, String, String, String, String).self) {
                resources.append(AlertsV1.Resource(campus: campus, title: title, detail: detail, phone: phone, url: url))
            }
            return resources
        }
    }
}
