public import FriensoProto
public import Wire

/// The live events a front door relays, by the method their publisher names, as JSON: the same
/// messages the ZeroMQ gateway relays as protobuf (`frienso events` prints them).
public enum LiveEvents {
    /// Event method → its message's JSON from the payload (nil: the payload does not decode).
    static let decoders: [String: @Sendable ([UInt8]) -> JSONValue?] = [
        "geo.Location": { (try? GeoV1.LocationEvent(serializedBytes: $0))?.jsonValue },
        "geo.FriendNearby": { (try? GeoV1.FriendNearbyEvent(serializedBytes: $0))?.jsonValue },
        "geo.PlaceAlert": { (try? GeoV1.PlaceAlertEvent(serializedBytes: $0))?.jsonValue },
        "social.Poke": { (try? SocialV1.Poke(serializedBytes: $0))?.jsonValue },
        "alerts.Event": { (try? AlertsV1.AlertEvent(serializedBytes: $0))?.jsonValue },
    ]

    /// The events clients can receive, for the documentation and the tests.
    public static var methods: [String] { decoders.keys.sorted() }

    /// The event's `data` as JSON; nil for an event this build does not know (skipped, logged).
    public static func json(_ event: Envelope) -> JSONValue? {
        decoders[event.method]?(event.payload)
    }
}
