import FriensoProto
import Wire

/// Place alerts by push: geo stores each place event ("Alice arrived at Home") and wakes alerts
/// on its "placeevents" stream; alerts pulls them after its cursor (`pull`) and queues one push
/// per event to the viewer's devices, the cursor moving in the same transaction (each event
/// queued once however often this runs, and none lost while geo or alerts restarts).
extension AlertsService {
    /// - Returns: how many events were taken.
    @discardableResult
    public func pullPlaceEvents() async throws -> Int {
        try await pull(after: "geo.place_events", limit: 500, fetch: { try await self.peers.placeEvents(after: $0, limit: $1) },
                       id: \.event.eventId, messages: { events in
            let names = try await self.peers.people(Set(events.map(\.event.subjectId)))
            return events.map { e in
                Outgoing(source: "place:\(e.event.eventId)", recipient: .user(e.viewer), channels: [.push],
                         body: "\(Self.name(names[e.event.subjectId])) \(e.event.arrived ? "arrived at" : "left") \(e.event.label)")
                    .about(e.event.subjectId)
            }
        })
    }
}
