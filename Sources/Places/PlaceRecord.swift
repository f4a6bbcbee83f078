public import FriensoProto

/// A place (a campus outline, a building, a venue) as geo keeps it in memory, and alerts' copy
/// of them (`PlaceBook`): what names where someone is.
public struct PlaceRecord: Sendable {
    public var id: UInt64
    public var name: String
    public var kind: GeoV1.PlaceKind
    public var lat: Double
    public var lon: Double
    public var radius: Double
    /// Outer ring (lat, lon), closed or not; empty for a point.
    public var ring: [(lat: Double, lon: Double)]

    public init(id: UInt64, name: String, kind: GeoV1.PlaceKind, lat: Double, lon: Double, radius: Double, ring: [(lat: Double, lon: Double)]) {
        self.id = id
        self.name = name
        self.kind = kind
        self.lat = lat
        self.lon = lon
        self.radius = radius
        self.ring = ring
    }

    /// From geo's contract (alerts' copy).
    public init(_ place: GeoV1.Place) {
        self.init(id: place.placeId, name: place.name, kind: place.kind, lat: place.latitude, lon: place.longitude, radius: place.radiusM,
                  ring: zip(place.polygonLat, place.polygonLon).map { (lat: $0, lon: $1) })
    }

    public var proto: GeoV1.Place {
        GeoV1.Place(placeId: id, name: name, kind: kind, latitude: lat, longitude: lon, radiusM: radius,
                    polygonLat: ring.map(\.lat), polygonLon: ring.map(\.lon))
    }

    /// Whether (lat, lon) is inside: in the polygon (even-odd rule on lat/lon, fine at campus
    /// scale), or within the radius of the point.
    @inlinable public func contains(lat: Double, lon: Double) -> Bool {
        if ring.count >= 3 { return PlaceRecord.inside(ring, lat: lat, lon: lon) }
        return GeoMath.distance(lat1: self.lat, lon1: self.lon, lat2: lat, lon2: lon) <= radius
    }

    /// Distance from (lat, lon) to the place: 0 inside, else to the nearest vertex or point.
    @inlinable public func distance(lat: Double, lon: Double) -> Double {
        if ring.count >= 3 {
            if PlaceRecord.inside(ring, lat: lat, lon: lon) { return 0 }
            return ring.map { GeoMath.distance(lat1: lat, lon1: lon, lat2: $0.lat, lon2: $0.lon) }.min() ?? .infinity
        }
        return max(0, GeoMath.distance(lat1: self.lat, lon1: self.lon, lat2: lat, lon2: lon))
    }

    /// How far from the reference point anything inside can be (to bound venue searches).
    @inlinable public var reach: Double {
        ring.isEmpty ? radius : ring.map { GeoMath.distance(lat1: lat, lon1: lon, lat2: $0.lat, lon2: $0.lon) }.max() ?? 0
    }

    @inlinable public static func inside(_ ring: [(lat: Double, lon: Double)], lat: Double, lon: Double) -> Bool {
        var inside = false
        var j = ring.count - 1
        for i in 0..<ring.count {
            let (yi, xi) = ring[i], (yj, xj) = ring[j]
            if (yi > lat) != (yj > lat), lon < (xj - xi) * (lat - yi) / (yj - yi) + xi { inside.toggle() }
            j = i
        }
        return inside
    }
}

extension Collection where Element == PlaceRecord {
    /// The nearest place of `kind` to a point, with its distance. Unspecified: buildings and
    /// venues (a campus outline contains everything on campus). Between places that both contain
    /// the point, the smaller wins.
    public func closest(lat: Double, lon: Double, kind: GeoV1.PlaceKind = .unspecified) -> (PlaceRecord, Double)? {
        var best: (PlaceRecord, Double)?
        for place in self where kind == .unspecified ? place.kind != .campus : place.kind == kind {
            let d = place.distance(lat: lat, lon: lon)
            if let current = best, d > current.1 || (d == current.1 && place.reach >= current.0.reach) { continue }
            best = (place, d)
        }
        return best
    }

    /// The building or venue someone at (lat, lon) is at or near, within `within` metres.
    public func near(lat: Double, lon: Double, within: Double) -> PlaceRecord? {
        guard let (place, distance) = closest(lat: lat, lon: lon), distance <= within else { return nil }
        return place
    }
}
