/// Slows down password guessing: after `maxFailures` failed logins within `window`, further
/// attempts for the same key are refused for a lockout that doubles with every further failure,
/// up to `maxLockout`. A pure value: the caller passes the time in.
public struct LoginThrottle: Sendable {
    public struct Policy: Sendable {
        public var maxFailures: Int
        public var window: Double
        public var baseLockout: Double
        public var maxLockout: Double

        public init(maxFailures: Int, window: Double = 900, baseLockout: Double = 30, maxLockout: Double = 3_600) {
            self.maxFailures = maxFailures
            self.window = window
            self.baseLockout = baseLockout
            self.maxLockout = maxLockout
        }
    }

    private struct Entry {
        var failures: [Double] = []
        var lockedUntil: Double = 0
    }

    public let policy: Policy
    private var entries: [String: Entry] = [:]

    public init(policy: Policy) {
        self.policy = policy
    }

    /// - Returns: the seconds until `key` may try again, or nil when it may try now.
    public func retryAfter(_ key: String, now: Double) -> Double? {
        guard let entry = entries[key], entry.lockedUntil > now else { return nil }
        return entry.lockedUntil - now
    }

    public mutating func recordFailure(_ key: String, now: Double) {
        var entry = entries[key] ?? Entry()
        entry.failures = entry.failures.filter { now - $0 < policy.window } + [now]
        let excess = entry.failures.count - policy.maxFailures
        if excess >= 0 {
            entry.lockedUntil = now + min(policy.maxLockout, policy.baseLockout * Double(1 << min(excess, 20)))
        }
        entries[key] = entry
        if entries.count > 100_000 { prune(now: now) }
    }

    /// Whether `key` has failures or a lock on record.
    public func isTracking(_ key: String) -> Bool { entries[key] != nil }

    public mutating func recordSuccess(_ key: String) {
        entries[key] = nil
    }

    private mutating func prune(now: Double) {
        entries = entries.filter { $0.value.lockedUntil > now || $0.value.failures.contains { now - $0 < policy.window } }
    }
}
