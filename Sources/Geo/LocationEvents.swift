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
    /// How near a place counts as "Around" it (for viewers who see only the place).
    let aroundWithin: Double
    /// Live events count as reads of the subject's location (who saw it).
    let audit: AuditLog
    let now: @Sendable () -> Int64

    /// - Parameters:
    ///   - inside: where the watched subjects of the batch now are (`GeoState.WritePlan.inside`).
    ///   - told: the place alerts the batch fired, as stored with it.
    func applied(_ batch: [LocationUpdate], replaces: [Bool], inside: [UInt64: Set<PlaceTarget>] = [:], told: [PlaceEventRecord] = []) {
        let at = now()
        let aroundWithin = aroundWithin
        let (outgoing, labels) = state.mutex.withLock { s -> ([GeoState.Outgoing], [String]) in
            if !inside.isEmpty { s.placeAlerts.apply(inside: inside) }
            let outgoing = publisher == nil
                ? s.applied(batch, replaces: replaces, graph: nil, now: at)
                : graph.read { g in s.applied(batch, replaces: replaces, graph: g, now: at) { publisher?.listens(toViewer: $0) ?? false } }
            // The "Around" label, for the viewers who see only the place (computed under the lock: it reads the places).
            let labels = outgoing.map { event -> String in
                guard case .location(_, let subject, let fix, .place) = event else { return "" }
                return s.placeLabel(of: subject, fix: fix, within: aroundWithin)
            }
            return (outgoing, labels)
        }
        guard let publisher else { return }
        for event in told {
            publisher.emit(topic: ViewerTopic.of(event.viewer), method: "geo.PlaceAlert", payload: event.proto.serializedBytes())
            audit.record(subject: event.subject, viewers: [event.viewer], kind: .placeAlert, at: at)
        }
        if !told.isEmpty { publisher.emit(topic: GeoService.placeEventStream, method: "geo.PlaceEvents", payload: []) }
        for (event, label) in zip(outgoing, labels) {
            switch event {
            case .location(let all, let subject, let fix, let precision):
                // Only to viewers with a live connection somewhere (a gateway or the edge subscribed
                // their topic): nobody else would receive it, and it counts as seen only when sent.
                let viewers = all.filter { publisher.listens(toViewer: $0) }
                if viewers.isEmpty { continue }
                // Encoded once per precision, however many viewers.
                var message = GeoV1.LocationEvent(userId: subject, status: fix.status, precision: precision.proto)
                switch precision {
                case .exact: message.fix = GeoService.proto(fix)
                case .approximate: message.fix = GeoService.proto(fix.approximate)
                case .place: message.around = label
                case .hidden: message.status = "" // gone from sight: nothing of where, nothing to audit
                }
                publisher.emit(topics: viewers.map(ViewerTopic.of), method: "geo.Location", payload: message.serializedBytes())
                if precision != .hidden { audit.record(subject: subject, viewers: viewers, kind: .live, at: at) }
            case .nearby(let viewer, let friend, let distance, let atMs):
                guard publisher.listens(toViewer: viewer) else { continue }
                publisher.emit(topic: ViewerTopic.of(viewer), method: "geo.FriendNearby",
                               payload: GeoV1.FriendNearbyEvent(userId: friend, distanceM: distance, atMs: atMs).serializedBytes())
            }
        }
    }
}
