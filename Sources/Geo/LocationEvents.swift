import FriensoProto
import SocialReplica
import Synchronization
import Wire

/// What happens once a batch of updates has committed: readers see it, permitted viewers get a
/// live `geo.Location` event, and friends who both asked for proximity alerts get
/// `geo.FriendNearby` (with hysteresis).
struct LocationEvents: Sendable {
    let graph: any GraphSource
    let publisher: (any EventSink)?
    let state: SharedState
    let now: @Sendable () -> Int64

    func applied(_ batch: [LocationUpdate], replaces: [Bool]) {
        var outgoing: [(topic: String, method: String, payload: [UInt8])] = []
        let at = now()
        state.mutex.withLock { s in
            for (update, replace) in zip(batch, replaces) {
                if replace {
                    let status = update.status ?? s.latest[update.user]?.status ?? ""
                    s.latest[update.user] = LatestFix(lat: update.lat, lon: update.lon, accuracy: update.accuracy,
                                                      deviceMs: update.deviceMs, receivedMs: update.receivedMs, status: status)
                    s.index.upsert(update.user, lat: update.lat, lon: update.lon)
                } else if let status = update.status {
                    s.latest[update.user]?.status = status
                }
            }
            guard publisher != nil else { return }
            graph.read { g in
                for (update, replace) in zip(batch, replaces) where replace {
                    guard let fix = s.latest[update.user] else { continue }
                    outgoing += locationEvents(for: update.user, fix: fix, s, g, at)
                    outgoing += proximityEvents(for: update.user, fix: fix, &s, g, at)
                }
            }
        }
        guard let publisher else { return }
        for event in outgoing { publisher.publish(topic: event.topic, method: event.method, payload: event.payload) }
    }

    private func locationEvents(for subject: UInt64, fix: LatestFix, _ s: GeoState, _ g: GraphState, _ at: Int64)
        -> [(topic: String, method: String, payload: [UInt8])] {
        var viewers = Set(g.friends(of: subject))
        viewers.formUnion(s.grants.viewers(of: subject, now: at))
        let permitted = viewers.filter { s.visible(viewer: $0, subject: subject, graph: g, now: at) }
        guard !permitted.isEmpty else { return [] }
        let payload = GeoV1.LocationEvent(userId: subject, fix: GeoService.proto(fix), status: fix.status).serializedBytes()
        return permitted.sorted().map { ("viewer.\($0)", "geo.Location", payload) }
    }

    /// Pairs re-arm only after moving apart beyond 1.5 × their distance, so a pair hovering at
    /// the boundary is told once.
    private func proximityEvents(for user: UInt64, fix: LatestFix, _ s: inout GeoState, _ g: GraphState, _ at: Int64)
        -> [(topic: String, method: String, payload: [UInt8])] {
        let mine = s.settings(of: user)
        guard mine.proximityAlerts else { return [] }
        var out: [(topic: String, method: String, payload: [UInt8])] = []
        for friend in g.friends(of: user) {
            let theirs = s.settings(of: friend)
            guard theirs.proximityAlerts, let other = s.latest[friend],
                  s.visible(viewer: user, subject: friend, graph: g, now: at),
                  s.visible(viewer: friend, subject: user, graph: g, now: at) else { continue }
            let threshold = min(mine.proximityMetres, theirs.proximityMetres)
            let distance = GeoMath.distance(lat1: fix.lat, lon1: fix.lon, lat2: other.lat, lon2: other.lon)
            let pair = GeoState.Pair(user, friend)
            if distance <= threshold, !s.near.contains(pair) {
                s.near.insert(pair)
                out.append(("viewer.\(user)", "geo.FriendNearby",
                            GeoV1.FriendNearbyEvent(userId: friend, distanceM: distance, atMs: at).serializedBytes()))
                out.append(("viewer.\(friend)", "geo.FriendNearby",
                            GeoV1.FriendNearbyEvent(userId: user, distanceM: distance, atMs: at).serializedBytes()))
            } else if distance > threshold * 1.5 {
                s.near.remove(pair)
            }
        }
        return out
    }
}
