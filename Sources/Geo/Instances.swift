import Foundation
public import Logging
public import ServiceLifecycle
import Storage
import Synchronization

/// How far one geo instance of several has applied the others' location updates: every history
/// row with an id up to `cursor` is in its memory (its own rows as they commit, the others' as
/// `GeoService.followOthers` reads them). Moved under the state lock.
final class HistoryFeed: Sendable {
    let cursor = Atomic<Int64>(0)
    /// The changes every instance announces (`GeoChange`), as the event log relays them.
    let changes: AsyncStream<[UInt8]>

    init(changes: AsyncStream<[UInt8]>) {
        self.changes = changes
    }
}

extension GeoService {
    /// Several instances on PostgreSQL: applies the other instances' committed location updates
    /// to this one's memory (latest fixes, the index, where watched subjects are), in history
    /// order. History ids commit in order (`PostgresGeoStore`), so reading past the cursor misses
    /// nothing. Their events were told by the instance that took them; here they only move the
    /// state, and the fold writes them too. - Returns: how many updates were applied.
    @discardableResult
    public func followOthers(limit: Int = 4_096) async throws -> Int {
        guard let feed, let store = store as? PostgresGeoStore else { return 0 }
        var applied = 0
        while true {
            let after = feed.cursor.load(ordering: .relaxed)
            let (rows, through) = try await store.othersRows(after: after, limit: limit)
            let updates = rows.map(\.update)
            let at = now()
            state.mutex.withLock { s in
                if !updates.isEmpty {
                    let replaces = s.accept(updates)
                    let plan = s.plan(updates, replaces: replaces)
                    if !plan.inside.isEmpty { s.placeAlerts.apply(inside: plan.inside) }
                    _ = s.applied(updates, replaces: replaces, graph: nil, now: at)
                }
                feed.cursor.store(max(after, through), ordering: .relaxed)
            }
            if !rows.isEmpty {
                folding.mutex.withLock { $0.committed(rows.map { HistoryFolding.Pair(user: $0.update.user, id: $0.id) }, through: max(after, through)) }
            }
            applied += rows.count
            if rows.count < limit { return applied }
        }
    }
}

/// Runs `GeoService.followOthers` every `interval` (several instances on PostgreSQL): another
/// instance's update is in this one's answers within about that long.
public final class GeoFollower: Service, Sendable {
    private let service: GeoService
    private let interval: Duration
    private let logger: Logger

    public init(service: GeoService, interval: Duration = .milliseconds(100), logger: Logger) {
        self.service = service
        self.interval = interval
        self.logger = logger
    }

    public func run() async throws {
        let service = service, interval = interval, logger = logger
        await cancelWhenGracefulShutdown {
            await withDiscardingTaskGroup { group in
                group.addTask { await Self.followChanges(service, logger: logger) }
                await Self.followUpdates(service, interval: interval, logger: logger)
                group.cancelAll()
            }
        }
    }

    /// Settings, places and erasures, as any instance announced them.
    private static func followChanges(_ service: GeoService, logger: Logger) async {
        guard let changes = service.feed?.changes, let store = service.store as? PostgresGeoStore else { return }
        for await payload in changes {
            guard let (change, origin) = GeoChange.parse(payload) else {
                logger.warning("an unreadable geo change was announced")
                continue
            }
            // This instance's own change is in its memory already (its handler put it there).
            if origin == store.writer { continue }
            // Until it is taken (the database may be unreachable a while): a change skipped would leave this instance stale.
            var delay = Duration.milliseconds(100)
            while !Task.isCancelled {
                do {
                    try await service.apply(change)
                    break
                } catch {
                    logger.warning("a change of another geo instance is not applied yet", metadata: ["error": "\(error)"])
                    try? await Task.sleep(for: delay)
                    delay = min(delay * 2, .seconds(5))
                }
            }
        }
    }

    /// Location updates the other instances took.
    private static func followUpdates(_ service: GeoService, interval: Duration, logger: Logger) async {
        var failing = false
        while !Task.isCancelled {
            do {
                try await service.followOthers()
                if failing { logger.info("following the other geo instances again") }
                failing = false
            } catch {
                if !failing { logger.warning("cannot read the other geo instances' updates", metadata: ["error": "\(error)"]) }
                failing = true
            }
            try? await Task.sleep(for: interval)
        }
    }
}

/// A change of what geo holds in memory besides locations, announced to the other instances
/// (several instances on PostgreSQL) in the transaction that made it (`PostgresEventLog`, stream
/// `geochanges`): each instance then reads what changed back from the database.
enum GeoChange: Sendable, Equatable {
    /// Settings of these people (sharing, precision, check-in, zones, place alerts and who may set them).
    case people([UInt64])
    /// The places were imported again (and alerts on places gone with them).
    case places
    /// A deleted account.
    case erased(UInt64)

    static let stream = "geochanges"
    static let method = "geo.Changed"

    /// As kept in the log, with the instance that made it: `people 1 2 @1`, `places @2`, `erased 7 @1`.
    func payload(from instance: Int64) -> [UInt8] {
        let text = switch self {
        case .people(let users): "people " + users.map(String.init).joined(separator: " ")
        case .places: "places"
        case .erased(let user): "erased \(user)"
        }
        return Array("\(text) @\(instance)".utf8)
    }

    /// A payload read back: the change, and the instance that made it.
    static func parse(_ payload: [UInt8]) -> (GeoChange, origin: Int64)? {
        var words = String(decoding: payload, as: UTF8.self).split(separator: " ")
        guard let last = words.last, last.hasPrefix("@"), let origin = Int64(last.dropFirst()) else { return nil }
        words.removeLast()
        guard let kind = words.first else { return nil }
        let ids = words.dropFirst().compactMap { UInt64($0) }
        switch kind {
        case "people" where !ids.isEmpty: return (.people(ids), origin)
        case "places": return (.places, origin)
        case "erased" where ids.count == 1: return (.erased(ids[0]), origin)
        default: return nil
        }
    }

    /// Whom the change is about (the log deletes an erased person's events with their data).
    var subject: UInt64? {
        switch self {
        case .people(let users): users.first
        case .places: nil
        case .erased(let user): user
        }
    }
}

extension GeoService {
    /// Takes a change another instance announced: reads what changed back from the database.
    /// Idempotent, so a change read twice leaves memory as the database is.
    func apply(_ change: GeoChange) async throws {
        guard let store = store as? PostgresGeoStore else { return }
        switch change {
        case .erased(let user):
            forgetInMemory(user)
        case .places:
            let places = try await store.places()
            let (rows, access) = try await store.placeAlertRows(where: "true", access: "true")
            state.mutex.withLock { s in
                s.places = places
                s.placeAlerts = PlaceAlertBook(rows: rows, allowed: access, zones: s.zones, places: places)
                s.seedPlaceAlerts()
            }
        case .people(let users):
            for user in users {
                let loaded = try await store.settings(of: user)
                state.mutex.withLock { $0.replaceSettings(of: user, with: loaded) }
            }
        }
    }
}

extension GeoState {
    /// Where each watched subject is now: no alert is told for where they already are.
    mutating func seedPlaceAlerts(subjects: Set<UInt64>? = nil) {
        for alert in placeAlerts.alerts.values where subjects?.contains(alert.subject) ?? true {
            if let fix = latest[alert.subject] {
                placeAlerts.seed(subject: alert.subject, target: alert.target, area: alert.area, lat: fix.lat, lon: fix.lon)
            }
        }
    }

    /// What memory holds of `user`'s settings (and of others' settings about them) becomes `loaded`.
    mutating func replaceSettings(of user: UInt64, with loaded: PersonSettings) {
        sharing[user] = loaded.sharing
        precision.forget(user)
        for row in loaded.precision { precision.set(subject: row.subject, viewer: row.viewer, row.precision) }
        checkIns[user] = loaded.checkIn
        zones.forget(user)
        for zone in loaded.zones { zones.set(zone) }
        placeAlerts.forget(user)
        let byID = Dictionary(places.map { ($0.id, $0) }, uniquingKeysWith: { a, _ in a })
        var subjects: Set<UInt64> = []
        for row in loaded.alerts {
            if let alert = PlaceAlertRecord(row: row, zones: zones, places: byID) {
                placeAlerts.add(alert)
                subjects.insert(alert.subject)
            }
        }
        for pair in loaded.access { placeAlerts.setAllowed(viewer: pair.viewer, subject: pair.subject, true) }
        seedPlaceAlerts(subjects: subjects)
    }
}
