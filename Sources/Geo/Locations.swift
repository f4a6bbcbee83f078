import Foundation
public import FriensoProto
import SocialReplica
public import Wire

/// Location updates (batched into group commits), history, friends' locations and the latest fix.
extension GeoService {
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
            let text = request.status.trimmingWhitespace()
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
        let (b, n, nanos) = writer.counts
        return (b, n, b == 0 ? 0 : Double(nanos) / Double(b) / 1_000)
    }

    /// Validates and records an update for `user` (what the RPC does, for in-process callers:
    /// the benchmark). Durable once this returns.
    public func record(_ request: GeoV1.UpdateLocationRequest, user: UInt64) async throws -> Bool {
        try await submit(try validate(request, user: user))
    }

    /// Durable once this returns: the batch holding it has committed.
    func submit(_ update: LocationUpdate) async throws -> Bool {
        try await withCheckedThrowingContinuation { continuation in
            submit(update) { continuation.resume(with: $0) }
        }
    }

    /// `done` runs once the batch holding `update` committed (on the commit's queue), or at once
    /// for a repeat: whether it became the user's latest fix.
    private func submit(_ update: LocationUpdate, then done: @escaping @Sendable (Result<Bool, any Error>) -> Void) {
        if isRepeat(update) { return done(.success(true)) }
        writer.submit(update) { result in done(result.mapError { self.storeFailure($0) }) }
    }

    /// `UpdateLocation` taken on the host's reactor thread (`MethodRouter.startOnReactor`): the
    /// same checks and write as `updateLocation`, answered from the commit's thread with no task
    /// per update (`docs/benchmarks.md`, issue 16, item 70).
    func updateLocation(_ request: GeoV1.UpdateLocationRequest, _ context: RequestContext,
                        done: @escaping @Sendable (Result<GeoV1.UpdateLocationResponse, any Error>) -> Void) {
        let update: LocationUpdate
        do {
            update = try validate(request, user: try context.requireCaller())
        } catch {
            return done(.failure(error))
        }
        submit(update) { result in done(result.map { GeoV1.UpdateLocationResponse(becameLatest: $0) }) }
    }

    /// The user's latest fix again (a phone's retry after a lost reply: the same reading, the
    /// same device time): it is stored already, so it is answered without a second history row.
    /// Only what this instance holds in memory is caught (a retry that went to another instance
    /// before its feed carried the first is stored twice, as before).
    private func isRepeat(_ update: LocationUpdate) -> Bool {
        state.mutex.withLock { Self.repeats(update, $0.latest[update.user]) }
    }

    /// What the caller hears of a failed batch: its own status when it has one, else UNAVAILABLE
    /// (logged: the store's error is not the caller's to see).
    private func storeFailure(_ error: any Error) -> any Error {
        if error is RPCError { return error }
        logger.error("location batch failed to commit", metadata: ["error": "\(error)"])
        return RPCError.unavailable("location store unavailable; retry")
    }

    public func deleteHistory(_ request: GeoV1.DeleteHistoryRequest, _ context: RequestContext) async throws -> GeoV1.DeleteHistoryResponse {
        let caller = try context.requireCaller()
        let state = state, folding = folding
        let deleted = try await store.deleteHistory(of: caller, current: { state.mutex.withLock { $0.latest[caller] } },
                                                    forgotten: { folding.mutex.withLock { $0.forget(caller) } })
        return GeoV1.DeleteHistoryResponse(deleted: UInt64(deleted))
    }

    /// Whether `update` is the reading `latest` already holds: same device time, place,
    /// accuracy, and status (or none given).
    static func repeats(_ update: LocationUpdate, _ latest: LatestFix?) -> Bool {
        guard let latest else { return false }
        return latest.deviceMs == update.deviceMs && latest.lat == update.lat && latest.lon == update.lon
            && latest.accuracy == update.accuracy && (update.status == nil || update.status == latest.status)
    }

    /// Drops history past the retention period. Run periodically by the executable.
    public func pruneHistory() async throws -> Int {
        let pruned = try await store.pruneHistory(before: now() - config.historyRetention.wholeMilliseconds)
        return pruned + (try await store.prunePlaceEvents(before: now() - Self.placeEventRetentionMs))
    }

    // MARK: Reading

    public func friendsLocations(_ request: GeoV1.FriendsLocationsRequest, _ context: RequestContext) async throws -> GeoV1.FriendsLocationsResponse {
        locations(seenBy: try context.requireCaller())
    }

    /// Friends' locations as `caller` may see them (and anyone who granted them a view), nearest
    /// first; each one counted in the subject's audit. (The handler, callable in process by the benchmark.)
    public func locations(seenBy caller: UInt64) -> GeoV1.FriendsLocationsResponse {
        let at = now()
        let around = config.aroundDistance
        let result = state.mutex.withLock { s in
            graph.read { g in Self.locations(seenBy: caller, in: s, graph: g, at: at, aroundWithin: around) }
        }.sorted(byKey: { KeyPair($0.distanceM, $0.userId) })
        audit.record(subjects: result.lazy.map(\.userId), viewer: caller, kind: .friendsLocations, at: at)
        let you = state.mutex.withLock { $0.latest[caller] }.map(Self.proto)
        return GeoV1.FriendsLocationsResponse(friends: result, you: you)
    }

    /// The locations `caller` may see: of their friends, and of anyone who granted them a view
    /// (a watchMe or helpNow), unsorted. The state and the graph are borrowed, and read in a loop,
    /// not in closures: a closure that captures either copies the whole struct (a retain and a
    /// release per field) on every method call it makes on it (`docs/benchmarks.md`, item 81).
    static func locations(seenBy caller: UInt64, in s: borrowing GeoState, graph g: borrowing GraphState,
                          at: Int64, aroundWithin: Double) -> [GeoV1.FriendLocation] {
        let mine = s.latest[caller]
        // Friends are unique (the graph's list); a set to skip them among the grants is made only
        // when the caller holds a grant, which is rare.
        let friends = g.friends(of: caller)
        let granted = s.grants.subjects(visibleTo: caller, now: at)
        var result: [GeoV1.FriendLocation] = []
        result.reserveCapacity(friends.count + granted.count)
        for subject in friends {
            if let entry = location(of: subject, seenBy: caller, from: mine, in: s, graph: g, at: at, aroundWithin: aroundWithin) { result.append(entry) }
        }
        if !granted.isEmpty {
            let listed = Set(friends)
            for subject in granted where !listed.contains(subject) {
                if let entry = location(of: subject, seenBy: caller, from: mine, in: s, graph: g, at: at, aroundWithin: aroundWithin) { result.append(entry) }
            }
        }
        return result
    }

    /// `subject`'s entry as `caller` may see it (nil: no fix, or not theirs to see).
    private static func location(of subject: UInt64, seenBy caller: UInt64, from mine: LatestFix?, in s: borrowing GeoState,
                                 graph g: borrowing GraphState, at: Int64, aroundWithin: Double) -> GeoV1.FriendLocation? {
        guard let fix = s.latest[subject],
              let precision = s.disclosure(viewer: caller, subject: subject, graph: g, now: at, zone: s.zones.privateZone(of: subject, at: fix))
        else { return nil }
        let (shown, around) = s.shown(fix, of: subject, at: precision, aroundWithin: aroundWithin)
        var distance = 0.0
        if let mine, let shown { distance = GeoMath.distance(lat1: mine.lat, lon1: mine.lon, lat2: shown.lat, lon2: shown.lon) }
        return GeoV1.FriendLocation(userId: subject, fix: shown.map(proto), ageMs: max(0, at - fix.receivedMs),
                                    status: fix.status, around: around, distanceM: distance, precision: precision.proto)
    }

    public func latestLocation(_ request: GeoV1.LatestLocationRequest, _ context: RequestContext) async throws -> GeoV1.LatestLocationResponse {
        try latestLocationNow(request)
    }

    /// From memory, without waiting: answered on the host's reactor thread (`router()`). With a
    /// point (a phone's own fix, sent with a helpNow) the place is the one at or near it.
    func latestLocationNow(_ request: GeoV1.LatestLocationRequest) throws(RPCError) -> GeoV1.LatestLocationResponse {
        if request.hasPoint, !GeoMath.isValid(latitude: request.latitude, longitude: request.longitude) {
            throw .invalidArgument("latitude must be -90..90 and longitude -180..180 (finite numbers)")
        }
        let around = config.aroundDistance
        return state.mutex.withLock { s in
            let latest = s.latest[request.userId]
            let named = request.hasPoint ? (request.latitude, request.longitude) : latest.map { ($0.lat, $0.lon) }
            let placeName = named.flatMap { s.placeNear(lat: $0.0, lon: $0.1, within: around)?.name } ?? ""
            guard let fix = latest else { return GeoV1.LatestLocationResponse(found: false, placeName: placeName) }
            return GeoV1.LatestLocationResponse(found: true, fix: Self.proto(fix), placeName: placeName)
        }
    }
}
