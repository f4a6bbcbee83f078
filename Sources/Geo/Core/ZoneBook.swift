import Foundation
import FriensoProto

/// How a zone hides its owner while they are inside it.
enum ZonePrivacy: Int, Sendable, Equatable {
    /// Friends see the zone's label, never coordinates.
    case label = 1
    /// Friends see nothing.
    case hidden = 2
    /// Not private: a place of the owner's, for place alerts only.
    case off = 3

    /// UNSPECIFIED is LABEL (what someone who makes a zone and says nothing expects).
    init?(_ proto: GeoV1.ZonePrivacy) {
        if proto == .unspecified { self = .label } else { self.init(rawValue: Int(proto.rawValue)) }
    }
    var proto: GeoV1.ZonePrivacy { GeoV1.ZonePrivacy(rawValue: Int32(rawValue)) }
    var isPrivate: Bool { self != .off }
}

/// A circle a user defined: a privacy zone (home), or a place of theirs for place alerts.
struct ZoneRecord: Sendable, Equatable {
    var id: UInt64
    var user: UInt64
    var label: String
    var lat: Double
    var lon: Double
    var radius: Double
    var privacy: ZonePrivacy
    var keepHistory: Bool
    /// Where the circle that hides the owner is, in metres from the zone's centre (north, east).
    /// Not the centre itself: someone who watches where the owner vanishes, from many
    /// directions, traces that circle's rim, and its centre is not the owner's home. It is as
    /// much bigger as it is shifted, so it still covers the whole zone.
    var shift: (north: Double, east: Double) = (0, 0)

    static let radii = 25.0...5_000.0
    static let maxPerUser = 20
    static let maxLabel = 40

    /// Whether a fix at (lat, lon) with `accuracy` may be inside: its circle of uncertainty
    /// touches the zone. Privacy errs on the side of hiding: a fix 60 m outside a zone with an
    /// accuracy of 100 m could be inside it, so it is treated as inside.
    func covers(lat: Double, lon: Double, accuracy: Double) -> Bool {
        let reach = hidingRadius + max(0, accuracy)
        // Most fixes are far from most zones: a degree of latitude is the same length everywhere.
        guard abs(lat - hidingCentre.lat) * GeoMath.metresPerDegree <= reach else { return false }
        return GeoMath.distance(lat1: hidingCentre.lat, lon1: hidingCentre.lon, lat2: lat, lon2: lon) <= reach
    }

    /// The circle privacy uses (see `shift`): the zone's centre moved by `shift`, its radius grown by as much.
    var hidingCentre: (lat: Double, lon: Double) {
        (lat + shift.north / GeoMath.metresPerDegree, lon + shift.east / (GeoMath.metresPerDegree * max(cos(lat * .pi / 180), 0.01)))
    }
    var hidingRadius: Double { radius + (shift.north * shift.north + shift.east * shift.east).squareRoot() }

    /// A random shift of up to half the radius, in any direction (a new zone, or one moved or resized).
    static func randomShift(radius: Double) -> (north: Double, east: Double) {
        let distance = Double.random(in: 0...(radius / 2)), angle = Double.random(in: 0..<(2 * .pi))
        return (distance * cos(angle), distance * sin(angle))
    }

    static func == (a: ZoneRecord, b: ZoneRecord) -> Bool {
        (a.id, a.user, a.label, a.privacy, a.keepHistory) == (b.id, b.user, b.label, b.privacy, b.keepHistory)
            && (a.lat, a.lon, a.radius, a.shift.north, a.shift.east) == (b.lat, b.lon, b.radius, b.shift.north, b.shift.east)
    }

    var area: PlaceArea { PlaceArea(lat: lat, lon: lon, radius: radius, ring: []) }

    func proto(inside: Bool) -> GeoV1.Zone {
        GeoV1.Zone(zoneId: id, label: label, latitude: lat, longitude: lon, radiusM: radius, privacy: privacy.proto,
                   keepHistory: keepHistory, inside: inside)
    }
}

/// Every user's zones, by user (a handful each; most people have none).
struct ZoneBook: Sendable {
    private var byUser: [UInt64: [ZoneRecord]] = [:]

    init(_ loaded: [ZoneRecord] = []) {
        for zone in loaded { byUser[zone.user, default: []].append(zone) }
        for user in byUser.keys { byUser[user]?.sort { $0.id < $1.id } }
    }

    var isEmpty: Bool { byUser.isEmpty }

    func zones(of user: UInt64) -> [ZoneRecord] { byUser[user] ?? [] }

    func zone(_ id: UInt64, of user: UInt64) -> ZoneRecord? { byUser[user]?.first { $0.id == id } }

    /// The private zone `user`'s fix falls in, if any: HIDDEN before LABEL (the stricter one
    /// wins where two overlap), then the smaller.
    func privateZone(of user: UInt64, lat: Double, lon: Double, accuracy: Double) -> ZoneRecord? {
        guard let zones = byUser[user] else { return nil }
        var best: ZoneRecord?
        for zone in zones where zone.privacy.isPrivate && zone.covers(lat: lat, lon: lon, accuracy: accuracy) {
            // The stricter wins; between equals, the smaller.
            if let b = best, b.privacy == .hidden && zone.privacy != .hidden || (b.privacy == zone.privacy && b.radius <= zone.radius) { continue }
            best = zone
        }
        return best
    }

    func privateZone(of user: UInt64, at fix: LatestFix?) -> ZoneRecord? {
        guard let fix, byUser[user] != nil else { return nil }
        return privateZone(of: user, lat: fix.lat, lon: fix.lon, accuracy: fix.accuracy)
    }

    /// Whether an update at this point is kept out of history: inside a private zone that does
    /// not keep history.
    func unrecorded(_ update: LocationUpdate) -> Bool {
        guard let zones = byUser[update.user] else { return false }
        return zones.contains { $0.privacy.isPrivate && !$0.keepHistory && $0.covers(lat: update.lat, lon: update.lon, accuracy: update.accuracy) }
    }

    mutating func set(_ zone: ZoneRecord) {
        var zones = byUser[zone.user] ?? []
        if let i = zones.firstIndex(where: { $0.id == zone.id }) { zones[i] = zone } else { zones.append(zone) }
        byUser[zone.user] = zones
    }

    mutating func remove(_ id: UInt64, of user: UInt64) {
        byUser[user]?.removeAll { $0.id == id }
        if byUser[user]?.isEmpty == true { byUser[user] = nil }
    }

    mutating func forget(_ user: UInt64) { byUser[user] = nil }
}
