import FriensoProto
import SocialReplica
import Synchronization
import Wire

/// What happens once a batch of updates has committed: readers see it, permitted viewers get a
/// live `geo.Location` event, and friends who both asked for proximity alerts get
/// `geo.FriendNearby` (with hysteresis).
struct LocationEvents: Sendable {
    /// An event decided under the state lock; encoded and published after it is released.
    enum Outgoing {
        case location(viewers: [UInt64], GeoV1.LocationEvent)
        case nearby(viewer: UInt64, GeoV1.FriendNearbyEvent)
    }

    let graph: any GraphSource
    let publisher: (any EventSink)?
    let state: SharedState
    let now: @Sendable () -> Int64

    func applied(_ batch: [LocationUpdate], replaces: [Bool]) {
        var outgoing: [Outgoing] = []
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
        for event in outgoing {
            switch event {
            case .location(let viewers, let message):
                let payload = message.serializedBytes() // once, however many viewers
                for viewer in viewers { publisher.emit(topic: "viewer.\(viewer)", method: "geo.Location", payload: payload) }
            case .nearby(let viewer, let message):
                publisher.emit(topic: "viewer.\(viewer)", method: "geo.FriendNearby", payload: message.serializedBytes())
            }
        }
    }

    private func locationEvents(for subject: UInt64, fix: LatestFix, _ s: GeoState, _ g: GraphState, _ at: Int64) -> [Outgoing] {
        var viewers = Set(g.friends(of: subject))
        viewers.formUnion(s.grants.viewers(of: subject, now: at))
        let permitted = viewers.filter { s.visible(viewer: $0, subject: subject, graph: g, now: at) }
        guard !permitted.isEmpty else { return [] }
        return [.location(viewers: permitted.sorted(), GeoV1.LocationEvent(userId: subject, fix: GeoService.proto(fix), status: fix.status))]
    }

    /// Pairs re-arm only after moving apart beyond 1.5 × their distance, so a pair hovering at
    /// the boundary is told once.
    private func proximityEvents(for user: UInt64, fix: LatestFix, _ s: inout GeoState, _ g: GraphState, _ at: Int64) -> [Outgoing] {
        let mine = s.settings(of: user)
        guard mine.proximityAlerts else { return [] }
        var out: [Outgoing] = []
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
                out.append(.nearby(viewer: user, GeoV1.FriendNearbyEvent(userId: friend, distanceM: distance, atMs: at)))
                out.append(.nearby(viewer: friend, GeoV1.FriendNearbyEvent(userId: user, distanceM: distance, atMs: at)))
            } else if distance > threshold * 1.5 {
                s.near.remove(pair)
            }
        }
        return out
    }
}
