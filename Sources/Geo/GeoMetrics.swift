import CoreMetrics

extension GeoService {
    /// Records the in-memory state's size when the metrics are rendered (a hook the executable
    /// registers): `frienso_geo_index_users` (people in the spatial index) and
    /// `frienso_geo_latest_fixes` (people with a latest fix in memory).
    public func recordIndexMetrics() {
        let (indexed, latest) = state.mutex.withLock { ($0.index.count, $0.latest.count) }
        Gauge(label: "frienso_geo_index_users").record(indexed)
        Gauge(label: "frienso_geo_latest_fixes").record(latest)
    }
}
