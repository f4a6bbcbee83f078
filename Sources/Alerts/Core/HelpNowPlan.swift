import FriensoProto
import Places

/// What a helpNow raise does, decided as a value before anything is written: who is reached and
/// how (a user by push and SMS, an invited number by SMS), who may see the initiator until the
/// alert is resolved, and which number the emergency prompt suggests. The handler
/// (`HelpNow.swift`) gathers the inputs from the other services and writes the plan in one
/// transaction.
struct HelpNowPlan: Equatable, Sendable {
    struct Numbers: Equatable, Sendable {
        var emergency: String
        var emergencyLabel: String
        /// Empty when the deployment has no campus police number.
        var campusPolice: String
        var campusPoliceLabel: String
    }

    static let maximumMessageLength = 500

    /// The circle in order: each becomes a recipient row.
    var recipients: [CircleContact]
    var grants: [GrantRecord]
    var promptNumber: String
    var promptLabel: String

    /// - Parameters:
    ///   - circle: the initiator's circle (accepted members, then invited numbers), as social says.
    ///   - location: the initiator's last fix; at a named campus place the prompt suggests campus police.
    init(initiator: UInt64, circle: [CircleContact], location: AlertsV1.AlertLocation, numbers: Numbers) {
        recipients = circle
        grants = circle.compactMap { contact in
            guard case .user(let user) = contact else { return nil }
            return GrantRecord(subject: initiator, viewer: user, reason: "help_now", expiresMs: GrantRecord.untilResolved)
        }
        let police = !numbers.campusPolice.isEmpty && location.known && !location.placeName.isEmpty
        (promptNumber, promptLabel) = police ? (numbers.campusPolice, numbers.campusPoliceLabel) : (numbers.emergency, numbers.emergencyLabel)
    }

    /// The users among the recipients (they get live events and grants).
    var users: [UInt64] { recipients.compactMap { if case .user(let user) = $0 { user } else { nil } } }

    /// The messages to queue for alert `source`, each recipient on every channel that reaches it.
    func deliveries(source: String, text: String) -> [Outgoing] {
        recipients.map { contact in
            switch contact {
            case .user(let user): Outgoing(source: source, recipient: .user(user), channels: [.push, .sms], body: text)
            case .phone(let phone): Outgoing(source: source, recipient: .phone(phone), channels: [.sms], body: text)
            }
        }
    }
}

extension HelpNowPlan {
    /// How far ahead of the server's clock a phone's fix may be (geo allows the same for a
    /// location update).
    static let maximumClockSkewMs: Int64 = 300_000

    /// A phone's own fix, sent with its raise, refused with the reason the caller is told.
    struct FixRefused: Error, Equatable {
        let reason: String
    }

    /// The alert's location from the phone's own fix (geo's rules for a location update), without
    /// a place name yet (geo names it). - Throws: `FixRefused`.
    static func location(from fix: AlertsV1.DeviceFix, now: Int64) throws(FixRefused) -> AlertsV1.AlertLocation {
        guard GeoMath.isValid(latitude: fix.latitude, longitude: fix.longitude) else {
            throw FixRefused(reason: "fix: latitude must be -90..90 and longitude -180..180 (finite numbers)")
        }
        guard fix.accuracyM.isFinite, (0...100_000).contains(fix.accuracyM) else {
            throw FixRefused(reason: "fix.accuracy_m: 0 to 100,000 metres")
        }
        guard fix.deviceTimeMs > 0 else { throw FixRefused(reason: "fix.device_time_ms: required (milliseconds since 1970)") }
        guard fix.deviceTimeMs <= now + maximumClockSkewMs else {
            throw FixRefused(reason: "fix.device_time_ms is in the future: check the device clock")
        }
        return AlertsV1.AlertLocation(known: true, latitude: fix.latitude, longitude: fix.longitude, accuracyM: fix.accuracyM,
                                      fixTimeMs: fix.deviceTimeMs)
    }
}
