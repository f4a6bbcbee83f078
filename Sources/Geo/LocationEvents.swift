import FriensoProto
import SocialReplica
import Synchronization
import Wire

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
                publisher.emit(topics: viewers.map(ViewerTopic.of), method: "geo.Location", payload: payload)
            case .nearby(let viewer, let friend, let distance, let atMs):
                publisher.emit(topic: ViewerTopic.of(viewer), method: "geo.FriendNearby",
                               payload: GeoV1.FriendNearbyEvent(userId: friend, distanceM: distance, atMs: atMs).serializedBytes())
            }
        }
    }
}
