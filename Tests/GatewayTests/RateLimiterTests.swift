@testable import Gateway
import Testing

/// The gateway's token buckets by key: each take is kept (in place, item 102), keys are counted
/// apart, and a bucket refills with time.
@Suite struct RateLimiterTests {
    @Test func eachKeyHasItsOwnBucket_takesAreKept_andTimeRefillsThem() {
        let limiter = RateLimiter(rate: 2, burst: 3)
        let alice = RateKey.session(userID: 7, sessionID: [1, 2, 3])
        let otherSession = RateKey.session(userID: 7, sessionID: [9])
        let address = RateKey.address("10.0.0.1")
        // The burst, then refused: every take before was counted.
        #expect((0..<4).map { _ in limiter.allow(alice, now: 100) } == [true, true, true, false])
        // Another session of the same user, and an address, have buckets of their own.
        #expect((0..<4).map { _ in limiter.allow(otherSession, now: 100) } == [true, true, true, false])
        #expect(limiter.allow(address, now: 100))
        // Half a second at 2 a second gives one token back, and only one.
        #expect(limiter.allow(alice, now: 100.5))
        #expect(!limiter.allow(alice, now: 100.5))
        // Refills stop at the burst.
        #expect((0..<4).map { _ in limiter.allow(alice, now: 200) } == [true, true, true, false])
    }
}

/// A resolved session keeps its bucket (item 112): the bucket the limiter hands out for a key is
/// the one `allow` takes from, so a take through a cached session counts against the key as any
/// other take does, and the other way round.
@Suite struct SessionBucketTests {
    @Test func aSessionsBucket_isTheLimitersBucketForItsKey() {
        let limiter = RateLimiter(rate: 2, burst: 3)
        let key = RateKey.session(userID: 7, sessionID: [1, 2, 3])
        let bucket = limiter.bucket(for: key, now: 100)
        #expect(limiter.bucket(for: key, now: 100) === bucket)
        #expect(limiter.bucket(for: .session(userID: 7, sessionID: [4]), now: 100) !== bucket)
        #expect(bucket.take(now: 100))
        #expect(limiter.allow(key, now: 100))
        #expect(bucket.take(now: 100))
        // The burst of 3 is spent, whichever way it was taken.
        #expect(!limiter.allow(key, now: 100))
        #expect(!bucket.take(now: 100))
        #expect(bucket.take(now: 100.5))
    }
}
