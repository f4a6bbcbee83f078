import Foundation
import FriensoProto
import SwiftCSV

/// Parses operator imports. Every feature or row is checked on its own; bad ones are reported
/// and skipped, good ones imported.
enum PlaceImport {
    static let maxBytes = 3 << 20

    struct Parsed {
        var places: [PlaceRecord] = []
        var problems: [String] = []
    }

    static func kind(_ text: String) -> GeoV1.PlaceKind? {
        switch text.lowercased().trimmingCharacters(in: .whitespaces) {
        case "building": .building
        case "venue": .venue
        case "campus": .campus
        default: nil
        }
    }

    static func validName(_ raw: String) -> String? {
        let name = raw.trimmingCharacters(in: .whitespacesAndNewlines)
        return (1...80).contains(name.count) ? name : nil
    }

    static func csv(_ text: String) -> Parsed {
        var result = Parsed()
        let table: CSV<Named>
        do { table = try CSV<Named>(string: text, delimiter: .comma) } catch {
            result.problems.append("not CSV: \(error)")
            return result
        }
        for required in ["name", "kind", "lat", "lon"] where !table.header.contains(required) {
            result.problems.append("header: missing column \"\(required)\" (name,kind,lat,lon,radius_m)")
            return result
        }
        for (i, row) in table.rows.enumerated() {
            let line = "row \(i + 2)"
            guard let name = validName(row["name"] ?? "") else { result.problems.append("\(line): name must be 1-80 characters"); continue }
            guard let kind = kind(row["kind"] ?? "") else { result.problems.append("\(line): kind must be building, venue or campus"); continue }
            guard let lat = Double(row["lat"] ?? ""), let lon = Double(row["lon"] ?? ""), GeoMath.isValid(latitude: lat, longitude: lon) else {
                result.problems.append("\(line): lat/lon out of range"); continue
            }
            let radius = Double(row["radius_m"] ?? "") ?? 50
            guard radius.isFinite, (1...5_000).contains(radius) else { result.problems.append("\(line): radius_m must be 1-5000"); continue }
            result.places.append(PlaceRecord(id: 0, name: name, kind: kind, lat: lat, lon: lon, radius: radius, ring: []))
        }
        return result
    }

    static func geoJSON(_ data: [UInt8]) -> Parsed {
        var result = Parsed()
        guard let root = try? JSONSerialization.jsonObject(with: Data(data)) as? [String: Any],
              root["type"] as? String == "FeatureCollection", let features = root["features"] as? [[String: Any]] else {
            result.problems.append("not a GeoJSON FeatureCollection")
            return result
        }
        for (i, feature) in features.enumerated() {
            let properties = feature["properties"] as? [String: Any] ?? [:]
            let label = "feature \(i)"
            guard let name = validName(properties["name"] as? String ?? "") else { result.problems.append("\(label): properties.name must be 1-80 characters"); continue }
            guard let kind = kind(properties["kind"] as? String ?? "") else { result.problems.append("\(label) (\(name)): properties.kind must be building, venue or campus"); continue }
            let radius = (properties["radius_m"] as? Double) ?? 50
            guard let geometry = feature["geometry"] as? [String: Any], let type = geometry["type"] as? String else {
                result.problems.append("\(label) (\(name)): no geometry"); continue
            }
            switch type {
            case "Point":
                guard let c = geometry["coordinates"] as? [Double], c.count >= 2, GeoMath.isValid(latitude: c[1], longitude: c[0]) else {
                    result.problems.append("\(label) (\(name)): Point needs [lon, lat] in range"); continue
                }
                guard radius.isFinite, (1...5_000).contains(radius) else { result.problems.append("\(label) (\(name)): radius_m must be 1-5000"); continue }
                result.places.append(PlaceRecord(id: 0, name: name, kind: kind, lat: c[1], lon: c[0], radius: radius, ring: []))
            case "Polygon":
                guard let rings = geometry["coordinates"] as? [[[Double]]], let outer = rings.first, outer.count >= 4,
                      outer.allSatisfy({ $0.count >= 2 && GeoMath.isValid(latitude: $0[1], longitude: $0[0]) }) else {
                    result.problems.append("\(label) (\(name)): Polygon needs an outer ring of at least 4 [lon, lat] positions in range"); continue
                }
                var ring = outer.map { (lat: $0[1], lon: $0[0]) }
                if ring.first! == ring.last! { ring.removeLast() }
                let lat = ring.map(\.lat).reduce(0, +) / Double(ring.count), lon = ring.map(\.lon).reduce(0, +) / Double(ring.count)
                result.places.append(PlaceRecord(id: 0, name: name, kind: kind, lat: lat, lon: lon, radius: 0, ring: ring))
            default:
                result.problems.append("\(label) (\(name)): geometry \(type) is not supported (Point or Polygon)")
            }
        }
        return result
    }
}
