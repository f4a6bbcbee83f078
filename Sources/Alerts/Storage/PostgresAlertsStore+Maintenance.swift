import FriensoProto
import PostgresNIO
import Storage

/// Retention: the hourly prune of ended deliveries (`AlertsService.pruneOutbox`).
extension PostgresAlertsStore {
    /// The hourly prune's statements, read from the oldest id up to the first row made since
    /// `cutoff`, as on SQLite (`SQLiteAlertsStore.pruneOutboxSQL`): not a walk of 90 days of
    /// deliveries each hour (4.5M rows: 324 ms, and 200 ms for `sent_messages`; now 1.6 and 0.9
    /// ms, item 157). The status is in the text, as every outbox read's is.
    static func pruneOutbox(before cutoff: Int64) -> PostgresQuery {
        """
        DELETE FROM outbox
        WHERE id < COALESCE((SELECT id FROM outbox WHERE created_at_ms >= \(cutoff) ORDER BY id LIMIT 1), \(unescaped: String(Int64.max)))
          AND status != \(unescaped: String(AlertsV1.DeliveryStatus.pending.rawValue)) AND updated_at_ms < \(cutoff)
        RETURNING 1
        """
    }

    static func pruneSent(before cutoff: Int64) -> PostgresQuery {
        """
        DELETE FROM sent_messages
        WHERE seq < COALESCE((SELECT seq FROM sent_messages WHERE sent_at_ms >= \(cutoff) ORDER BY seq LIMIT 1), \(unescaped: String(Int64.max)))
          AND sent_at_ms < \(cutoff)
        """
    }

    func pruneOutbox(before cutoff: Int64) async throws -> Int {
        try await database.transaction { connection in
            let deleted = try await PostgresServiceDatabase.count(connection.prepared(Self.pruneOutbox(before: cutoff), logger: logger))
            try await connection.prepared(Self.pruneSent(before: cutoff), logger: logger)
            return deleted
        }
    }
}
