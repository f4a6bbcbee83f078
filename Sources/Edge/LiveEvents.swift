public import FriensoProto
public import Wire

/// The live events a front door relays, by the method their publisher names, as JSON: the same
/// messages the ZeroMQ gateway relays as protobuf (`frienso events` prints them).
public enum LiveEvents {
    /// Event method → its message's JSON text from the payload (nil: the payload does not decode).
    static let decoders: [String: @Sendable ([UInt8]) -> [UInt8]?] = [
        "geo.Location": { text(try? GeoV1.LocationEvent(serializedBytes: $0)) },
        "geo.FriendNearby": { text(try? GeoV1.FriendNearbyEvent(serializedBytes: $0)) },
        "geo.PlaceAlert": { text(try? GeoV1.PlaceAlertEvent(serializedBytes: $0)) },
        "social.Poke": { text(try? SocialV1.Poke(serializedBytes: $0)) },
        "alerts.Event": { text(try? AlertsV1.AlertEvent(serializedBytes: $0)) },
    ]

    /// The events clients can receive, for the documentation and the tests.
    public static var methods: [String] { decoders.keys.sorted() }

    /// The event's `data` as JSON text (its message's `jsonValue`, written without the tree);
    /// nil for an event this build does not know (skipped, logged).
    public static func json(_ event: Envelope) -> [UInt8]? {
        decoders[event.method]?(event.payload)
    }

    private static func text(_ message: (some ProtoMessage)?) -> [UInt8]? {
        guard let message else { return nil }
        var out: [UInt8] = []
        out.reserveCapacity(256)
        message.writeJSON(into: &out)
        return out
    }
}
