import Foundation
import FriensoProto
import Logging
import PostgresNIO
import Storage
import Wire

/// Geo's storage on PostgreSQL: the `geo` schema of the deployment's database, the same tables
/// as the SQLite store with the same behaviour (the geo tests run on both engines), shared by
/// every geo instance.
///
/// What differs, and why:
/// - **History is an ordered log.** A batch takes the history lock (a transaction-scoped
///   advisory lock) before it inserts, so history ids commit in id order across instances:
///   once a row is visible, every row with a smaller id is too. That is what lets every instance
///   follow the others' updates by reading `history` past the last id it saw (`rows(after:)`),
///   and what keeps place events in order for alerts' reader. Batches of one instance are
///   already one at a time (its group commit); the lock lines up the instances' commits, and
///   under load each batch grows instead.
/// - A batch is one multi-row `INSERT … SELECT FROM unnest(…)`, whatever its size.
/// - **No `history_by_user`**: PostgreSQL keeps a real index on `history (user_id, id)`; the
///   write-behind index was SQLite's answer to random page writes. `latest` stays write-behind
///   (`HistoryFolding`); each row records the id through which the writing instance had applied
///   every row (`FoldWrite.reflects`), and a fold never replaces a newer fix than its own.
/// - Start-up loads and the batch write are synchronous (geo's init and its group commit run on
///   threads of their own): they wait for the pool there (`awaitBlocking`).
final class PostgresGeoStore: GeoStorage {
    let database: PostgresServiceDatabase
    let replies: any ReplyStore
    /// This instance's number: its history rows say who wrote them, so that each instance reads
    /// only the others' (`othersRows`).
    let writer: Int64
    /// Several instances: where changes of what instances hold in memory are announced.
    let changes: PostgresEventLog?
    var logger: Logger { database.logger }

    private init(database: PostgresServiceDatabase, writer: Int64, changes: PostgresEventLog?) {
        self.database = database
        self.writer = writer
        self.changes = changes
        replies = PostgresReplyStore(database: database)
    }

    /// Runs geo's migrations on `database` (its schema must be `geo`).
    /// - Parameter changes: several instances: the log (attached to `database`) where each
    ///   change of settings, places or an erasure is announced with its commit.
    static func open(_ database: PostgresServiceDatabase, instance: Int = 1, changes: PostgresEventLog? = nil) async throws -> PostgresGeoStore {
        try await database.migrate(migrations)
        return PostgresGeoStore(database: database, writer: Int64(instance), changes: changes)
    }

    /// A write whose change the other instances must learn (`GeoChange`): announced in its
    /// transaction when there are several instances. `after` runs once it committed.
    @discardableResult
    /// - Parameter reply: see `PostgresServiceDatabase.write(_:committed:orderedBy:reply:)`.
    func write<T: Sendable>(announcing change: GeoChange, reply: (@Sendable (T) -> [UInt8])? = nil,
                            _ body: @escaping (PostgresConnection) async throws -> T,
                            after: (@Sendable (T) -> Void)? = nil) async throws -> T {
        guard let changes else { return try await database.write(body, committed: after, orderedBy: nil, reply: reply) }
        let keys: [UInt64]? = switch change {
        case .people(let users): users
        case .erased(let user): [user]
        case .places: nil
        }
        return try await database.write(body, committed: { result in
            changes.emit(topic: GeoChange.stream, method: GeoChange.method, payload: change.payload(from: self.writer), subject: change.subject ?? 0)
            if let after { PostgresEventLog.alsoAfterCommit { after(result) } }
        }, orderedBy: keys, reply: reply)
    }

    /// A user id as a bigint bind (ids are below 2^63; the bit pattern keeps any value).
    static func id(_ value: UInt64) -> Int64 { Int64(bitPattern: value) }
    static func id(_ value: Int64) -> UInt64 { UInt64(bitPattern: value) }

    /// Takes the history lock until the transaction ends (see the type). A batch's statements run
    /// back to back, so the transaction is never idle for long, unless its instance's host was cut
    /// off mid-batch: then the server ends it after `idleTimeout` (set for this transaction, in the
    /// same statement), and the lock goes with it. With the pool's 15 s every instance's location
    /// updates waited that long behind a host that was gone (the several-hosts test found it).
    static func lockHistory(_ connection: PostgresConnection, logger: Logger) async throws {
        try connection.ensureOpen()
        try await connection.prepared("""
            SELECT set_config('idle_in_transaction_session_timeout', \(idleTimeout), true),
                   pg_advisory_xact_lock(\(unescaped: historyLockKey))
            """, logger: logger)
    }

    /// The history lock's key, in SQL: one per schema, so that instances of the same geo share
    /// it and nothing else in the database does.
    static let historyLockKey = "hashtextextended('frienso geo history ' || current_schema(), 0)"

    /// How long a batch's transaction may sit idle before the server ends it (milliseconds).
    static let idleTimeout = "2000"

    static func foldedThrough(_ connection: PostgresConnection, logger: Logger) async throws -> Int64 {
        try await PostgresServiceDatabase.first(connection.prepared("SELECT value FROM geo_meta WHERE key = 'folded_through'", logger: logger),
                                                Int64.self) ?? 0
    }

    // MARK: Loading at start

    func loadLatest() throws -> FoldedLatest {
        try awaitBlocking { [database, logger] in
            try await database.snapshot { connection in
                var result = FoldedLatest()
                let rows = try await connection.prepared("""
                    SELECT user_id, lat, lon, accuracy, device_ms, received_ms, status, history_id FROM latest
                    """, logger: logger)
                for try await (user, lat, lon, accuracy, device, received, status, historyID)
                        in rows.decode((Int64, Double, Double, Double, Int64, Int64, String, Int64).self) {
                    result.latest[Self.id(user)] = LatestFix(lat: lat, lon: lon, accuracy: accuracy, deviceMs: device, receivedMs: received, status: status)
                    result.historyIDs[Self.id(user)] = historyID
                }
                result.foldedThrough = try await Self.foldedThrough(connection, logger: logger)
                result.lastID = try await PostgresServiceDatabase.first(connection.prepared("SELECT coalesce(max(id), 0) FROM history", logger: logger),
                                                                        Int64.self) ?? 0
                return result
            }
        }
    }

    func forEachHistoryRow(after id: Int64, size: Int, _ body: ([(id: Int64, update: LocationUpdate)]) throws -> Void) throws {
        var cursor = id
        while true {
            let rows = try awaitBlocking { [self, cursor] in try await self.rows(after: cursor, limit: size) }
            if rows.isEmpty { return }
            try body(rows)
            cursor = rows.last!.id
            if rows.count < size { return }
        }
    }

    /// Other instances' history rows past `id`, in id order, at most `limit`, and the id through
    /// which this read saw every row (the last committed id, or the last row's when it was cut at
    /// `limit`): one statement, so one snapshot.
    func othersRows(after id: Int64, limit: Int) async throws -> (rows: [(id: Int64, update: LocationUpdate)], through: Int64) {
        try await database.read { connection in
            var rows: [(id: Int64, update: LocationUpdate)] = []
            var top: Int64 = id
            let query = try await connection.prepared("""
                WITH top AS (SELECT coalesce(max(id), 0) AS id FROM history)
                (SELECT id, user_id, lat, lon, accuracy, device_ms, received_ms, status FROM history
                 WHERE id > \(id) AND id <= (SELECT id FROM top) AND writer <> \(self.writer) ORDER BY id LIMIT \(limit))
                UNION ALL
                (SELECT id, -1, 0, 0, 0, 0, 0, NULL FROM top)
                """, logger: self.logger)
            for try await row in query.decode(HistoryRow.self) {
                if row.1 == -1 { top = max(top, row.0); continue }
                rows.append(Self.update(row))
            }
            return (rows, rows.count == limit ? rows.last!.id : top)
        }
    }

    /// History rows past `id`, in id order (the start-up replay).
    func rows(after id: Int64, limit: Int) async throws -> [(id: Int64, update: LocationUpdate)] {
        try await database.read { connection in
            var rows: [(id: Int64, update: LocationUpdate)] = []
            let query = try await connection.prepared("""
                SELECT id, user_id, lat, lon, accuracy, device_ms, received_ms, status FROM history WHERE id > \(id) ORDER BY id LIMIT \(limit)
                """, logger: self.logger)
            for try await row in query.decode(HistoryRow.self) { rows.append(Self.update(row)) }
            return rows
        }
    }

    /// `id, user_id, lat, lon, accuracy, device_ms, received_ms, status` of `history`.
    typealias HistoryRow = (Int64, Int64, Double, Double, Double, Int64, Int64, String?)

    static func update(_ r: HistoryRow) -> (id: Int64, update: LocationUpdate) {
        (r.0, LocationUpdate(user: id(r.1), lat: r.2, lon: r.3, accuracy: r.4, deviceMs: r.5, receivedMs: r.6, status: r.7))
    }

    func loadSharing() throws -> [UInt64: Sharing] {
        try awaitBlocking { [database, logger] in
            try await database.read { connection in
                var result: [UInt64: Sharing] = [:]
                for try await (user, share, ghost, proximity, metres) in try await connection.prepared("""
                    SELECT user_id, share_with_friends, ghost, proximity_alerts, proximity_m FROM sharing
                    """, logger: logger).decode((Int64, Bool, Bool, Bool, Double).self) {
                    result[Self.id(user)] = Sharing(shareWithFriends: share, ghost: ghost, proximityAlerts: proximity, proximityMetres: metres)
                }
                return result
            }
        }
    }

    func loadGrants(now: Int64) throws -> [GrantKey: StoredGrant] {
        try awaitBlocking { [database, logger] in
            try await database.transaction { connection in
                try await connection.prepared("DELETE FROM grants WHERE expires_ms <= \(now - StoredGrant.tombstoneKeepMs)", logger: logger)
                var result: [GrantKey: StoredGrant] = [:]
                for try await (subject, viewer, reason, expires, version) in try await connection.prepared(
                    "SELECT subject, viewer, reason, expires_ms, version FROM grants", logger: logger)
                    .decode((Int64, Int64, String, Int64, Int64).self) {
                    result[GrantKey(subject: Self.id(subject), viewer: Self.id(viewer), reason: reason)] = StoredGrant(expiresMs: expires, version: version)
                }
                return result
            }
        }
    }

    func loadPlaces() throws -> [PlaceRecord] {
        try awaitBlocking { [self] in try await self.places() }
    }

    func places() async throws -> [PlaceRecord] {
        try await database.read { connection in
            var result: [PlaceRecord] = []
            for try await (id, name, kind, lat, lon, radius, ring) in try await connection.prepared(
                "SELECT id, name, kind, lat, lon, radius_m, ring FROM places ORDER BY id", logger: self.logger)
                .decode((Int64, String, Int64, Double, Double, Double, String).self) {
                result.append(PlaceRecord(id: Self.id(id), name: name, kind: GeoV1.PlaceKind(rawValue: Int32(truncatingIfNeeded: kind)),
                                          lat: lat, lon: lon, radius: radius, ring: PlaceRecord.ring(json: ring)))
            }
            return result
        }
    }

    func importPlaces(_ places: [PlaceRecord], replace: Bool) async throws -> [PlaceRecord] {
        try await write(announcing: .places) { connection in
            if replace { try await connection.prepared("DELETE FROM places", logger: self.logger) }
            var stored: [PlaceRecord] = []
            for place in places {
                let ring = place.ringJSON
                let id = try await PostgresServiceDatabase.first(connection.prepared("""
                    INSERT INTO places (name, kind, lat, lon, radius_m, ring)
                    VALUES (\(place.name), \(Int64(place.kind.rawValue)), \(place.lat), \(place.lon), \(place.radius), \(ring)) RETURNING id
                    """, logger: self.logger), Int64.self)
                var copy = place
                copy.id = Self.id(id ?? 0)
                stored.append(copy)
            }
            return stored
        }
    }

    // MARK: Writing

    func write(_ batch: [LocationUpdate], fold: FoldWrite?, unrecorded: [Bool]?,
               placeEvents: [PlaceEventRecord]) throws -> (ids: [Int64], placeEvents: [PlaceEventRecord]) {
        try awaitBlocking { [self] in
            try await database.transaction { connection in
                try await Self.lockHistory(connection, logger: self.logger)
                // Waiting for the lock may take a while: the session may have been ended meanwhile.
                try connection.ensureOpen()
                if let fold { try await self.write(fold, connection) }
                let users = batch.map { Self.id($0.user) }, lats = batch.map(\.lat), lons = batch.map(\.lon)
                let accuracies = batch.map(\.accuracy), devices = batch.map(\.deviceMs), received = batch.map(\.receivedMs)
                let hasStatus = batch.map { $0.status != nil }, statuses = batch.map { $0.status ?? "" }
                let hidden = unrecorded ?? Array(repeating: false, count: batch.count)
                var ids = try await PostgresServiceDatabase.ids(connection.prepared("""
                    INSERT INTO history (user_id, lat, lon, accuracy, device_ms, received_ms, status, unrecorded, writer)
                    SELECT u, la, lo, a, d, r, CASE WHEN h THEN s END, x, \(self.writer)
                    FROM unnest(\(users)::bigint[], \(lats)::float8[], \(lons)::float8[], \(accuracies)::float8[], \(devices)::bigint[],
                                \(received)::bigint[], \(hasStatus)::boolean[], \(statuses)::text[], \(hidden)::boolean[]) AS b(u, la, lo, a, d, r, h, s, x)
                    RETURNING id
                    """, logger: self.logger)).map { Int64(bitPattern: $0) }
                // Identity values are drawn as the rows are inserted, in the order of the unnest.
                ids.sort()
                guard ids.count == batch.count else { throw StoreInvariant("history insert returned \(ids.count) ids for \(batch.count) rows") }
                return (ids, try await self.insert(placeEvents, connection))
            }
        }
    }

    func writeFold(_ fold: FoldWrite) throws {
        try awaitBlocking { [self] in
            try await database.transaction { connection in try await self.write(fold, connection) }
        }
    }

    /// The fixes are what the writing instance holds, reflecting every history row up to
    /// `fold.reflects`: a row of `latest` takes one only when it is at least as new as what it
    /// holds (another instance may have folded a newer one). The watermark moves only as far as
    /// the writer had applied every row.
    private func write(_ fold: FoldWrite, _ connection: PostgresConnection) async throws {
        // Nil: nothing claimed (replay re-applies what is past the row's id, harmlessly).
        let reflectsID = fold.reflects ?? 0
        if !fold.fixes.isEmpty {
            let users = fold.fixes.map { Self.id($0.user) }, lats = fold.fixes.map(\.fix.lat), lons = fold.fixes.map(\.fix.lon)
            let accuracies = fold.fixes.map(\.fix.accuracy), devices = fold.fixes.map(\.fix.deviceMs)
            let received = fold.fixes.map(\.fix.receivedMs), statuses = fold.fixes.map(\.fix.status)
            try await connection.prepared("""
                INSERT INTO latest (user_id, lat, lon, accuracy, device_ms, received_ms, status, history_id)
                SELECT u, la, lo, a, d, r, s, \(reflectsID)
                FROM unnest(\(users)::bigint[], \(lats)::float8[], \(lons)::float8[], \(accuracies)::float8[], \(devices)::bigint[],
                            \(received)::bigint[], \(statuses)::text[]) AS f(u, la, lo, a, d, r, s)
                ON CONFLICT (user_id) DO UPDATE SET lat = excluded.lat, lon = excluded.lon, accuracy = excluded.accuracy,
                    device_ms = excluded.device_ms, received_ms = excluded.received_ms, status = excluded.status,
                    history_id = greatest(latest.history_id, excluded.history_id)
                WHERE latest.device_ms <= excluded.device_ms
                """, logger: logger)
        }
        if let done = fold.completesThrough {
            let through = min(reflectsID, done)
            try await connection.prepared("UPDATE geo_meta SET value = greatest(value, \(through)) WHERE key = 'folded_through'", logger: logger)
            try await Self.dropUnrecorded(through: through, connection, logger: logger)
        }
    }

    /// History rows inside a private zone that keeps none, once folded: deleted.
    static func dropUnrecorded(through id: Int64, _ connection: PostgresConnection, logger: Logger) async throws {
        try await connection.prepared("DELETE FROM history WHERE unrecorded AND id <= \(id)", logger: logger)
    }

    func deleteHistory(of user: UInt64, current: @escaping @Sendable () -> LatestFix?,
                       forgotten: @escaping @Sendable () -> Void) async throws -> Int {
        try await database.write({ connection in
            if let fix = current() {
                try await self.write(FoldWrite(fixes: [(user, fix)], reflects: 0), connection)
            }
            return try await PostgresServiceDatabase.count(connection.prepared(
                "DELETE FROM history WHERE user_id = \(Self.id(user)) RETURNING 1", logger: self.logger))
        }, committed: { _ in forgotten() })
    }

    /// Drops folded history older than `cutoff` (rows not folded yet wait for their sweep).
    func pruneHistory(before cutoff: Int64) async throws -> Int {
        try await database.write { connection in
            let through = try await Self.foldedThrough(connection, logger: self.logger)
            return try await PostgresServiceDatabase.count(connection.prepared(
                "DELETE FROM history WHERE received_ms < \(cutoff) AND id <= \(through) RETURNING 1", logger: self.logger))
        }
    }

    func historyCount(of user: UInt64) async throws -> Int {
        try await database.read { connection in
            Int(try await PostgresServiceDatabase.first(connection.prepared(
                "SELECT count(*) FROM history WHERE user_id = \(Self.id(user))", logger: self.logger), Int64.self) ?? 0)
        }
    }

    func history(of user: UInt64, after: UInt64, limit: Int) async throws -> [GeoV1.HistoryEntry] {
        try await database.read { connection in
            var result: [GeoV1.HistoryEntry] = []
            for try await (id, lat, lon, accuracy, device, received, status) in try await connection.prepared("""
                SELECT id, lat, lon, accuracy, device_ms, received_ms, status FROM history
                WHERE user_id = \(Self.id(user)) AND id > \(Self.id(after)) AND NOT unrecorded ORDER BY id LIMIT \(limit)
                """, logger: self.logger).decode((Int64, Double, Double, Double, Int64, Int64, String?).self) {
                result.append(GeoV1.HistoryEntry(id: Self.id(id), fix: GeoV1.Fix(latitude: lat, longitude: lon, accuracyM: accuracy,
                                                                                 deviceTimeMs: device, receivedAtMs: received),
                                                 hasStatus: status != nil, status: status ?? ""))
            }
            return result
        }
    }
}
