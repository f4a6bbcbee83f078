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
        // Two statements whatever the number of messages: every recipient's devices, then every
        // row (one round trip each, not one per recipient and per row: item 125).
        var tokens: [UInt64: [String]] = [:]
        let pushUsers = OutboxRows.pushUsers(messages)
        if !pushUsers.isEmpty {
            for try await (user, token) in try await connection.prepared("""
                SELECT user_id, token FROM devices WHERE user_id = ANY(\(pushUsers.map { Int64($0) })::bigint[]) ORDER BY user_id, registered_at_ms, token COLLATE "C"
                """, logger: logger).decode((Int64, String).self) {
                tokens[UInt64(user), default: []].append(token)
            }
        }
        let rows = OutboxRows.rows(messages, tokens: tokens)
        guard !rows.isEmpty else { return [] }
        // Ids are drawn as the rows are inserted, in the order of the unnest: `rows`' order.
        var inserted = Set<String>()
        for try await key in try await connection.prepared("""
            INSERT INTO outbox (dedupe_key, source, channel, recipient_user, address, body, status, last_error,
                                created_at_ms, updated_at_ms, next_attempt_ms, about_user)
            SELECT k, s, c, u, a, b, st, e, \(now), \(now), \(now), ab
            FROM unnest(\(rows.map(\.dedupeKey))::text[], \(rows.map(\.message.source))::text[], \(rows.map { Int64($0.channel.rawValue) })::bigint[],
                        \(rows.map { Int64($0.user) })::bigint[], \(rows.map(\.address))::text[], \(rows.map(\.message.body))::text[],
                        \(rows.map { Int64($0.status.rawValue) })::bigint[], \(rows.map(\.error))::text[],
                        \(rows.map { Int64($0.message.about) })::bigint[]) AS r(k, s, c, u, a, b, st, e, ab)
            ON CONFLICT (dedupe_key) DO NOTHING RETURNING dedupe_key
            """, logger: logger).decode(String.self) {
            inserted.insert(key)
        }
        // A key twice in `rows` was inserted once, by its first row.
        var seen = Set<String>()
        return rows.filter { inserted.contains($0.dedupeKey) && seen.insert($0.dedupeKey).inserted }
    }

    func enqueue(_ messages: [Outgoing], at: Int64, cursor: (name: String, value: UInt64)?) async throws -> Int {
        try await database.write { connection in
            let added = try await enqueue(connection, messages, now: at).count
            if let cursor {
                try await connection.prepared("""
                    INSERT INTO cursors (name, value) VALUES (\(cursor.name), \(Int64(cursor.value)))
                    ON CONFLICT (name) DO UPDATE SET value = greatest(cursors.value, excluded.value)
                    """, logger: logger)
            }
            return added
        }
    }

    func cursor(_ name: String) async throws -> UInt64 {
        try await database.read { connection in
            UInt64(try await PostgresServiceDatabase.first(connection.prepared("SELECT value FROM cursors WHERE name = \(name)", logger: logger), Int64.self) ?? 0)
        }
    }

    // MARK: Deliveries

    /// Deliveries from rows of `RecordColumns.delivery`, with an extra column of `Extra`.
    func deliveries<Extra: PostgresDecodable & Sendable, Rows: AsyncSequence>(_ rows: Rows, extra: Extra.Type) async throws -> [(AlertsV1.Delivery, Extra)] where Rows.Element == PostgresRow {
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
            let rows = try await deliveries(connection.prepared("""
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
            let taken = try await deliveries(connection.prepared("""
                WITH due AS (
                    SELECT id AS due_id FROM outbox WHERE status = 1 AND next_attempt_ms <= \(at) AND (claimed_until_ms <= \(at) OR claimed_by = \(instance))
                    ORDER BY next_attempt_ms, id LIMIT \(Int64(limit)) FOR UPDATE SKIP LOCKED)
                UPDATE outbox o SET claimed_by = \(instance), claimed_until_ms = \(claimUntil) FROM due WHERE o.id = due.due_id
                RETURNING \(unescaped: RecordColumns.delivery),
                    (SELECT platform FROM devices d WHERE d.token = o.address AND o.channel = \(Int64(AlertsV1.Channel.push.rawValue)))
                """, logger: logger), extra: Int64?.self)
            let ids = taken.map { Int64($0.0.deliveryId) }
            if !ids.isEmpty {
                try await connection.prepared("""
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
        guard !attempts.isEmpty else { return }
        try await database.transaction { connection in
            // One statement for the pass (item 125). Each delivery's next attempt number comes
            // from the rows before the statement; a delivery listed twice gets the next two.
            try await connection.prepared("""
                INSERT INTO delivery_attempts (delivery_id, attempt, started_ms, provider, outcome)
                SELECT a.d, COALESCE((SELECT max(attempt) FROM delivery_attempts x WHERE x.delivery_id = a.d), 0)
                            + row_number() OVER (PARTITION BY a.d ORDER BY a.n),
                       \(at), a.p, \(Int64(AlertsV1.AttemptOutcome.sending.rawValue))
                FROM unnest(\(attempts.map { Int64($0.delivery) })::bigint[], \(attempts.map(\.provider))::text[]) WITH ORDINALITY AS a(d, p, n)
                """, logger: logger)
        }
    }

    /// Records the pass on the rows this instance still holds: a row another instance took
    /// after this pass's claim ran out is that instance's to record. A handful of statements
    /// whatever the pass's size (each was one per row and per answer: item 125).
    func finishPass(_ updated: [AlertsV1.Delivery], answers: [(delivery: UInt64, provider: String, result: DeliveryResult)],
                    begun: Set<UInt64>, at: Int64, deadTokens: Set<String>,
                    sent: [(message: OutgoingMessage, provider: String)]) async throws -> Int64? {
        try await database.transaction { connection in
            // Every message the built-in providers took (a row whose claim ran out too: the other
            // instance's record of it, with the same key, then changes nothing).
            try await recordSent(connection, sent, at: at)
            // A row listed twice is written by its first listing: its claim is gone after it.
            var listed = Set<UInt64>()
            let rows = updated.filter { listed.insert($0.deliveryId).inserted }
            var held = Set<UInt64>()
            if !rows.isEmpty {
                for try await id in try await connection.prepared("""
                    UPDATE outbox o SET status = u.st, attempts = u.at, provider = u.pr, address = u.ad, last_error = u.er,
                        updated_at_ms = u.up, next_attempt_ms = u.nx, reference = u.rf, claimed_by = '', claimed_until_ms = 0
                    FROM unnest(\(rows.map { Int64($0.deliveryId) })::bigint[], \(rows.map { Int64($0.status.rawValue) })::bigint[],
                                \(rows.map { Int64($0.attempts) })::bigint[], \(rows.map(\.provider))::text[], \(rows.map(\.address))::text[],
                                \(rows.map(\.lastError))::text[], \(rows.map(\.updatedAtMs))::bigint[], \(rows.map(\.nextAttemptAtMs))::bigint[],
                                \(rows.map(\.reference))::text[]) AS u(id, st, at, pr, ad, er, up, nx, rf)
                    WHERE o.id = u.id AND o.claimed_by = \(instance) RETURNING o.id
                    """, logger: logger).decode(Int64.self) {
                    held.insert(UInt64(id))
                }
            }
            for d in updated where !held.contains(d.deliveryId) {
                logger.warning("a delivery's claim ran out before its pass finished: another instance took it",
                               metadata: ["delivery": "\(d.deliveryId)"])
            }
            // The attempt a begun delivery logged as SENDING gets its answer (its first answer
            // only: that row is not SENDING after it); every other answer is a new attempt.
            var answered = Set<UInt64>()
            let recorded = answers.filter { held.contains($0.delivery) }.map {
                (delivery: $0.delivery, provider: $0.provider, answer: AttemptLog.Answer($0.result), first: answered.insert($0.delivery).inserted)
            }
            let finishing = recorded.filter { $0.first && begun.contains($0.delivery) }
            var finished = Set<UInt64>()
            if !finishing.isEmpty {
                for try await id in try await connection.prepared("""
                    UPDATE delivery_attempts d SET outcome = a.oc, finished_ms = \(at), reference = a.rf, error = a.er, retry_after_ms = a.ra
                    FROM unnest(\(finishing.map { Int64($0.delivery) })::bigint[], \(finishing.map { Int64($0.answer.outcome) })::bigint[],
                                \(finishing.map(\.answer.reference))::text[], \(finishing.map(\.answer.error))::text[],
                                \(finishing.map(\.answer.retryAfterMs))::bigint[]) AS a(id, oc, rf, er, ra)
                    WHERE d.delivery_id = a.id AND d.outcome = 1 RETURNING d.delivery_id
                    """, logger: logger).decode(Int64.self) {
                    finished.insert(UInt64(id))
                }
            }
            let added = recorded.filter { !($0.first && begun.contains($0.delivery) && finished.contains($0.delivery)) }
            if !added.isEmpty {
                try await connection.prepared("""
                    INSERT INTO delivery_attempts (delivery_id, attempt, started_ms, finished_ms, provider, outcome, reference, error, retry_after_ms)
                    SELECT a.id, COALESCE((SELECT max(attempt) FROM delivery_attempts x WHERE x.delivery_id = a.id), 0)
                                 + row_number() OVER (PARTITION BY a.id ORDER BY a.n),
                           \(at), \(at), a.pr, a.oc, a.rf, a.er, a.ra
                    FROM unnest(\(added.map { Int64($0.delivery) })::bigint[], \(added.map(\.provider))::text[],
                                \(added.map { Int64($0.answer.outcome) })::bigint[], \(added.map(\.answer.reference))::text[],
                                \(added.map(\.answer.error))::text[], \(added.map(\.answer.retryAfterMs))::bigint[]) WITH ORDINALITY AS a(id, pr, oc, rf, er, ra, n)
                    """, logger: logger)
            }
            if !deadTokens.isEmpty {
                try await connection.prepared("DELETE FROM devices WHERE token = ANY(\(Array(deadTokens)))", logger: logger)
            }
            return try await nextDue(connection)
        }
    }

    func attempts(_ connection: PostgresConnection, of delivery: UInt64) async throws -> [AlertsV1.DeliveryAttempt] {
        var attempts: [AlertsV1.DeliveryAttempt] = []
        for try await (attempt, started, finished, provider, outcome, reference, error, retryAfter) in try await connection.prepared("""
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
        try await PostgresServiceDatabase.first(connection.prepared(
            "SELECT min(greatest(next_attempt_ms, claimed_until_ms)) FROM outbox WHERE status = 1", logger: logger), Int64?.self) ?? nil
    }

    func pendingByChannel() async throws -> [(channel: AlertsV1.Channel, count: Int, oldestMs: Int64)] {
        try await database.read { connection in
            var result: [(channel: AlertsV1.Channel, count: Int, oldestMs: Int64)] = []
            for try await (channel, count, oldest) in try await connection.prepared(
                "SELECT channel, count(*), min(created_at_ms) FROM outbox WHERE status = 1 GROUP BY channel", logger: logger)
                .decode((Int64, Int64, Int64).self) {
                result.append((AlertsV1.Channel(rawValue: Self.raw(channel)), Int(count), oldest))
            }
            return result
        }
    }

    func recordSent(_ messages: [OutgoingMessage], provider: String, at: Int64) async throws {
        try await database.transaction { connection in
            try await recordSent(connection, messages.map { (message: $0, provider: provider) }, at: at)
        }
    }

    /// One statement for all of `sent` (item 125); a key recorded before keeps its first record.
    private func recordSent(_ connection: PostgresConnection, _ sent: [(message: OutgoingMessage, provider: String)], at: Int64) async throws {
        guard !sent.isEmpty else { return }
        try await connection.prepared("""
            INSERT INTO sent_messages (idempotency_key, provider, channel, address, body, sent_at_ms)
            SELECT k, p, c, a, b, \(at)
            FROM unnest(\(sent.map(\.message.idempotencyKey))::text[], \(sent.map(\.provider))::text[],
                        \(sent.map { Int64($0.message.channel.rawValue) })::bigint[], \(sent.map(\.message.address))::text[],
                        \(sent.map(\.message.body))::text[]) AS m(k, p, c, a, b)
            ON CONFLICT (idempotency_key) DO NOTHING
            """, logger: logger)
    }

    func sentMessages() async throws -> [(channel: Int32, address: String, body: String)] {
        try await database.read { connection in
            var sent: [(channel: Int32, address: String, body: String)] = []
            for try await (channel, address, body) in try await connection.prepared(
                "SELECT channel, address, body FROM sent_messages ORDER BY seq", logger: logger).decode((Int64, String, String).self) {
                sent.append((Self.raw(channel), address, body))
            }
            return sent
        }
    }

    // MARK: Devices, inbox, resources

    func registerDevice(token: String, user: UInt64, platform: AlertsV1.Platform, appVersion: String, at: Int64) async throws -> UInt64? {
        try await database.write { connection in
            let previous = try await PostgresServiceDatabase.first(connection.prepared(
                "SELECT user_id FROM devices WHERE token = \(token) FOR UPDATE", logger: logger), Int64.self).map(UInt64.init)
            try await connection.prepared("""
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
            try await PostgresServiceDatabase.count(connection.prepared(
                "DELETE FROM devices WHERE token = \(token) AND user_id = \(Int64(user)) RETURNING 1", logger: logger)) == 1
        }
    }

    func devices(of user: UInt64) async throws -> [AlertsV1.Device] {
        try await database.read { connection in
            var devices: [AlertsV1.Device] = []
            for try await (token, platform, version, at) in try await connection.prepared(
                "SELECT token, platform, app_version, registered_at_ms FROM devices WHERE user_id = \(Int64(user)) ORDER BY registered_at_ms, token COLLATE \"C\"",
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
            for try await (session, initiator, note, started, ends) in try await connection.prepared("""
                SELECT s.id, s.initiator, s.note, s.started_at_ms, s.ends_at_ms FROM watchers w JOIN watch_sessions s ON s.id = w.session_id
                WHERE w.watcher = \(id) AND w.answer = 1 AND NOT w.dismissed AND s.state = 1 AND s.ends_at_ms > \(at) ORDER BY s.id DESC
                """, logger: logger).decode((Int64, Int64, String, Int64, Int64).self) {
                rows.watches.append((UInt64(session), UInt64(initiator), note, started, ends))
            }
            for try await (alert, initiator, message, raised, location) in try await connection.prepared("""
                SELECT a.id, a.initiator, a.message, a.raised_at_ms, a.location FROM recipients r JOIN help_alerts a ON a.id = r.alert_id
                WHERE r.user_id = \(id) AND r.answer = 1 AND NOT r.dismissed AND a.state = 1 ORDER BY a.id DESC
                """, logger: logger).decode((Int64, Int64, String, Int64, Data).self) {
                rows.alerts.append((UInt64(alert), UInt64(initiator), message, raised, AlertsV1.AlertLocation.stored(location)))
            }
            for try await (owner, requested) in try await connection.prepared(
                "SELECT owner, requested_at_ms FROM dismissed_circle_requests WHERE member = \(id)", logger: logger).decode((Int64, Int64).self) {
                rows.dismissed.insert("\(owner):\(requested)")
            }
            return rows
        }
    }

    func dismissCircleRequest(member: UInt64, owner: UInt64, requestedAtMs: Int64) async throws {
        try await database.write { connection in
            try await connection.prepared("""
                INSERT INTO dismissed_circle_requests (member, owner, requested_at_ms) VALUES (\(Int64(member)), \(Int64(owner)), \(requestedAtMs))
                ON CONFLICT DO NOTHING
                """, logger: logger)
        }
    }

    func replaceResources(_ byCampus: [String: [AlertsV1.Resource]]) async throws {
        try await database.write { connection in
            for (campus, resources) in byCampus {
                try await connection.prepared("DELETE FROM resources WHERE campus = \(campus)", logger: logger)
                for (position, r) in resources.enumerated() {
                    try await connection.prepared("""
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
            for try await (campus, title, detail, phone, url) in try await connection.prepared("""
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
