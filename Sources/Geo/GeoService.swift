import Foundation
public import FriensoProto
public import Logging
public import Storage
public import SocialReplica
import Synchronization
public import Wire

/// Where geo reads the social graph: the Clone replica in production, a fixed state in tests
/// and benchmarks.
public protocol GraphSource: Sendable {
    func read<T>(_ body: (GraphState) -> T) -> T
}

extension SocialGraphReplica: GraphSource {}

/// A graph that changes only when told (tests, benchmarks).
public final class StaticGraph: GraphSource {
    private let state: Mutex<GraphState>
    public init(_ state: GraphState = GraphState()) { self.state = Mutex(state) }
    public func read<T>(_ body: (GraphState) -> T) -> T { state.withLock { body($0) } }
    public func apply(_ event: SocialV1.GraphEvent) { state.withLock { $0.apply(event) } }
}

public struct GeoConfig: Sendable {
    public var nearbyDefaultRadius = 1_500.0
    public var nearbyMaxRadius = 5_000.0
    public var historyRetention: Duration = .seconds(30 * 24 * 3600)
    /// How far ahead of the server's clock a device timestamp may be.
    public var maxClockSkew: Duration = .seconds(300)
    public var cellDegrees = 0.0025
    /// Authorises `ImportPlaces`; imports are refused when it is empty.
    public var operatorKey = ""
    /// "Around <place>" names the nearest place within this distance.
    public var aroundDistance = 150.0
    /// Venue attendance counts fixes younger than this.
    public var venueFreshness: Duration = .seconds(15 * 60)
    /// Who saw my location: counted (on unless a benchmark turns it off) and kept this long.
    public var audit = true
    public var auditRetention: Duration = .seconds(30 * 86_400)
    /// The smallest total a venue's count shows (k-anonymity): below it, "fewer than k".
    public var venueMinimumPeople = 3
    public var checkInLifetime: Duration = .seconds(3 * 3600)
    public var checkInRadius = 1_500.0
    public var feedRadius = 10_000.0
    /// How long a sweep of the history fold takes (`HistoryFolding`): each `latest` page is
    /// written about once per period however many of its users moved; start-up replays up to
    /// about two periods of history.
    public var foldPeriod: Duration = .seconds(10)
    public init() {}
}

/// The media service as geo's check-ins need it.
public protocol CheckInPhotos: Sendable {
    /// Attaches `user`'s uploaded check-in photo `mediaID` (empty: none) to their new check-in,
    /// releasing the previous check-in's. - Throws: NOT_FOUND / INVALID_ARGUMENT for a photo that
    /// is not the user's check-in upload, UNAVAILABLE when media does not answer.
    func attach(user: UInt64, mediaID: String, deadline: Duration) async throws
}

/// Live locations (`Locations.swift`), sharing and grants (`Sharing.swift`), nearby and
/// navigation (`Nearby.swift`), places and venues (`Places.swift`), check-ins (`CheckIns.swift`);
/// the pure rules are in `Core/`.
public final class GeoService: Sendable {
    public typealias API = GeoV1.GeoService

    let store: any GeoStorage
    let graph: any GraphSource
    let publisher: (any EventSink)?
    let config: GeoConfig
    let now: @Sendable () -> Int64
    let state: SharedState
    /// Where location updates wait for their batch's commit (`LocationWriter`).
    let writer: any LocationWriter
    /// What of history is folded into `latest` and the per-user index (see `HistoryFolding`).
    let folding: SharedFolding
    public let replyStore: AnyReplyStore
    let logger: Logger
    let photos: (any CheckInPhotos)?
    let audit: AuditLog
    /// Several instances on PostgreSQL: how far this one has applied the others' updates
    /// (`followOthers`); nil for one instance.
    let feed: HistoryFeed?

    /// Opens `<directory>/geo.sqlite` and rebuilds the in-memory state (index, latest fixes,
    /// settings, grants) from it.
    /// - Parameter photos: the media service, for check-ins with a photo (nil: such check-ins are UNAVAILABLE).
    public convenience init(directory: String, graph: any GraphSource, publisher: (any EventSink)?, config: GeoConfig = GeoConfig(),
                            photos: (any CheckInPhotos)? = nil, logger: Logger, now: (@Sendable () -> Int64)? = nil) throws {
        try self.init(store: try SQLiteGeoStore(path: "\(directory)/geo.sqlite"), feed: nil, graph: graph, publisher: publisher,
                      config: config, photos: photos, logger: logger, now: now)
    }

    /// Geo on `engine`: SQLite in its folder (as `init(directory:…)`), or the `geo` schema of a
    /// PostgreSQL database, which several instances share (`instances` > 1: each follows the
    /// others' updates, `GeoFollower`).
    public static func open(_ engine: StorageEngine, instance: Int = 1, instances: Int = 1, graph: any GraphSource, publisher: (any EventSink)?,
                            config: GeoConfig = GeoConfig(), photos: (any CheckInPhotos)? = nil, logger: Logger,
                            now: (@Sendable () -> Int64)? = nil) async throws -> GeoService {
        switch engine {
        case .sqlite(let directory):
            return try GeoService(directory: directory, graph: graph, publisher: publisher, config: config, photos: photos, logger: logger, now: now)
        case .postgres(let database):
            var feed: HistoryFeed?
            var changes: PostgresEventLog?
            if instances > 1 {
                // Opened before the state is loaded: a change committed meanwhile is in the load or relayed after it.
                let (stream, sink) = AsyncStream.makeStream(of: [UInt8].self)
                changes = try await PostgresEventLog.open(database, streams: [GeoChange.stream], publisher: nil,
                                                          relayed: { _, payload in sink.yield(payload) })
                feed = HistoryFeed(changes: stream)
            }
            let store = try await PostgresGeoStore.open(database, instance: instance, changes: changes)
            // The loads wait for the pool: on a thread of their own, never the cooperative pool's.
            return try await onOwnThread { [feed] in
                try GeoService(store: store, feed: feed, graph: graph, publisher: publisher, config: config,
                               photos: photos, logger: logger, now: now)
            }
        }
    }

    init(store: any GeoStorage, feed: HistoryFeed?, graph: any GraphSource, publisher: (any EventSink)?, config: GeoConfig,
         photos: (any CheckInPhotos)?, logger: Logger, now: (@Sendable () -> Int64)?) throws {
        self.photos = photos
        let audit = AuditLog(enabled: config.audit)
        self.audit = audit
        self.feed = feed
        let clock = now ?? { WallClock.milliseconds() }
        var initial = GeoState(index: SpatialIndex(cellDegrees: config.cellDegrees))
        let folded = try store.loadLatest()
        initial.latest = folded.latest
        for (user, fix) in initial.latest { initial.index.upsert(user, lat: fix.lat, lon: fix.lon) }
        // History past the last completed sweep: replayed by the live rule, skipping rows a
        // user's stored fix already reflects; then folded at once, so the plan starts empty.
        var replay = HistoryFolding(foldedThrough: folded.foldedThrough, lastID: folded.lastID, periodMs: config.foldPeriod.wholeMilliseconds)
        var replayed = 0
        try store.forEachHistoryRow(after: folded.foldedThrough, size: 4_096) { rows in
            let fresh = rows.filter { $0.id > folded.historyIDs[$0.update.user] ?? 0 }.map(\.update)
            _ = initial.applied(fresh, replaces: initial.accept(fresh), graph: nil, now: clock())
            replay.committed(rows.map { HistoryFolding.Pair(user: $0.update.user, id: $0.id) })
            replayed += rows.count
        }
        // Everything up to the last row replayed is in memory now: the others' rows from here on.
        feed?.cursor.store(replay.lastID, ordering: .relaxed)
        if let chunk = replay.all() {
            try store.writeFold(FoldWrite(chunk, latest: initial.latest, reflects: replay.lastID))
            replay.advance(past: chunk)
        }
        let folding = SharedFolding(replay) // empty now: everything up to its last id is folded
        initial.sharing = try store.loadSharing()
        let grantsAt = clock(), stored = try store.loadGrants(now: grantsAt)
        initial.grants = Grants(stored.filter { $0.value.expiresMs > grantsAt }.mapValues(\.expiresMs))
        // The versions of revocations too: a stale grant arriving after a restart stays stale.
        initial.grantVersions = stored.filter { $0.value.version != 0 }.mapValues(\.version)
        initial.places = try store.loadPlaces()
        initial.checkIns = try store.loadCheckIns(now: clock())
        initial.precision = try store.loadPrecision()
        initial.zones = ZoneBook(try store.loadZones())
        initial.placeAlerts = try store.loadPlaceAlerts(zones: initial.zones, places: initial.places)
        initial.seedPlaceAlerts()
        let state = SharedState(initial)
        self.store = store
        self.graph = graph
        self.publisher = publisher
        self.config = config
        self.now = clock
        self.state = state
        self.logger = logger
        replyStore = AnyReplyStore(store.replies)
        let events = LocationEvents(graph: graph, publisher: publisher, state: state, aroundWithin: config.aroundDistance, audit: audit, now: clock)
        self.folding = folding
        // Decide which updates become the latest (`GeoState.accept`); append them to history
        // with the fold's next slice, taken from memory before this batch; then show the batch
        // to readers and viewers. Zones keep updates out of history and place alerts fire:
        // decided here, written with the batch. The store's writer calls these in commit order.
        writer = store.locationWriter(LocationBatchSteps(
            prepare: { batch in
                let at = clock()
                let (replaces, plan) = state.mutex.withLock { s in
                    let replaces = s.accept(batch)
                    var plan = s.plan(batch, replaces: replaces)
                    if !plan.fired.isEmpty { plan.told = graph.read { [plan] in s.told(plan, graph: $0, now: at) } }
                    return (replaces, plan)
                }
                // Memory holds every row up to the last one committed (one instance: all are its
                // own, the batch before this one applied) or up to the feed's cursor (read with
                // the fixes: the feed moves it under the state lock).
                let (chunk, committedThrough) = folding.mutex.withLock { ($0.next(nowMs: clock()), $0.lastID) }
                let fold = chunk.map { chunk in
                    state.mutex.withLock { FoldWrite(chunk, latest: $0.latest, reflects: feed?.cursor.load(ordering: .relaxed) ?? committedThrough) }
                }
                return PreparedLocations(replaces: replaces, plan: plan, chunk: chunk, fold: fold)
            },
            finish: { batch, prepared, ids, told in
                folding.mutex.withLock { f in
                    if let chunk = prepared.chunk { f.advance(past: chunk) }
                    f.committed(zip(batch, ids).map { HistoryFolding.Pair(user: $0.user, id: $1) }, through: feed?.cursor.load(ordering: .relaxed))
                }
                events.applied(batch, replaces: prepared.replaces, inside: prepared.plan.inside, told: told)
            }))
        logger.info("geo state loaded", metadata: ["users": "\(initial.latest.count)", "grants": "\(initial.grants.count)",
                                                  "history replayed": "\(replayed)"])
    }
}

/// Every rpc of the contract has its handler above (or the build fails): see `MethodRouter.register(all:)`.
extension GeoService: FriensoService, GeoV1.GeoService.Handler {
    /// The generated routes, with the reads answered from memory taken on the host's reactor
    /// thread as they arrive (no task per request: `docs/benchmarks.md`, issue 16, items 18 and 46).
    /// `FRIENSO_GEO_READS=tasks` leaves them on the task path, for A/B runs.
    public func router() -> MethodRouter {
        var router = MethodRouter()
        router.register(all: self)
        // Its first effect is its store write, or it confirms first (a photo to attach): item 54.
        router.claimFirst(GeoV1.GeoService.checkIn)
        if ProcessInfo.processInfo.environment["FRIENSO_GEO_READS"] != "tasks" {
            router.answerOnReactor(GeoV1.GeoService.friendsLocations) { _, context in self.locations(seenBy: try context.requireCaller()) }
            router.answerOnReactor(GeoV1.GeoService.nearby) { request, context in try self.nearbyNow(request, context) }
            // alerts asks it for every helpNow (item 46).
            router.answerOnReactor(GeoV1.GeoService.latestLocation) { request, _ in try self.latestLocationNow(request) }
        }
        // Updates start on the reactor and are answered from their commit's thread (item 70);
        // `FRIENSO_GEO_UPDATES=tasks` leaves them on the task path, for A/B runs.
        if ProcessInfo.processInfo.environment["FRIENSO_GEO_UPDATES"] != "tasks" {
            router.startOnReactor(GeoV1.GeoService.updateLocation) { request, context, done in self.updateLocation(request, context, done: done) }
        }
        // Check-ins too, keyed ones included, the reply cache's in-memory steps taken on the
        // reactor (item 91); `FRIENSO_GEO_CHECKINS=tasks` leaves them on the task path.
        if ProcessInfo.processInfo.environment["FRIENSO_GEO_CHECKINS"] != "tasks" {
            router.startOnReactor(GeoV1.GeoService.checkIn, keyed: true) { request, context, done in self.checkIn(request, context, done: done) }
        }
        return router
    }
}
