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
    public var checkInLifetime: Duration = .seconds(3 * 3600)
    public var checkInRadius = 1_500.0
    public var feedRadius = 10_000.0
    public init() {}
}

/// The media service as geo's check-ins need it.
public protocol CheckInPhotos: Sendable {
    /// Attaches `user`'s uploaded check-in photo `mediaID` (empty: none) to their new check-in,
    /// releasing the previous check-in's. - Throws: NOT_FOUND / INVALID_ARGUMENT for a photo that
    /// is not the user's check-in upload, UNAVAILABLE when media does not answer.
    func attach(user: UInt64, mediaID: String, deadline: Duration) async throws
}

/// Live locations, sharing and visibility, friends' locations, nearby, navigation.
public final class GeoService: Sendable {
    public typealias API = GeoV1.GeoService

    let store: GeoStore
    let graph: any GraphSource
    let publisher: (any EventSink)?
    let config: GeoConfig
    let now: @Sendable () -> Int64
    let state: SharedState
    private let writer: GroupCommit<LocationUpdate, Bool>
    public let replyStore: SQLiteReplyStore
    let logger: Logger
    let photos: (any CheckInPhotos)?

    /// Opens `<directory>/geo.sqlite` and rebuilds the in-memory state (index, latest fixes,
    /// settings, grants) from it.
    /// - Parameter photos: the media service, for check-ins with a photo (nil: such check-ins are UNAVAILABLE).
    public init(directory: String, graph: any GraphSource, publisher: (any EventSink)?, config: GeoConfig = GeoConfig(),
                photos: (any CheckInPhotos)? = nil, logger: Logger, now: (@Sendable () -> Int64)? = nil) throws {
        self.photos = photos
        let clock = now ?? { WallClock.milliseconds() }
        let store = try GeoStore(path: "\(directory)/geo.sqlite")
        var initial = GeoState(index: SpatialIndex(cellDegrees: config.cellDegrees))
        initial.latest = try store.loadLatest()
        for (user, fix) in initial.latest { initial.index.upsert(user, lat: fix.lat, lon: fix.lon) }
        initial.sharing = try store.loadSharing()
        initial.grants = Grants(try store.loadGrants(now: clock()))
        initial.places = try store.loadPlaces()
        initial.checkIns = try store.loadCheckIns(now: clock())
        let state = SharedState(initial)
        self.store = store
        self.graph = graph
        self.publisher = publisher
        self.config = config
        self.now = clock
        self.state = state
        self.logger = logger
        replyStore = SQLiteReplyStore(database: store.database)
        let events = LocationEvents(graph: graph, publisher: publisher, state: state, now: clock)
        writer = GroupCommit(label: "geo-location-writer") { batch in
            // Decide which updates become the latest (`GeoState.accept`), commit, then show the
            // batch to readers and viewers.
            let replaces = state.mutex.withLock { $0.accept(batch) }
            try store.write(batch, replaces: replaces)
            events.applied(batch, replaces: replaces)
            return replaces
        }
        logger.info("geo state loaded", metadata: ["users": "\(initial.latest.count)", "grants": "\(initial.grants.count)"])
    }



    // MARK: Locations

    public func updateLocation(_ request: GeoV1.UpdateLocationRequest, _ context: RequestContext) async throws -> GeoV1.UpdateLocationResponse {
        let caller = try context.requireCaller()
        let update = try validate(request, user: caller)
        return GeoV1.UpdateLocationResponse(becameLatest: try await submit(update))
    }

    func validate(_ request: GeoV1.UpdateLocationRequest, user: UInt64) throws -> LocationUpdate {
        guard GeoMath.isValid(latitude: request.latitude, longitude: request.longitude) else {
            throw RPCError.invalidArgument("latitude must be -90..90 and longitude -180..180 (finite numbers)")
        }
        guard request.accuracyM.isFinite, (0...100_000).contains(request.accuracyM) else {
            throw RPCError.invalidArgument("accuracy_m: 0 to 100,000 metres")
        }
        let received = now()
        guard request.deviceTimeMs > 0 else { throw RPCError.invalidArgument("device_time_ms: required (milliseconds since 1970)") }
        guard request.deviceTimeMs <= received + config.maxClockSkew.wholeMilliseconds else {
            throw RPCError.invalidArgument("device_time_ms is in the future: check the device clock")
        }
        var status: String?
        if request.setStatus {
            let text = request.status.trimmingCharacters(in: .whitespacesAndNewlines)
            guard text.count <= 140 else { throw RPCError.invalidArgument("status: at most 140 characters") }
            guard !text.unicodeScalars.contains(where: { $0.properties.generalCategory == .control }) else {
                throw RPCError.invalidArgument("status: no control characters")
            }
            status = text
        }
        return LocationUpdate(user: user, lat: request.latitude, lon: request.longitude, accuracy: request.accuracyM,
                              deviceMs: request.deviceTimeMs, receivedMs: received, status: status)
    }

    /// Group-commit figures so far: batches, updates, mean commit time in µs.
    public var commitStats: (batches: Int, updates: Int, meanCommitMicros: Double) {
        let b = writer.batches.load(ordering: .relaxed), n = writer.items.load(ordering: .relaxed)
        return (b, n, b == 0 ? 0 : Double(writer.commitNanos.load(ordering: .relaxed)) / Double(b) / 1_000)
    }

    /// Validates and records an update for `user` (what the RPC does, for in-process callers:
    /// the benchmark). Durable once this returns.
    public func record(_ request: GeoV1.UpdateLocationRequest, user: UInt64) async throws -> Bool {
        try await submit(try validate(request, user: user))
    }

    /// Durable once this returns: the batch holding it has committed.
    func submit(_ update: LocationUpdate) async throws -> Bool {
        do {
            return try await writer.submit(update)
        } catch let error as RPCError {
            throw error
        } catch {
            logger.error("location batch failed to commit", metadata: ["error": "\(error)"])
            throw RPCError.unavailable("location store unavailable; retry")
        }
    }

    public func deleteHistory(_ request: GeoV1.DeleteHistoryRequest, _ context: RequestContext) async throws -> GeoV1.DeleteHistoryResponse {
        let caller = try context.requireCaller()
        return GeoV1.DeleteHistoryResponse(deleted: UInt64(try await store.deleteHistory(of: caller)))
    }

    /// Drops history past the retention period. Run periodically by the executable.
    public func pruneHistory() async throws -> Int {
        try await store.pruneHistory(before: now() - config.historyRetention.wholeMilliseconds)
    }

    // MARK: Sharing

    public func getSharing(_ request: GeoV1.GetSharingRequest, _ context: RequestContext) async throws -> GeoV1.GetSharingResponse {
        let caller = try context.requireCaller()
        return GeoV1.GetSharingResponse(settings: Self.proto(state.mutex.withLock { $0.settings(of: caller) }))
    }

    public func updateSharing(_ request: GeoV1.UpdateSharingRequest, _ context: RequestContext) async throws -> GeoV1.UpdateSharingResponse {
        let caller = try context.requireCaller()
        let known: Set = ["share_with_friends", "ghost", "proximity_alerts", "proximity_m"]
        guard !request.fields.isEmpty else { throw RPCError.invalidArgument("fields: name at least one of \(known.sorted().joined(separator: ", "))") }
        if let unknown = request.fields.first(where: { !known.contains($0) }) { throw RPCError.invalidArgument("fields: unknown field \"\(unknown)\"") }
        let given = request.settings ?? GeoV1.SharingSettings()
        let fields = Set(request.fields)
        if fields.contains("proximity_m") {
            guard given.proximityM.isFinite, (10...10_000).contains(given.proximityM) else {
                throw RPCError.invalidArgument("proximity_m: 10 to 10,000 metres")
            }
        }
        var settings = state.mutex.withLock { $0.settings(of: caller) }
        if fields.contains("share_with_friends") { settings.shareWithFriends = given.shareWithFriends }
        if fields.contains("ghost") { settings.ghost = given.ghost }
        if fields.contains("proximity_alerts") { settings.proximityAlerts = given.proximityAlerts }
        if fields.contains("proximity_m") { settings.proximityMetres = given.proximityM }
        try await store.saveSharing(caller, settings)
        state.mutex.withLock { $0.sharing[caller] = settings }
        return GeoV1.UpdateSharingResponse(settings: Self.proto(settings))
    }

    static func proto(_ s: Sharing) -> GeoV1.SharingSettings {
        GeoV1.SharingSettings(shareWithFriends: s.shareWithFriends, ghost: s.ghost, proximityAlerts: s.proximityAlerts, proximityM: s.proximityMetres)
    }

    static func proto(_ fix: LatestFix) -> GeoV1.Fix {
        GeoV1.Fix(latitude: fix.lat, longitude: fix.lon, accuracyM: fix.accuracy, deviceTimeMs: fix.deviceMs, receivedAtMs: fix.receivedMs)
    }

    // MARK: Grants (from the alerts service)

    /// Applies a grant event: a future expiry grants (or extends), a past one revokes.
    public func apply(_ grant: GeoV1.LocationGrant) async throws {
        guard grant.subjectId != 0, grant.viewerId != 0, ["watch", "help_now"].contains(grant.reason) else {
            logger.warning("ignoring a malformed grant", metadata: ["reason": "\(grant.reason)"])
            return
        }
        let key = GrantKey(subject: grant.subjectId, viewer: grant.viewerId, reason: grant.reason)
        let at = now()
        try await store.saveGrant(key, expiresMs: grant.expiresAtMs, now: at)
        state.mutex.withLock { s in
            s.grants.set(key, expiresMs: grant.expiresAtMs > at ? grant.expiresAtMs : nil)
        }
    }

    // MARK: Reading

    public func friendsLocations(_ request: GeoV1.FriendsLocationsRequest, _ context: RequestContext) async throws -> GeoV1.FriendsLocationsResponse {
        let caller = try context.requireCaller()
        let at = now()
        let friends = graph.read { $0.friends(of: caller) }
        var result = state.mutex.withLock { s -> [GeoV1.FriendLocation] in
            let mine = s.latest[caller]
            // Friends, and anyone who granted the caller a view (a watchMe or helpNow).
            var subjects = Set(friends)
            subjects.formUnion(s.grants.subjects(visibleTo: caller, now: at))
            return graph.read { g in
                subjects.compactMap { subject -> GeoV1.FriendLocation? in
                    guard let fix = s.latest[subject], s.visible(viewer: caller, subject: subject, graph: g, now: at) else { return nil }
                    let distance = mine.map { GeoMath.distance(lat1: $0.lat, lon1: $0.lon, lat2: fix.lat, lon2: fix.lon) } ?? 0
                    return GeoV1.FriendLocation(userId: subject, fix: Self.proto(fix), ageMs: max(0, at - fix.receivedMs),
                                                status: fix.status, around: s.around(lat: fix.lat, lon: fix.lon, within: config.aroundDistance),
                                                distanceM: distance)
                }
            }
        }
        result.sort { ($0.distanceM, $0.userId) < ($1.distanceM, $1.userId) }
        let you = state.mutex.withLock { $0.latest[caller] }.map(Self.proto)
        return GeoV1.FriendsLocationsResponse(friends: result, you: you)
    }

    public func nearby(_ request: GeoV1.NearbyRequest, _ context: RequestContext) async throws -> GeoV1.NearbyResponse {
        let caller = try context.requireCaller()
        let radius = request.radiusM == 0 ? config.nearbyDefaultRadius : request.radiusM
        guard radius.isFinite, radius > 0, radius <= config.nearbyMaxRadius else {
            throw RPCError.invalidArgument("radius_m: more than 0, at most \(Int(config.nearbyMaxRadius))")
        }
        let limit = request.limit == 0 ? 20 : Int(request.limit)
        guard limit <= 100 else { throw RPCError.invalidArgument("limit: at most 100") }
        let users = try nearest(to: caller, radius: radius, limit: limit, excludeExchanged: request.excludeExchanged)
        return GeoV1.NearbyResponse(users: users.map { GeoV1.NearbyUser(userId: $0.user, distanceM: $0.distance) })
    }

    /// The k nearest findable users around `caller`'s latest fix.
    public func nearest(to caller: UInt64, radius: Double, limit: Int, excludeExchanged: Bool) throws -> [(user: UInt64, distance: Double)] {
        guard graph.read({ $0.isFindable(caller) }) else {
            throw RPCError.failedPrecondition("nearby shows people who want to be found: turn findable on first (frienso findable on)")
        }
        return try state.mutex.withLock { s in
            guard let me = s.latest[caller] else {
                throw RPCError.failedPrecondition("share a location first (frienso locate LAT LON)")
            }
            return graph.read { g in
                // Per query, not per candidate: whom the caller must not see (usually nobody),
                // and whether anyone is a ghost at all.
                let hidden = g.blockedEitherWay(caller)
                let anyGhost = !s.sharing.isEmpty
                return s.index.nearest(lat: me.lat, lon: me.lon, radius: radius, limit: limit) { user in
                    user != caller && g.isFindable(user) && (hidden.isEmpty || !hidden.contains(user))
                        && !(anyGhost && s.sharing[user]?.ghost == true)
                        && !(excludeExchanged && g.exchanged(caller, user))
                }
            }
        }
    }

    public func navigate(_ request: GeoV1.NavigateRequest, _ context: RequestContext) async throws -> GeoV1.NavigateResponse {
        let caller = try context.requireCaller()
        guard request.userId != 0 else { throw RPCError.invalidArgument("user_id: required") }
        let at = now()
        return try state.mutex.withLock { s in
            guard let mine = s.latest[caller] else { throw RPCError.failedPrecondition("share a location first (frienso locate LAT LON)") }
            let visible = graph.read { g in s.visible(viewer: caller, subject: request.userId, graph: g, now: at) }
            // Not visible and unknown look the same: nothing leaks about whether they share at all.
            guard visible, let theirs = s.latest[request.userId] else {
                throw RPCError.notFound("no location of user \(request.userId) that you can see")
            }
            return GeoV1.NavigateResponse(
                distanceM: GeoMath.distance(lat1: mine.lat, lon1: mine.lon, lat2: theirs.lat, lon2: theirs.lon),
                bearingDeg: GeoMath.bearing(lat1: mine.lat, lon1: mine.lon, lat2: theirs.lat, lon2: theirs.lon),
                theirFix: Self.proto(theirs), yourFix: Self.proto(mine))
        }
    }

    public func latestLocation(_ request: GeoV1.LatestLocationRequest, _ context: RequestContext) async throws -> GeoV1.LatestLocationResponse {
        let around = config.aroundDistance
        return state.mutex.withLock { s in
            guard let fix = s.latest[request.userId] else { return GeoV1.LatestLocationResponse(found: false) }
            return GeoV1.LatestLocationResponse(found: true, fix: Self.proto(fix),
                                                placeName: s.placeNear(lat: fix.lat, lon: fix.lon, within: around)?.name ?? "")
        }
    }
}

/// Every rpc of the contract has its handler above (or the build fails): see `MethodRouter.register(all:)`.
extension GeoService: FriensoService, GeoV1.GeoService.Handler {}
