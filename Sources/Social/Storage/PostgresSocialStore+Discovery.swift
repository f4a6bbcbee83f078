import FriensoProto
import Logging
import PostgresNIO
import Storage

extension ExchangeRecord {
    static let columns = "id, user_a, user_b, exchanged_at_ms, latitude, longitude, place_label"
    typealias Columns = (Int64, Int64, Int64, Int64, Double?, Double?, String)

    init(_ row: Columns) {
        let location = row.4.flatMap { lat in row.5.map { ExchangeLocation(latitude: lat, longitude: $0) } }
        self.init(id: UInt64(row.0), userA: UInt64(row.1), userB: UInt64(row.2), exchangedAtMs: row.3, location: location, placeLabel: row.6)
    }
}

/// The findable setting, contact exchange, and the reads recommendations and search filter by,
/// on PostgreSQL (the rules as `Discovery.swift` states them).
extension PostgresSocialStore {
    static func exchangeRows<Rows: AsyncSequence>(_ rows: Rows) async throws -> [ExchangeRecord] where Rows.Element == PostgresRow {
        var records: [ExchangeRecord] = []
        for try await row in rows.decode(ExchangeRecord.Columns.self) { records.append(ExchangeRecord(row)) }
        return records
    }

    func findable(_ user: UInt64) async throws -> Bool {
        try await database.read { connection in try await Self.isFindable(connection, user, logger: logger) }
    }

    func setFindable(_ user: UInt64, _ on: Bool, now: Int64) async throws -> Bool {
        try await mutate(orderedBy: [user]) { connection, events in
            try await lockOwner(connection, user)
            guard try await Self.isFindable(connection, user, logger: logger) != on else { return on }
            try await connection.prepared("""
                INSERT INTO discovery (user_id, findable, updated_at_ms) VALUES (\(Int64(user)), \(on), \(now))
                ON CONFLICT (user_id) DO UPDATE SET findable = excluded.findable, updated_at_ms = excluded.updated_at_ms
                """, logger: logger)
            events.append(Self.event(on ? .findableOn : .findableOff, user, 0))
            return on
        }
    }

    func addExchange(from: UInt64, to: UInt64, location: ExchangeLocation?, placeLabel: String, now: Int64) async throws -> ExchangeOutcome {
        try await mutate(orderedBy: [from, to]) { connection, events in
            guard from != to else { throw ExchangeRefusal.yourself }
            try await lockPair(connection, from, to)
            let (a, b) = Self.edge(from, to)
            if let recorded = try await Self.exchangeRows(connection.prepared("""
                SELECT \(unescaped: ExchangeRecord.columns) FROM exchanges WHERE user_a = \(Int64(a)) AND user_b = \(Int64(b))
                """, logger: logger)).first {
                return .recorded(recorded)
            }
            guard try await !Self.blocked(connection, from, to, logger: logger) else { throw ExchangeRefusal.blocked }
            guard try await Self.isFindable(connection, from, logger: logger) else { throw ExchangeRefusal.callerNotFindable }
            guard try await Self.isFindable(connection, to, logger: logger) else { throw ExchangeRefusal.notFindable(to) }
            try await connection.prepared("""
                INSERT INTO exchange_intents (from_user, to_user, latitude, longitude, place_label, created_at_ms)
                VALUES (\(Int64(from)), \(Int64(to)), \(location?.latitude), \(location?.longitude), \(placeLabel), \(now))
                ON CONFLICT (from_user, to_user) DO UPDATE SET latitude = excluded.latitude, longitude = excluded.longitude,
                    place_label = excluded.place_label, created_at_ms = excluded.created_at_ms
                """, logger: logger)
            var theirs: (Double?, Double?, String)?
            for try await row in try await connection.prepared("""
                SELECT latitude, longitude, place_label FROM exchange_intents WHERE from_user = \(Int64(to)) AND to_user = \(Int64(from))
                """, logger: logger).decode((Double?, Double?, String).self) { theirs = row }
            guard let theirs else { return .waiting }
            // Where this add was made; when it carries no location, where the first add was made.
            let (lat, lon) = location.map { ($0.latitude as Double?, $0.longitude as Double?) } ?? (theirs.0, theirs.1)
            let label = placeLabel.isEmpty ? theirs.2 : placeLabel
            let recorded = try await Self.exchangeRows(connection.prepared("""
                INSERT INTO exchanges (user_a, user_b, exchanged_at_ms, latitude, longitude, place_label)
                VALUES (\(Int64(a)), \(Int64(b)), \(now), \(lat), \(lon), \(label)) RETURNING \(unescaped: ExchangeRecord.columns)
                """, logger: logger))
            try await connection.prepared("""
                DELETE FROM exchange_intents WHERE (from_user = \(Int64(from)) AND to_user = \(Int64(to)))
                                                OR (from_user = \(Int64(to)) AND to_user = \(Int64(from)))
                """, logger: logger)
            guard let record = recorded.first else { throw StoreInvariant("the exchange just written is missing") }
            events.append(Self.event(.exchangeAdded, a, b))
            return .recorded(record)
        }
    }

    func exchanges(of user: UInt64, before: UInt64, limit: Int) async throws -> [ExchangeRecord] {
        try await database.read { connection in
            try await Self.exchangeRows(connection.prepared("""
                SELECT \(unescaped: ExchangeRecord.columns) FROM exchanges
                WHERE (user_a = \(Int64(user)) OR user_b = \(Int64(user))) AND (\(Int64(before)) = 0 OR id < \(Int64(before)))
                ORDER BY id DESC LIMIT \(Int64(limit))
                """, logger: logger))
        }
    }

    func pendingRequestPeers(of user: UInt64) async throws -> Set<UInt64> {
        try await database.read { connection in
            Set(try await PostgresServiceDatabase.ids(connection.prepared("""
                SELECT to_user FROM friend_requests WHERE from_user = \(Int64(user)) AND state = \(Self.pending)
                UNION SELECT from_user FROM friend_requests WHERE to_user = \(Int64(user)) AND state = \(Self.pending)
                """, logger: logger)))
        }
    }

    func excludedFromDiscovery(for user: UInt64) async throws -> Set<UInt64> {
        try await database.read { connection in
            Set(try await PostgresServiceDatabase.ids(connection.prepared("""
                SELECT user_b FROM friendships WHERE user_a = \(Int64(user))
                UNION SELECT user_a FROM friendships WHERE user_b = \(Int64(user))
                UNION SELECT blocked FROM blocks WHERE blocker = \(Int64(user))
                UNION SELECT blocker FROM blocks WHERE blocked = \(Int64(user))
                """, logger: logger)))
        }
    }
}
