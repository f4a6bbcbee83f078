import Geo
import ServiceKit

extension GeoConfig {
    /// Only the executable reads the config file: the domain never sees it.
    /// The `geo` section of the deployment config over the defaults.
    init(resolved: ResolvedOptions) {
        self.init()
        let section = resolved.config.geo
        if let v = section?.nearbyDefaultRadiusMetres { nearbyDefaultRadius = v }
        if let v = section?.nearbyMaxRadiusMetres { nearbyMaxRadius = v }
        if let v = section?.historyRetentionDays { historyRetention = .seconds(v * 24 * 3600) }
        if let v = section?.aroundMetres { aroundDistance = v }
        if let v = section?.venueFreshMinutes { venueFreshness = .seconds(v * 60) }
        if let v = section?.venueMinimumPeople { venueMinimumPeople = max(1, v) }
        if let v = section?.auditRetentionDays { auditRetention = .seconds(max(1, v) * 86_400) }
        if let v = section?.checkInHours { checkInLifetime = .seconds(v * 3600) }
        if let v = section?.foldPeriodSeconds, v.isFinite { foldPeriod = .milliseconds(Int64(min(300, max(1, v)) * 1_000)) }
        operatorKey = resolved.environment["FRIENSO_OPERATOR_KEY"] ?? section?.operatorKey ?? ""
    }
}
