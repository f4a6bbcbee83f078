@testable import Gateway
import Testing

/// The gateway's cache of resolved session tokens: a token is its key whole (item 113 of
/// `docs/benchmarks.md` measured a key hashed by its last eight bytes alone, and dropped it).
@Suite struct SessionCacheTests {
    /// A token that ends as a cached one does, at the same length, is not that token's session.
    @Test func aTokenEndingLikeACachedOne_isNotItsSession() {
        let cache = SessionCache(ttl: .seconds(60))
        let alice = "fs1_" + String(repeating: "a", count: 35) + "SameTail"
        let mallory = "fs1_" + String(repeating: "m", count: 35) + "SameTail"
        #expect(alice.utf8.count == mallory.utf8.count)
        cache.put(alice, ResolvedSession(userID: 1, sessionID: [1], expiresAtMs: .max))
        #expect(cache.get(alice, nowMs: 0)?.userID == 1)
        #expect(cache.get(mallory, nowMs: 0) == nil)
        cache.put(mallory, ResolvedSession(userID: 2, sessionID: [2], expiresAtMs: .max))
        #expect(cache.get(alice, nowMs: 0)?.userID == 1)
        #expect(cache.get(mallory, nowMs: 0)?.userID == 2)
        // Forgetting one leaves the other.
        cache.invalidate(token: mallory)
        #expect(cache.get(mallory, nowMs: 0) == nil)
        #expect(cache.get(alice, nowMs: 0)?.userID == 1)
        #expect(cache.count == 1)
    }

    /// Tokens shorter than eight bytes, the empty one, a prefix and an extension of a cached
    /// token are keys of their own; a session past its expiry is not given and is forgotten.
    @Test func shortTokensPrefixesAndExpiredSessions() {
        let cache = SessionCache(ttl: .seconds(60))
        for (index, token) in ["", "a", "abc", "abcdefg", "abcdefgh", "abcdefghi"].enumerated() {
            cache.put(token, ResolvedSession(userID: UInt64(index + 1), sessionID: [], expiresAtMs: .max))
        }
        for (index, token) in ["", "a", "abc", "abcdefg", "abcdefgh", "abcdefghi"].enumerated() {
            #expect(cache.get(token, nowMs: 0)?.userID == UInt64(index + 1), "\(token)")
        }
        #expect(cache.get("ab", nowMs: 0) == nil)
        #expect(cache.get("xabcdefgh", nowMs: 0) == nil)
        cache.put("expiring", ResolvedSession(userID: 9, sessionID: [], expiresAtMs: 1_000))
        #expect(cache.get("expiring", nowMs: 999)?.userID == 9)
        #expect(cache.get("expiring", nowMs: 1_000) == nil)
        #expect(cache.get("expiring", nowMs: 0) == nil)
    }
}
