import Foundation
import FriensoProto

/// How precisely a viewer sees a subject: chosen by the subject per friend (and a default for
/// the other friends); a grant (their own watch or helpNow) and seeing yourself are always exact.
enum Precision: Int, Sendable, Equatable, Comparable {
    case exact = 1, approximate = 2, place = 3, hidden = 4

    init?(_ proto: GeoV1.LocationPrecision) { self.init(rawValue: Int(proto.rawValue)) }
    var proto: GeoV1.LocationPrecision { GeoV1.LocationPrecision(rawValue: Int32(rawValue)) }
    static func < (a: Precision, b: Precision) -> Bool { a.rawValue < b.rawValue }

    /// The side of the grid cells `approximate` snaps to, in degrees of latitude (~1.1 km).
    static let cellDegrees = 0.01

    /// The centre of the ~1 km cell holding (lat, lon): the same for every fix in that cell, so
    /// repeated reads of someone standing still cannot be averaged closer. Cells are 0.01° of
    /// latitude high and as wide in metres (0.01° / cos(latitude of the cell's centre)).
    static func snap(lat: Double, lon: Double) -> (lat: Double, lon: Double) {
        let row = (lat / cellDegrees).rounded(.down)
        let centreLat = min(90, max(-90, (row + 0.5) * cellDegrees))
        let width = min(360, cellDegrees / max(cos(centreLat * .pi / 180), 0.01))
        let column = (lon / width).rounded(.down)
        return (centreLat, min(180, max(-180, (column + 0.5) * width)))
    }

    /// The accuracy an approximate fix reports.
    static let approximateAccuracy = 1_000.0
}

/// Whom each user shows how precisely: subject → viewer (0: the default for friends) → precision.
struct PrecisionSettings: Sendable {
    private var bySubject: [UInt64: [UInt64: Precision]] = [:]

    init(_ loaded: [(subject: UInt64, viewer: UInt64, precision: Precision)] = []) {
        for row in loaded { bySubject[row.subject, default: [:]][row.viewer] = row.precision }
    }

    /// What `subject` chose for `viewer` (a friend): their own setting, else the default, else exact.
    func chosen(by subject: UInt64, for viewer: UInt64) -> Precision {
        guard let settings = bySubject[subject] else { return .exact }
        return settings[viewer] ?? settings[0] ?? .exact
    }

    /// `precision` nil removes the setting.
    mutating func set(subject: UInt64, viewer: UInt64, _ precision: Precision?) {
        bySubject[subject, default: [:]][viewer] = precision
        if bySubject[subject]?.isEmpty == true { bySubject[subject] = nil }
    }

    func all(of subject: UInt64) -> [UInt64: Precision] { bySubject[subject] ?? [:] }

    /// Whether `subject` chose anything (most people never do).
    func hasSettings(_ subject: UInt64) -> Bool { bySubject[subject] != nil }

    /// A deleted account: its settings and everyone's settings about it.
    mutating func forget(_ user: UInt64) {
        bySubject[user] = nil
        for subject in Array(bySubject.keys) { set(subject: subject, viewer: user, nil) }
    }
}

extension LatestFix {
    /// This fix as an `approximate` viewer sees it: the centre of its cell, accuracy at least 1 km.
    var approximate: LatestFix {
        var coarse = self
        (coarse.lat, coarse.lon) = Precision.snap(lat: lat, lon: lon)
        coarse.accuracy = max(accuracy, Precision.approximateAccuracy)
        return coarse
    }
}
