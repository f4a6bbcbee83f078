import Foundation
public import FriensoProto
import GRDB
import Identity
import SocialReplica
public import Wire

/// Check-ins: one active per user, shown to who may see the user's location and, when the user is
/// findable, to anyone nearby; never across a block. Handlers, then storage.
extension GeoService {
    public func checkIn(_ request: GeoV1.CheckInRequest, _ context: RequestContext) async throws -> GeoV1.CheckInResponse {
        let checked = try checkedCheckIn(request, context)
        return try await checkIn(request, checked, context)
    }

    /// `CheckIn` started on the host's reactor thread (`MethodRouter.startOnReactor(_:keyed:_:)`):
    /// checked there, written through the write queue with the request's scope, and answered from
    /// the commit's thread (`docs/benchmarks.md`, issue 16, item 91). A check-in that attaches or
    /// releases a photo asks media first, which suspends: it goes on on a task of its own, with
    /// the request's scope bound as the task path binds it. A keyed check-in's reply is written
    /// with its row and claim (item 94): a retry after a crash gets it back, not ALREADY_EXISTS.
    func checkIn(_ request: GeoV1.CheckInRequest, _ context: RequestContext,
                 done: @escaping @Sendable (Result<GeoV1.CheckInResponse, any Error>) -> Void) {
        let checked: CheckedCheckIn
        do { checked = try checkedCheckIn(request, context) } catch { return done(.failure(error)) }
        guard !checked.photos else {
            return IdempotencyScope.onTask(bound: context.idempotency, { try await self.checkIn(request, checked, context) }, then: done)
        }
        let record = checked.record(at: now(), lifetime: config.checkInLifetime, mediaID: request.mediaId)
        store.saveCheckIn(record, now: record.createdMs, as: context.idempotency,
                          reply: { replaced in Self.checkedIn(record, replaced: replaced).serializedBytes() }) { result in
            done(result.map { replaced in self.checkedIn(record, replaced: replaced) })
        }
    }

    /// A check-in's request, checked: the place's name, where, and whether media is asked (a
    /// photo to attach, or the previous check-in's to release).
    struct CheckedCheckIn: Sendable {
        var caller: UInt64
        var name: String
        var point: (lat: Double, lon: Double)
        var photos: Bool

        func record(at: Int64, lifetime: Duration, mediaID: String) -> CheckInRecord {
            CheckInRecord(user: caller, placeName: name, lat: point.lat, lon: point.lon, mediaID: mediaID,
                          createdMs: at, expiresMs: at + lifetime.wholeMilliseconds)
        }
    }

    private func checkedCheckIn(_ request: GeoV1.CheckInRequest, _ context: RequestContext) throws -> CheckedCheckIn {
        let caller = try context.requireCaller()
        let name = request.placeName.trimmingWhitespace()
        guard (1...80).contains(name.count) else { throw RPCError.invalidArgument("place_name: 1-80 characters") }
        guard request.mediaId.count <= 64, request.mediaId.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "-" || $0 == "_") }) else {
            throw RPCError.invalidArgument("media_id: an id from the media service")
        }
        let p = try point(request.hasPoint, request.latitude, request.longitude, caller: caller)
        let previousPhoto = state.mutex.withLock { $0.checkIns[caller]?.mediaID ?? "" }
        return CheckedCheckIn(caller: caller, name: name, point: p, photos: !request.mediaId.isEmpty || !previousPhoto.isEmpty)
    }

    /// The stored check-in in memory, and the reply.
    private func checkedIn(_ record: CheckInRecord, replaced: Bool) -> GeoV1.CheckInResponse {
        state.mutex.withLock { $0.checkIns[record.user] = record }
        return Self.checkedIn(record, replaced: replaced)
    }

    /// The reply to a check-in that made `record`.
    static func checkedIn(_ record: CheckInRecord, replaced: Bool) -> GeoV1.CheckInResponse {
        GeoV1.CheckInResponse(checkIn: proto(record, distance: 0), replaced: replaced)
    }

    private func checkIn(_ request: GeoV1.CheckInRequest, _ checked: CheckedCheckIn, _ context: RequestContext) async throws -> GeoV1.CheckInResponse {
        let caller = checked.caller
        if checked.photos {
            // The photo must be the caller's check-in upload; the replaced check-in's photo is released.
            // Not for a request applied before (a retry after a restart, or the dry run of one
            // whose reply a crash lost): it would take the photo of the check-in made since. The
            // method claims first, so the store is read here.
            try await IdempotencyScope.confirmFirstRun()
            if let photos {
                do {
                    try await photos.attach(user: caller, mediaID: request.mediaId, deadline: context.downstreamBudget)
                } catch let error as RPCError where request.mediaId.isEmpty {
                    // Only a release: the check-in goes ahead; media drops the photo when the next one is attached.
                    context.logger.warning("previous check-in photo not released", metadata: ["error": "\(error)"])
                }
            } else if !request.mediaId.isEmpty {
                throw RPCError.unavailable("photos are not available: check in without one")
            }
        }
        let record = checked.record(at: now(), lifetime: config.checkInLifetime, mediaID: request.mediaId)
        return checkedIn(record, replaced: try await store.saveCheckIn(record, now: record.createdMs))
    }

    /// Active check-ins the caller may see near them: those of people whose location they may
    /// see, and those of findable people (check-ins are how strangers nearby meet); never across
    /// a block or from someone in ghost mode unless visible anyway.
    public func listCheckIns(_ request: GeoV1.ListCheckInsRequest, _ context: RequestContext) async throws -> GeoV1.ListCheckInsResponse {
        let caller = try context.requireCaller()
        let maxRadius = request.feed ? config.feedRadius : config.checkInRadius
        let radius = request.radiusM == 0 ? maxRadius : request.radiusM
        guard radius.isFinite, radius > 0, radius <= max(maxRadius, config.feedRadius) else {
            throw RPCError.invalidArgument("radius_m: more than 0, at most \(Int(max(maxRadius, config.feedRadius)))")
        }
        let limit = request.limit == 0 ? 20 : Int(request.limit)
        guard limit <= 100 else { throw RPCError.invalidArgument("limit: at most 100") }
        let me = try point(false, 0, 0, caller: caller)
        let at = now()
        let found = state.mutex.withLock { s in
            graph.read { g in Self.checkIns(within: radius, of: me, seenBy: caller, in: s, graph: g, at: at) }
        }
        // Sorted by their keys, each check-in moved once (`sorted(byKey:descending:limit:)`).
        let shown = request.feed
            ? found.sorted(byKey: { KeyPair($0.createdAtMs, $0.userId) }, descending: true, limit: limit)
            : found.sorted(byKey: { KeyPair($0.distanceM, $0.userId) }, limit: limit)
        return GeoV1.ListCheckInsResponse(checkIns: shown)
    }

    /// The live check-ins within `radius` of `me` that `caller` may see, unsorted. A loop over
    /// the borrowed state, not a closure that captures it: that would copy the whole state for
    /// every check-in it looks at (`docs/benchmarks.md`, item 81).
    static func checkIns(within radius: Double, of me: (lat: Double, lon: Double), seenBy caller: UInt64,
                         in s: borrowing GeoState, graph g: borrowing GraphState, at: Int64) -> [GeoV1.CheckIn] {
        var found: [GeoV1.CheckIn] = []
        for c in s.checkIns.values where c.expiresMs > at {
            let d = GeoMath.distance(lat1: me.lat, lon1: me.lon, lat2: c.lat, lon2: c.lon)
            guard d <= radius, let precision = checkInPrecision(to: caller, of: c.user, s, g, at) else { continue }
            found.append(proto(c, distance: d, at: precision))
        }
        return found
    }

    /// Who sees a check-in: its owner, those who may see the owner's location, and anyone not
    /// blocked when the owner is findable and not in ghost mode (check-ins are how strangers meet).
    static func checkInShown(to viewer: UInt64, of owner: UInt64, _ s: GeoState, _ g: GraphState, _ at: Int64) -> Bool {
        checkInPrecision(to: viewer, of: owner, s, g, at) != nil
    }

    /// How precisely: a findable owner's check-in is public (exact, as to any stranger nearby);
    /// otherwise as the viewer sees the owner's location (precision per friend). A check-in
    /// inside one of the owner's private zones shows others its name only, never coordinates.
    static func checkInPrecision(to viewer: UInt64, of owner: UInt64, _ s: GeoState, _ g: GraphState, _ at: Int64) -> Precision? {
        if owner == viewer { return .exact }
        let seen = g.isFindable(owner) && !g.blocked(viewer, owner) && !s.settings(of: owner).ghost
            ? .exact : s.disclosure(viewer: viewer, subject: owner, graph: g, now: at)
        guard let seen, !s.zones.isEmpty, let c = s.checkIns[owner],
              s.zones.privateZone(of: owner, lat: c.lat, lon: c.lon, accuracy: 0) != nil else { return seen }
        return max(seen, .place)
    }

    /// For media: the rule of `listCheckIns` (without the distance) for one check-in.
    public func checkInAccess(_ request: GeoV1.CheckInAccessRequest, _ context: RequestContext) async throws -> GeoV1.CheckInAccessResponse {
        let at = now()
        return state.mutex.withLock { s in
            graph.read { g in
                guard let c = s.checkIns[request.ownerId], c.expiresMs > at else { return GeoV1.CheckInAccessResponse() }
                return Self.checkInShown(to: request.viewerId, of: request.ownerId, s, g, at)
                    ? GeoV1.CheckInAccessResponse(visible: true, mediaId: c.mediaID) : GeoV1.CheckInAccessResponse()
            }
        }
    }

    static func proto(_ c: CheckInRecord, distance: Double) -> GeoV1.CheckIn {
        GeoV1.CheckIn(userId: c.user, placeName: c.placeName, latitude: c.lat, longitude: c.lon, mediaId: c.mediaID,
                      createdAtMs: c.createdMs, expiresAtMs: c.expiresMs, distanceM: distance)
    }

    /// At a precision: approximate gives the cell's centre (and the distance to it, rounded to
    /// 100 m); place gives the place's name only (no coordinates, no distance).
    static func proto(_ c: CheckInRecord, distance: Double, at precision: Precision) -> GeoV1.CheckIn {
        var shown = proto(c, distance: distance)
        switch precision {
        case .exact: break
        case .approximate:
            (shown.latitude, shown.longitude) = Precision.snap(lat: c.lat, lon: c.lon)
            shown.distanceM = (distance / 100).rounded() * 100
        case .place, .hidden:
            (shown.latitude, shown.longitude, shown.distanceM) = (0, 0, 0)
        }
        return shown
    }
}

// MARK: - Storage

struct CheckInRecord: Sendable {
    var user: UInt64
    var placeName: String
    var lat: Double
    var lon: Double
    var mediaID: String
    var createdMs: Int64
    var expiresMs: Int64
}

extension SQLiteGeoStore {
    func loadCheckIns(now: Int64) throws -> [UInt64: CheckInRecord] {
        try database.write { db in
            try db.run(sql: "DELETE FROM check_ins WHERE expires_ms <= ?", arguments: [now])
            var result: [UInt64: CheckInRecord] = [:]
            try Row.forEach(db, cached: "SELECT user_id, place_name, lat, lon, media_id, created_ms, expires_ms FROM check_ins") { row in
                result[try row[0]] = try CheckInRecord(user: row[0], placeName: row[1], lat: row[2], lon: row[3], mediaID: row[4],
                                               createdMs: row[5], expiresMs: row[6])
            }
            return result
        }
    }

    /// - Returns: whether an active check-in was replaced.
    func saveCheckIn(_ c: CheckInRecord, now: Int64) async throws -> Bool {
        try await database.write { db in try Self.saveCheckIn(c, now: now, db) }
    }

    func saveCheckIn(_ c: CheckInRecord, now: Int64, as scope: IdempotencyScope?, reply: @escaping @Sendable (Bool) -> [UInt8],
                     then done: @escaping @Sendable (Result<Bool, any Error>) -> Void) {
        database.write(as: scope, { db in try Self.saveCheckIn(c, now: now, db) }, reply: reply, then: done)
    }

    private static func saveCheckIn(_ c: CheckInRecord, now: Int64, _ db: Database) throws -> Bool {
        let replaced = try Bool.fetchOne(db, cached: "SELECT EXISTS(SELECT 1 FROM check_ins WHERE user_id = ? AND expires_ms > ?)",
                                         arguments: [c.user, now]) ?? false
        try db.run(sql: """
            INSERT OR REPLACE INTO check_ins (user_id, place_name, lat, lon, media_id, created_ms, expires_ms) VALUES (?, ?, ?, ?, ?, ?, ?)
            """, binding: c.user, c.placeName, c.lat, c.lon, c.mediaID, c.createdMs, c.expiresMs)
        return replaced
    }
}
