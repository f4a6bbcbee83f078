/// A token bucket: `rate` tokens a second, at most `burst` saved up. A pure value: the caller
/// passes the time in, in seconds.
public struct TokenBucket: Sendable {
    public let rate: Double
    public let burst: Double
    private var tokens: Double
    private var updated: Double

    public init(rate: Double, burst: Double, now: Double) {
        self.rate = rate
        self.burst = burst
        tokens = burst
        updated = now
    }

    /// Takes a token if there is one. - Returns: false when the caller must wait.
    public mutating func take(now: Double) -> Bool {
        tokens = min(burst, tokens + max(0, now - updated) * rate)
        updated = now
        guard tokens >= 1 else { return false }
        tokens -= 1
        return true
    }

    /// Whether the bucket is full again (an idle key that can be forgotten).
    public func isFull(now: Double) -> Bool {
        tokens + max(0, now - updated) * rate >= burst
    }
}
