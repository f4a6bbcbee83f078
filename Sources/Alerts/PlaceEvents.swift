import FriensoProto
import GRDB
import Wire

/// Place alerts by push: geo stores each place event ("Alice arrived at Home") and wakes alerts
/// on its "placeevents" stream; alerts pulls them after its cursor and queues one push per
/// event to the viewer's devices, the cursor moving in the same transaction (each event queued
/// once however often this runs, and none lost while geo or alerts restarts).
extension AlertsService {
    /// - Returns: how many events were taken.
    @discardableResult
    public func pullPlaceEvents() async throws -> Int {
        var taken = 0
        while true {
            let cursor = try await store.database.read { db in try AlertsStore.cursor(db, "geo.place_events") }
            let events = try await peers.placeEvents(after: cursor, limit: 500)
            guard let last = events.last else { return taken }
            let names = try await peers.people(Set(events.map(\.event.subjectId)))
            let at = now()
            try await store.database.write { db in
                let messages = events.map { e in
                    Outgoing(source: "place:\(e.event.eventId)", recipient: .user(e.viewer), channels: [.push],
                             body: "\(Self.name(names[e.event.subjectId])) \(e.event.arrived ? "arrived at" : "left") \(e.event.label)")
                        .about(e.event.subjectId)
                }
                try AlertsStore.enqueue(db, messages, now: at)
                try AlertsStore.setCursor(db, "geo.place_events", max(last.event.eventId, try AlertsStore.cursor(db, "geo.place_events")))
            }
            deliveryBell.ring()
            taken += events.count
            if events.count < 500 { return taken }
        }
    }
}
