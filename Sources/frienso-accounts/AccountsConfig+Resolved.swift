import Accounts
import ServiceKit

extension AccountsConfig {
    /// The `accounts` section of the deployment config over the defaults (only executables read
    /// the config file: the domain never sees it).
    init(resolved: ResolvedOptions) {
        self.init()
        let section = resolved.config.accounts
        if let ttl = section?.sessionTTLSeconds { sessionTTL = Double(ttl) }
        if let n = section?.maxFailedLoginsPerAccount { loginPolicy.account.maxFailures = n }
        if let n = section?.maxFailedLoginsPerClient { loginPolicy.client.maxFailures = n }
        if let n = section?.maxAccountsFailedPerClient { loginPolicy.spraying.maxFailures = n }
        if let seconds = section?.failedLoginWindowSeconds {
            loginPolicy.account.window = seconds
            loginPolicy.client.window = seconds
        }
        if let seconds = section?.sprayWindowSeconds { loginPolicy.spraying.window = seconds }
        if let seconds = section?.erasureRecheckSeconds { erasureRecheck = .milliseconds(Int64(seconds * 1000)) }
        if let days = section?.emailRetentionDays { emailRetention = .seconds(max(1, days) * 86_400) }
        if let seconds = section?.lockoutSeconds {
            loginPolicy.account.baseLockout = seconds
            loginPolicy.client.baseLockout = seconds
        }
        if let seconds = section?.maxLockoutSeconds {
            loginPolicy.account.maxLockout = seconds
            loginPolicy.client.maxLockout = seconds
        }
    }
}
