import Foundation
import FriensoProto
import Logging
import PostgresNIO
import Storage
import Wire

/// Erasure and export on PostgreSQL.
extension PostgresAlertsStore {
    // MARK: Erasure and export

    func erase(_ user: UInt64, addresses: [String], traces: [String]) async throws -> Int {
        try await database.write { connection in
            let id = Int64(user)
            var erased = 0
            func run(_ query: PostgresQuery) async throws {
                erased += try await PostgresServiceDatabase.count(connection.prepared(query, logger: logger))
            }
            let watches = try await PostgresServiceDatabase.ids(connection.prepared("SELECT id FROM watch_sessions WHERE initiator = \(id)", logger: logger)).map { Int64($0) }
            let alerts = try await PostgresServiceDatabase.ids(connection.prepared("SELECT id FROM help_alerts WHERE initiator = \(id)", logger: logger)).map { Int64($0) }
            let timers = try await PostgresServiceDatabase.ids(connection.prepared("SELECT id FROM timers WHERE owner = \(id)", logger: logger))
            let (sources, patterns) = OutboxRows.erasedSources(alerts: alerts.map { UInt64($0) }, watches: watches.map { UInt64($0) },
                                                               timers: timers, user: user)
            let deliveries = try await PostgresServiceDatabase.ids(connection.prepared("""
                SELECT id FROM outbox WHERE about_user = \(id) OR recipient_user = \(id) OR address = ANY(\(addresses)) OR source = ANY(\(sources))
                    OR source LIKE \(patterns[0]) OR source LIKE \(patterns[1])
                """, logger: logger)).map { Int64($0) }
            let keys = deliveries.map { OutgoingMessage.idempotencyKey(ofDelivery: UInt64($0)) }
            try await run("DELETE FROM sent_messages WHERE idempotency_key = ANY(\(keys)) OR address = ANY(\(addresses)) RETURNING 1")
            try await run("DELETE FROM outbox WHERE id = ANY(\(deliveries)) RETURNING 1")
            try await run("DELETE FROM watchers WHERE session_id = ANY(\(watches)) OR watcher = \(id) RETURNING 1")
            try await run("DELETE FROM watch_sessions WHERE initiator = \(id) RETURNING 1")
            try await run("DELETE FROM emergency_prompts WHERE alert_id = ANY(\(alerts)) OR user_id = \(id) RETURNING 1")
            try await run("DELETE FROM recipients WHERE alert_id = ANY(\(alerts)) OR user_id = \(id) OR phone = ANY(\(addresses)) RETURNING 1")
            try await run("DELETE FROM escalations WHERE alert_id = ANY(\(alerts)) RETURNING 1")
            try await run("DELETE FROM help_alerts WHERE initiator = \(id) RETURNING 1")
            try await run("DELETE FROM timers WHERE owner = \(id) RETURNING 1")
            try await run("DELETE FROM grants WHERE subject = \(id) OR viewer = \(id) RETURNING 1")
            try await run("DELETE FROM devices WHERE user_id = \(id) RETURNING 1")
            try await run("DELETE FROM dismissed_circle_requests WHERE member = \(id) OR owner = \(id) RETURNING 1")
            erased += try await PostgresReplyStore.eraseReplies(connection, of: user, mentioning: traces, logger: logger)
            return erased
        }
    }

    func scrubErasedRows() async throws {
        try await database.read { connection in
            try await connection.query(PostgresQuery(unsafeSQL: "VACUUM \(Self.tables.joined(separator: ", "))"), logger: logger)
        }
    }

    func exportRows(of user: UInt64) async throws -> ExportRows {
        let id = Int64(user)
        var rows = ExportRows()
        rows.watches = try await watches("SELECT id FROM watch_sessions WHERE initiator = \(id) ORDER BY id DESC")
        rows.watched = try await watches("SELECT DISTINCT session_id FROM watchers WHERE watcher = \(id) ORDER BY session_id DESC")
        rows.alerts = try await alerts("SELECT id FROM help_alerts WHERE initiator = \(id) ORDER BY id DESC")
        rows.alertsReceived = try await alerts("SELECT DISTINCT alert_id FROM recipients WHERE user_id = \(id) ORDER BY alert_id DESC")
        rows.deliveries = try await database.read { connection in
            try await deliveries(connection.prepared("""
                SELECT \(unescaped: RecordColumns.delivery), 0::bigint FROM outbox WHERE recipient_user = \(id) OR about_user = \(id) ORDER BY id DESC
                """, logger: logger), extra: Int64.self).map(\.0)
        }
        rows.timers = try await timers("SELECT \(unescaped: RecordColumns.timer) FROM timers WHERE owner = \(id) ORDER BY id DESC")
        return rows
    }
}
