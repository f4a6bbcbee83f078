import Foundation
import FriensoProto
import Wire

/// What geo keeps: the history of location updates (the log) with its fold (each person's latest
/// fix and the per-person index of history), sharing settings, precision per friend, grants from
/// alerts, places, check-ins, privacy zones, place alerts and their events, share links, the
/// audit of who saw whom, and idempotent replies. `SQLiteGeoStore` implements it (the embedded
/// default: `geo.sqlite`); a PostgreSQL store is issue 21's next step (`docs/deployment.md`,
/// How geo scales).
///
/// The rules and the live state are in the service and in memory (`GeoState`); the storage
/// makes them durable. The start-up loads and the batch write run on geo's own threads (the
/// service's init, the group commit), so they are synchronous; requests' changes are async.
protocol GeoStorage: Sendable {
    /// Where replies to idempotent requests are kept (the same database).
    var replies: any ReplyStore { get }

    // Start-up: what the memory state is rebuilt from.
    func loadLatest() throws -> FoldedLatest
    /// History rows past `id`, in id order, `size` at a time (the start-up replay).
    func forEachHistoryRow(after id: Int64, size: Int, _ body: ([(id: Int64, update: LocationUpdate)]) throws -> Void) throws
    func loadSharing() throws -> [UInt64: Sharing]
    /// Every stored grant with its version: the live ones and the revoked or expired ones kept as
    /// tombstones (`StoredGrant.tombstoneKeepMs`; older tombstones are dropped first).
    func loadGrants(now: Int64) throws -> [GrantKey: StoredGrant]
    func loadPlaces() throws -> [PlaceRecord]
    func loadCheckIns(now: Int64) throws -> [UInt64: CheckInRecord]
    func loadPrecision() throws -> PrecisionSettings
    func loadZones() throws -> [ZoneRecord]
    func loadPlaceAlerts(zones: ZoneBook, places: [PlaceRecord]) throws -> PlaceAlertBook

    // Location updates: history and its fold.
    /// Appends a batch of updates to history in one transaction, with a slice of the fold when
    /// one is due, and the place events the batch causes. - Returns: the history ids of the
    /// batch, in order, and the place events with their ids.
    /// - Parameter unrecorded: per update, whether history keeps it only until it is folded
    ///   (inside a private zone); nil: all kept.
    func write(_ batch: [LocationUpdate], fold: FoldWrite?, unrecorded: [Bool]?, placeEvents: [PlaceEventRecord]) throws
        -> (ids: [Int64], placeEvents: [PlaceEventRecord])
    /// A fold at start-up, in a transaction of its own.
    func writeFold(_ fold: FoldWrite) throws
    /// Where location updates wait for their batch's commit (`LocationWriter`): by default a
    /// group commit of their own, each batch one `write`.
    func locationWriter(_ steps: LocationBatchSteps) -> any LocationWriter
    /// Deletes `user`'s history; their latest fix stays, written from `current` first.
    /// `forgotten` runs once it committed. - Returns: rows deleted.
    func deleteHistory(of user: UInt64, current: @escaping @Sendable () -> LatestFix?, forgotten: @escaping @Sendable () -> Void) async throws -> Int
    /// Drops folded history older than `cutoff` (retention). - Returns: rows deleted.
    func pruneHistory(before cutoff: Int64) async throws -> Int
    func historyCount(of user: UInt64) async throws -> Int
    /// `user`'s history, oldest first, after the id `after` (export).
    func history(of user: UInt64, after: UInt64, limit: Int) async throws -> [GeoV1.HistoryEntry]

    // Settings, grants, places, check-ins.
    func saveSharing(_ user: UInt64, _ s: Sharing) async throws
    func savePrecision(subject: UInt64, viewer: UInt64, _ precision: Precision?) async throws
    /// Sets grants, in order, in one transaction (one commit for all of them); one that expires
    /// at or before `now` is a revocation, kept as a tombstone with its version. A grant whose
    /// stored row has a newer version (another instance applied a later grant first) changes
    /// nothing. - Returns: for each grant, whether it was applied.
    func saveGrants(_ grants: [GrantWrite], now: Int64) async throws -> [Bool]
    /// Adds `places` (after deleting every place when `replace`). - Returns: them with their ids.
    func importPlaces(_ places: [PlaceRecord], replace: Bool) async throws -> [PlaceRecord]
    /// - Returns: whether the check-in was stored.
    func saveCheckIn(_ c: CheckInRecord, now: Int64) async throws -> Bool
    /// The same without a task (a check-in started on the host's reactor): `scope` is the
    /// request's, written with it as a task's would be; `done` once the write is durable (or failed).
    /// `reply` encodes the response for the result: an engine with a write queue writes it in the
    /// same transaction, on top of the claim (`ServiceDatabase.write(as:_:reply:then:)`); the
    /// others leave the reply to the host, which saves it after the commit.
    func saveCheckIn(_ c: CheckInRecord, now: Int64, as scope: IdempotencyScope?, reply: @escaping @Sendable (Bool) -> [UInt8],
                     then done: @escaping @Sendable (Result<Bool, any Error>) -> Void)

    // Privacy zones and place alerts.
    /// - Returns: the zone's id.
    func saveZone(_ zone: ZoneRecord, droppingAlerts: [UInt64]) async throws -> UInt64
    func deleteZone(_ id: UInt64, of user: UInt64) async throws
    func setPlaceAlertAccess(subject: UInt64, viewer: UInt64, allowed: Bool, droppingAlerts: [UInt64]) async throws
    /// - Returns: the alert's id.
    func savePlaceAlert(_ alert: PlaceAlertRecord) async throws -> UInt64
    func deletePlaceAlert(_ id: UInt64) async throws
    /// - Returns: the alerts deleted.
    func deletePlaceAlerts(onPlacesOtherThan kept: Set<UInt64>) async throws -> [UInt64]
    func placeEvents(after id: UInt64, limit: Int) async throws -> [PlaceEventRecord]
    func placeEventCount() async throws -> Int
    func prunePlaceEvents(before cutoff: Int64) async throws -> Int

    // Share links.
    func createShareLink(owner: UInt64, tokenHash: [UInt8], label: String, now: Int64, expires: Int64) async throws -> GeoV1.ShareLink
    func shareLinks(of owner: UInt64, now: Int64) async throws -> [GeoV1.ShareLink]
    func revokeShareLink(_ id: UInt64, owner: UInt64, now: Int64) async throws -> GeoV1.ShareLink?
    func liveShareLink(tokenHash: [UInt8], now: Int64) async throws -> LiveLink?

    // The audit: who saw whose location, counted.
    func addAudit(_ counts: [AuditLog.Key: UInt32]) async throws
    func pruneAudit(before cutoff: Int64) async throws -> Int
    func audit(of subject: UInt64, since: Int64, limit: Int) async throws -> [GeoV1.AuditEntry]

    // A deleted account.
    /// Deletes everything that names `user`; `forgotten` runs once it committed. - Returns: rows deleted.
    func erase(_ user: UInt64, traces: [String], forgotten: @escaping @Sendable () -> Void) async throws -> Int
    /// Once rows were erased: removes what the engine may still hold of them.
    func scrubErased() async throws
}

extension GeoStorage {
    func locationWriter(_ steps: LocationBatchSteps) -> any LocationWriter {
        OwnCommitLocationWriter(store: self, steps: steps)
    }

    /// An engine with no write queue to hand it to (PostgreSQL): the async write, on a task with
    /// the request's scope bound.
    func saveCheckIn(_ c: CheckInRecord, now: Int64, as scope: IdempotencyScope?, reply: @escaping @Sendable (Bool) -> [UInt8],
                     then done: @escaping @Sendable (Result<Bool, any Error>) -> Void) {
        IdempotencyScope.onTask(bound: scope, { try await saveCheckIn(c, now: now) }, then: done)
    }
}

/// What `latest` holds, each row with the last history id folded into it, and the folding
/// watermarks (see `HistoryFolding`).
struct FoldedLatest: Sendable {
    var latest: [UInt64: LatestFix] = [:]
    var historyIDs: [UInt64: Int64] = [:]
    var foldedThrough: Int64 = 0
    var lastID: Int64 = 0
}

/// A slice of the fold to write (`HistoryFolding.Chunk` with the fixes from memory).
struct FoldWrite: Sendable {
    var fixes: [(user: UInt64, fix: LatestFix)]
    var pairs: [HistoryFolding.Pair]
    var completesThrough: Int64?
    /// The history id through which the writer had applied every row when it took the fixes:
    /// its last commit (one instance) or its cursor over the others' rows (`HistoryFeed`).
    /// SQLite (one process) reads it in the fold's transaction instead.
    var reflects: Int64?

    init(fixes: [(user: UInt64, fix: LatestFix)], pairs: [HistoryFolding.Pair] = [], completesThrough: Int64? = nil, reflects: Int64? = nil) {
        self.fixes = fixes
        self.pairs = pairs
        self.completesThrough = completesThrough
        self.reflects = reflects
    }

    /// `chunk` with its users' fixes as `latest` holds them.
    init(_ chunk: HistoryFolding.Chunk, latest: [UInt64: LatestFix], reflects: Int64? = nil) {
        self.init(fixes: chunk.users.compactMap { user in latest[user].map { (user: user, fix: $0) } },
                  pairs: chunk.pairs, completesThrough: chunk.completesThrough, reflects: reflects)
    }
}

/// A share link that opens now.
struct LiveLink: Sendable {
    var id: UInt64
    var owner: UInt64
    var label: String
    var expiresMs: Int64
}

/// A location update as validated by the service.
struct LocationUpdate: Sendable {
    var user: UInt64
    var lat: Double
    var lon: Double
    var accuracy: Double
    var deviceMs: Int64
    var receivedMs: Int64
    /// nil: leave the status as it is.
    var status: String?
}

/// The latest fix of a user, as kept in memory and in `latest`.
struct LatestFix: Sendable, Equatable {
    var lat: Double
    var lon: Double
    var accuracy: Double
    var deviceMs: Int64
    var receivedMs: Int64
    var status: String
}

/// One grant: `viewer` may see `subject` for `reason` (watch, help_now).
struct GrantKey: Hashable, Sendable {
    var subject: UInt64
    var viewer: UInt64
    var reason: String
}

/// A grant to store: its key, its expiry (at or before now: a revocation) and alerts' version.
struct GrantWrite: Sendable {
    var key: GrantKey
    var expiresMs: Int64
    var version: Int64
}

/// A grant as stored: its expiry (past: revoked or expired, a tombstone) and the version alerts
/// gave it (0: none). The tombstones keep the versions of revocations across restarts, so a
/// grant older than its revocation that arrives late (a delayed republish, another alerts
/// instance's event) is still recognised as stale after geo restarted.
struct StoredGrant: Sendable, Equatable {
    var expiresMs: Int64
    var version: Int64

    /// How long a revoked or expired grant's row is kept. A stale grant is one alerts sent before
    /// its revocation, so it expires within alerts' longest grant window (a watch, 4 hours by
    /// default, or a helpNow window) of being sent: a week covers any delay a message could have.
    static let tombstoneKeepMs: Int64 = 7 * 24 * 3_600_000
}

/// A stored place alert as both engines read it, before its zone or place is looked up.
struct PlaceAlertRow: Sendable {
    var id: UInt64
    var viewer: UInt64
    var subject: UInt64
    var zoneID: UInt64
    var placeID: UInt64
    var onArrive: Bool
    var onLeave: Bool
    var createdMs: Int64
}

extension PlaceAlertBook {
    /// The alerts whose zone or place still exists, with their labels and areas, and who allows whom.
    init(rows: [PlaceAlertRow], allowed: [(subject: UInt64, viewer: UInt64)], zones: ZoneBook, places: [PlaceRecord]) {
        self.init(alerts: rows.compactMap { PlaceAlertRecord(row: $0, zones: zones, places: Dictionary(places.map { ($0.id, $0) }, uniquingKeysWith: { a, _ in a })) },
                  allowed: allowed)
    }
}

extension PlaceAlertRecord {
    /// `row` with its target's label and area; nil when the zone or place is gone.
    init?(row: PlaceAlertRow, zones: ZoneBook, places: [UInt64: PlaceRecord]) {
        let target: PlaceTarget, label: String, area: PlaceArea
        if row.zoneID != 0 {
            guard let zone = zones.zone(row.zoneID, of: row.subject) else { return nil }
            (target, label, area) = (.zone(row.zoneID), zone.label, zone.area)
        } else {
            guard let place = places[row.placeID] else { return nil }
            (target, label, area) = (.place(row.placeID), place.name, PlaceArea(place))
        }
        self.init(id: row.id, viewer: row.viewer, subject: row.subject, target: target, label: label, area: area,
                  onArrive: row.onArrive, onLeave: row.onLeave, createdMs: row.createdMs)
    }
}

extension PlaceRecord {
    /// A polygon as stored: JSON `[[lat, lon], ...]`, `[]` for a point.
    var ringJSON: String { "[" + ring.map { "[\($0.lat),\($0.lon)]" }.joined(separator: ",") + "]" }

    static func ring(json: String) -> [(lat: Double, lon: Double)] {
        let pairs = (try? JSONSerialization.jsonObject(with: Data(json.utf8))) as? [[Double]] ?? []
        return pairs.compactMap { $0.count == 2 ? (lat: $0[0], lon: $0[1]) : nil }
    }
}
