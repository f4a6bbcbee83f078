import FriensoProto
import SocialReplica
import Synchronization
import Wire

extension GeoState {
    /// An event a committed batch causes, decided under the state lock.
    enum Outgoing: Equatable {
        /// `subject`'s new fix, for every viewer allowed to see it.
        case location(viewers: [UInt64], subject: UInt64, fix: LatestFix)
        /// `friend` came within range of `viewer` (told to both, once, with hysteresis).
        case nearby(viewer: UInt64, friend: UInt64, distance: Double, atMs: Int64)
    }

    /// Applies a committed batch to memory (latest fixes, statuses, the index) and, when
    /// `decideEvents`, returns what it causes: a `location` for the viewers each new fix may
    /// reach, and `nearby` for friends who both asked for proximity alerts and came within the
    /// smaller of their distances (re-armed only beyond 1.5 × it, so a pair hovering at the
    /// boundary is told once). Pure: no publishing, no encoding.
    mutating func applied(_ batch: [LocationUpdate], replaces: [Bool], graph: GraphState?, now at: Int64) -> [Outgoing] {
        for (update, replace) in zip(batch, replaces) {
            if replace {
                let status = update.status ?? latest[update.user]?.status ?? ""
                latest[update.user] = LatestFix(lat: update.lat, lon: update.lon, accuracy: update.accuracy,
                                                deviceMs: update.deviceMs, receivedMs: update.receivedMs, status: status)
                index.upsert(update.user, lat: update.lat, lon: update.lon)
            } else if let status = update.status {
                latest[update.user]?.status = status
            }
        }
        guard let graph else { return [] }
        var outgoing: [Outgoing] = []
        for (update, replace) in zip(batch, replaces) where replace {
            guard let fix = latest[update.user] else { continue }
            outgoing += locationEvents(for: update.user, fix: fix, graph, at)
            outgoing += proximityEvents(for: update.user, fix: fix, graph, at)
        }
        return outgoing
    }

    private func locationEvents(for subject: UInt64, fix: LatestFix, _ g: GraphState, _ at: Int64) -> [Outgoing] {
        var viewers = Set(g.friends(of: subject))
        viewers.formUnion(grants.viewers(of: subject, now: at))
        let permitted = viewers.filter { visible(viewer: $0, subject: subject, graph: g, now: at) }
        guard !permitted.isEmpty else { return [] }
        return [.location(viewers: permitted.sorted(), subject: subject, fix: fix)]
    }

    private mutating func proximityEvents(for user: UInt64, fix: LatestFix, _ g: GraphState, _ at: Int64) -> [Outgoing] {
        let mine = settings(of: user)
        guard mine.proximityAlerts else { return [] }
        var out: [Outgoing] = []
        for friend in g.friends(of: user) {
            let theirs = settings(of: friend)
            guard theirs.proximityAlerts, let other = latest[friend],
                  visible(viewer: user, subject: friend, graph: g, now: at),
                  visible(viewer: friend, subject: user, graph: g, now: at) else { continue }
            let threshold = min(mine.proximityMetres, theirs.proximityMetres)
            let distance = GeoMath.distance(lat1: fix.lat, lon1: fix.lon, lat2: other.lat, lon2: other.lon)
            let pair = Pair(user, friend)
            if distance <= threshold, !near.contains(pair) {
                near.insert(pair)
                out.append(.nearby(viewer: user, friend: friend, distance: distance, atMs: at))
                out.append(.nearby(viewer: friend, friend: user, distance: distance, atMs: at))
            } else if distance > threshold * 1.5 {
                near.remove(pair)
            }
        }
        return out
    }
}

/// The shell around `GeoState.applied`: once a batch of updates has committed, readers see it
/// (under the state lock) and the events it causes go out as `geo.Location` and
/// `geo.FriendNearby` to each viewer's topic, encoded after the lock is released.
struct LocationEvents: Sendable {
    let graph: any GraphSource
    let publisher: (any EventSink)?
    let state: SharedState
    let now: @Sendable () -> Int64

    func applied(_ batch: [LocationUpdate], replaces: [Bool]) {
        let at = now()
        let outgoing = state.mutex.withLock { s in
            publisher == nil
                ? s.applied(batch, replaces: replaces, graph: nil, now: at)
                : graph.read { g in s.applied(batch, replaces: replaces, graph: g, now: at) }
        }
        guard let publisher else { return }
        for event in outgoing {
            switch event {
            case .location(let viewers, let subject, let fix):
                // Encoded once, however many viewers.
                let payload = GeoV1.LocationEvent(userId: subject, fix: GeoService.proto(fix), status: fix.status).serializedBytes()
                for viewer in viewers { publisher.emit(topic: "viewer.\(viewer)", method: "geo.Location", payload: payload) }
            case .nearby(let viewer, let friend, let distance, let atMs):
                publisher.emit(topic: "viewer.\(viewer)", method: "geo.FriendNearby",
                               payload: GeoV1.FriendNearbyEvent(userId: friend, distanceM: distance, atMs: atMs).serializedBytes())
            }
        }
    }
}
