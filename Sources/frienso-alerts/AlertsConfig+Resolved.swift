import Alerts
import ServiceKit

extension AlertsConfig {
    /// Only the executable reads the config file: the domain never sees it.
    /// The `alerts` section of the deployment config over the defaults.
    init(resolved: ResolvedOptions) {
        self.init()
        let section = resolved.config.alerts
        if let v = section?.minWatchSeconds { minWatch = .seconds(v) }
        if let v = section?.maxWatchSeconds { maxWatch = .seconds(v) }
        if let v = section?.minTimerSeconds { minTimer = .seconds(v) }
        if let v = section?.maxTimerSeconds { maxTimer = .seconds(v) }
        if let v = section?.timerWarningSeconds { timerWarning = .seconds(max(0, v)) }
        if let v = section?.helpEscalationMinutes { helpEscalation = .milliseconds(Int64(max(0, v) * 60_000)) }
        if let v = section?.emergencyNumber { emergencyNumber = v }
        if let v = section?.campusPoliceNumber { campusPoliceNumber = v }
        if let v = section?.campusPoliceLabel { campusPoliceLabel = v }
        if let v = section?.deliveryMaxAttempts { retry.maxAttempts = max(1, v) }
        if let v = section?.inviteLink { inviteLink = v }
        if let v = section?.outboxRetentionDays { outboxRetention = .seconds(max(1, v) * 86_400) }
        if let v = section?.deliveryClaimSeconds { deliveryClaim = .seconds(max(10, v)) }
        operatorKey = resolved.environment["FRIENSO_OPERATOR_KEY"] ?? section?.operatorKey ?? ""
    }
}
