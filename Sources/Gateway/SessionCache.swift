import Synchronization
import Wire

/// What a session token resolved to.
struct ResolvedSession: Sendable {
    var userID: UInt64
    var sessionID: [UInt8]
    var expiresAtMs: Int64
    /// The session's rate-limit bucket (`RateLimiter.bucket(for:now:)`), found once when the
    /// token is resolved and kept with it in the session cache: a request with a cached
    /// session takes its token without looking the session up again (item 112).
    var bucket: RateBucket?
}

/// Session tokens resolved recently, trusted for a short TTL. Logout and password changes
/// that pass through the gateway invalidate entries at once; the TTL bounds what other paths leave.
final class SessionCache: Sendable {
    /// `until` a `Moment` (one `Int64`), not a `ContinuousClock.Instant`, whose resilient
    /// comparisons and clock reading cost about 150 instructions of every request with a
    /// session (item 111; the reactors' clock since item 109).
    private struct Entry {
        var session: ResolvedSession
        var until: Moment
    }

    private let entries = Mutex<[String: Entry]>([:])
    private let ttl: Duration
    private let capacity: Int

    init(ttl: Duration, capacity: Int = 100_000) {
        self.ttl = ttl
        self.capacity = capacity
    }

    func get(_ token: String, nowMs: Int64) -> ResolvedSession? {
        entries.withLock { entries in
            guard let entry = entries[token] else { return nil }
            guard entry.until > Moment.now, entry.session.expiresAtMs > nowMs else {
                entries[token] = nil
                return nil
            }
            return entry.session
        }
    }

    func put(_ token: String, _ session: ResolvedSession) {
        entries.withLock { entries in
            if entries.count >= capacity {
                let now = Moment.now
                entries = entries.filter { $0.value.until > now }
                if entries.count >= capacity { entries.removeAll() }
            }
            entries[token] = Entry(session: session, until: Moment.now.advanced(by: ttl))
        }
    }

    func invalidate(token: String) {
        _ = entries.withLock { $0.removeValue(forKey: token) }
    }

    func invalidate(userID: UInt64) {
        entries.withLock { $0 = $0.filter { $0.value.session.userID != userID } }
    }

    /// Forgets everything (a revocation may have been missed).
    func invalidateAll() {
        entries.withLock { $0.removeAll() }
    }

    var count: Int { entries.withLock { $0.count } }
}

/// Token buckets by key (session, or client address before login).
/// Whose requests a bucket counts: a session's, or an address's when there is none. A value,
/// not a string: formatting the session id into a key cost the gateway ~7% of its CPU.
enum RateKey: Hashable, Sendable {
    case session(userID: UInt64, sessionID: [UInt8])
    case address(String)
}

final class RateLimiter: Sendable {
    private let buckets = Mutex<[RateKey: RateBucket]>([:])
    private let rate: Double
    private let burst: Double

    init(rate: Double, burst: Double) {
        self.rate = rate
        self.burst = burst
    }

    /// The time the buckets are given: seconds on the reactors' monotonic clock. A bucket
    /// refills by elapsed time, which the wall clock (`Date`, also about 100 instructions a
    /// request through Foundation) can step.
    static var now: Double { Double(Moment.now.nanoseconds) / 1_000_000_000 }

    /// `key`'s bucket, made full the first time. The same object until the key is forgotten
    /// (when more than 100,000 keys are kept, the full ones: forgetting a full bucket changes
    /// nothing a new one would not give).
    func bucket(for key: RateKey, now: Double) -> RateBucket {
        buckets.withLock { buckets in
            if buckets.count > 100_000 { buckets = buckets.filter { !$0.value.isFull(now: now) } }
            if let bucket = buckets[key] { return bucket }
            let bucket = RateBucket(TokenBucket(rate: rate, burst: burst, now: now))
            buckets[key] = bucket
            return bucket
        }
    }

    /// Takes a token from `key`'s bucket. - Returns: false when the caller must wait.
    func allow(_ key: RateKey, now: Double) -> Bool {
        bucket(for: key, now: now).take(now: now)
    }
}

/// One key's token bucket, shared by the limiter's table and a cached session that holds it: a
/// class, so that a take through either is the same take.
final class RateBucket: Sendable {
    private let bucket: Mutex<TokenBucket>

    init(_ bucket: TokenBucket) {
        self.bucket = Mutex(bucket)
    }

    func take(now: Double) -> Bool {
        bucket.withLock { $0.take(now: now) }
    }

    func isFull(now: Double) -> Bool {
        bucket.withLock { $0.isFull(now: now) }
    }
}
