import Places
import Synchronization

/// Alerts' copy of geo's places (`PlacesSnapshot`, loaded again after each import geo announces
/// and every minute), so that a helpNow raised with the phone's own fix is named (the building
/// or venue there) without asking geo. Until it has loaded, geo names the fix.
final class PlaceBook: Sendable {
    private struct Loaded {
        var places: [PlaceRecord]
        /// How near a building or venue must be to name it (geo's "around" distance).
        var within: Double
    }
    private let loaded = Mutex<Loaded?>(nil)

    /// The place at or near (lat, lon), "" when none; nil: not loaded, ask geo.
    func name(lat: Double, lon: Double) -> String? {
        loaded.withLock { book in book.map { $0.places.near(lat: lat, lon: lon, within: $0.within)?.name ?? "" } }
    }

    func replace(_ places: [PlaceRecord], within: Double) {
        loaded.withLock { $0 = Loaded(places: places, within: within) }
    }

    var count: Int? { loaded.withLock { $0?.places.count } }
}
