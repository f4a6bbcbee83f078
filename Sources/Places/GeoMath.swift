public import Glibc

/// Distances and bearings on a sphere of the Earth's mean radius (haversine): within 0.5% of the
/// ellipsoid everywhere, which is far below the accuracy of a phone's fix.
public enum GeoMath {
    public static let earthRadius = 6_371_008.8
    public static let metresPerDegree = earthRadius * .pi / 180

    @inlinable @inline(__always) public static func radians(_ degrees: Double) -> Double { degrees * .pi / 180 }

    /// The haversine term `h` (0...1) of two points: monotonic in their distance, so comparisons
    /// need no `asin`.
    @inlinable @inline(__always)
    public static func haversineTerm(lat1: Double, lon1: Double, cosLat1: Double, lat2: Double, lon2: Double) -> Double {
        let dLat = radians(lat2 - lat1), dLon = radians(lon2 - lon1)
        let a = sin(dLat / 2), b = sin(dLon / 2)
        return min(1, a * a + cosLat1 * cos(radians(lat2)) * b * b)
    }

    @inlinable @inline(__always) public static func distance(fromTerm h: Double) -> Double { 2 * earthRadius * asin(min(1, h.squareRoot())) }
    @inlinable @inline(__always) public static func term(forDistance d: Double) -> Double {
        guard d < .pi * earthRadius else { return 1 }
        let s = sin(d / (2 * earthRadius))
        return s * s
    }

    /// Great-circle distance in metres.
    @inlinable public static func distance(lat1: Double, lon1: Double, lat2: Double, lon2: Double) -> Double {
        distance(fromTerm: haversineTerm(lat1: lat1, lon1: lon1, cosLat1: cos(radians(lat1)), lat2: lat2, lon2: lon2))
    }

    /// Initial great-circle bearing from point 1 to point 2, degrees clockwise from north (0..<360).
    @inlinable public static func bearing(lat1: Double, lon1: Double, lat2: Double, lon2: Double) -> Double {
        let φ1 = radians(lat1), φ2 = radians(lat2), Δλ = radians(lon2 - lon1)
        let y = sin(Δλ) * cos(φ2)
        let x = cos(φ1) * sin(φ2) - sin(φ1) * cos(φ2) * cos(Δλ)
        let degrees = atan2(y, x) * 180 / .pi
        return (degrees + 360).truncatingRemainder(dividingBy: 360)
    }

    @inlinable public static func isValid(latitude: Double, longitude: Double) -> Bool {
        latitude.isFinite && longitude.isFinite && (-90...90).contains(latitude) && (-180...180).contains(longitude)
    }
}
