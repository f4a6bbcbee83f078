import Foundation
public import FriensoProto
import SocialReplica
public import Wire

/// People nearby who want to be found, and navigation to a friend.
extension GeoService {
    public func nearby(_ request: GeoV1.NearbyRequest, _ context: RequestContext) async throws -> GeoV1.NearbyResponse {
        try nearbyNow(request, context)
    }

    /// `nearby`, answered from memory without suspending (the host may call it on its reactor thread).
    func nearbyNow(_ request: GeoV1.NearbyRequest, _ context: RequestContext) throws -> GeoV1.NearbyResponse {
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
                let anyGhost = !s.sharing.isEmpty, anyZone = !s.zones.isEmpty
                // The graph is the filter's argument, not a capture: no copy of it per candidate (item 81).
                return s.index.nearest(lat: me.lat, lon: me.lon, radius: radius, limit: limit, reading: g) { g, user in
                    user != caller && g.isFindable(user) && (hidden.isEmpty || !hidden.contains(user))
                        && !(anyGhost && s.sharing[user]?.ghost == true)
                        // Inside a private zone, a distance would tell where the zone is.
                        && !(anyZone && s.zones.privateZone(of: user, at: s.latest[user]) != nil)
                        && !(excludeExchanged && g.exchanged(caller, user))
                        // A friend who shows the caller less than their exact location: a distance would tell it.
                        && (s.precision.chosen(by: user, for: caller) == .exact || !g.areFriends(caller, user))
                }
            }
        }
    }

    public func navigate(_ request: GeoV1.NavigateRequest, _ context: RequestContext) async throws -> GeoV1.NavigateResponse {
        let caller = try context.requireCaller()
        guard request.userId != 0 else { throw RPCError.invalidArgument("user_id: required") }
        let at = now()
        let reply = try state.mutex.withLock { s in
            guard let mine = s.latest[caller] else { throw RPCError.failedPrecondition("share a location first (frienso locate LAT LON)") }
            let precision = graph.read { g in s.disclosure(viewer: caller, subject: request.userId, graph: g, now: at) }
            // Not visible, place only and unknown look the same: nothing leaks about whether they share at all.
            guard let precision, precision <= .approximate, let exact = s.latest[request.userId] else {
                throw RPCError.notFound("no location of user \(request.userId) that you can see")
            }
            let theirs = precision == .exact ? exact : exact.approximate
            return GeoV1.NavigateResponse(
                distanceM: GeoMath.distance(lat1: mine.lat, lon1: mine.lon, lat2: theirs.lat, lon2: theirs.lon),
                bearingDeg: GeoMath.bearing(lat1: mine.lat, lon1: mine.lon, lat2: theirs.lat, lon2: theirs.lon),
                theirFix: Self.proto(theirs), yourFix: Self.proto(mine))
        }
        // Counted after the state lock is released (the audit has a lock of its own).
        audit.record(subjects: [request.userId], viewer: caller, kind: .navigate, at: at)
        return reply
    }
}
