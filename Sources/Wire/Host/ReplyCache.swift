public import FriensoProto
import Synchronization

/// Durable storage for replies to idempotent mutations, so a retry after a restart is not applied
/// twice. Services with a database implement it over their own storage.
public protocol ReplyStore: Sendable {
    func load(_ key: String) async -> Envelope?
    func save(_ key: String, _ reply: Envelope) async
}

/// Remembers the reply to every request that carried an idempotency key, keyed by
/// caller, method and key, and makes a duplicate wait for the first when both are in flight.
/// Recent replies are kept in memory (bounded, oldest evicted first); a `ReplyStore` adds durability.
public final class ReplyCache: Sendable {
    public enum Begin: Sendable {
        /// First sighting here: call `finish` with the reply. `previous` is the reply the durable
        /// store kept from before a restart; use it instead of running the handler again.
        case execute(previous: Envelope?)
        /// A finished reply to replay.
        case replay(Envelope)
        /// The same request is running now: its reply will be given to this waiter too.
        case wait
    }

    private struct State {
        var done: [String: Envelope] = [:]
        var order: [String] = []
        var head = 0
        var running: [String: [UInt64]] = [:] // key -> waiting host request keys
    }

    private let state = Mutex(State())
    private let capacity: Int
    private let store: (any ReplyStore)?

    public init(capacity: Int = 50_000, store: (any ReplyStore)? = nil) {
        self.capacity = capacity
        self.store = store
    }

    /// What identifies "the same request": the caller (and, for anonymous calls, the client's
    /// address), the method, the key, and a digest of the payload. So one client's key can never
    /// replay another client's reply, and a key reused for a different request runs that request.
    public static func key(for envelope: Envelope) -> String {
        let who = envelope.callerUserId != 0 ? "u\(envelope.callerUserId)" : "a\(envelope.clientAddress)"
        return "\(who)|\(envelope.method)|\(envelope.idempotencyKey)|\(String(fnv1a(envelope.payload), radix: 16))"
    }

    /// FNV-1a, 64 bits: stable across processes (Swift's `Hasher` is seeded per run), so the
    /// durable store's keys survive a restart.
    static func fnv1a(_ bytes: [UInt8]) -> UInt64 {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in bytes {
            hash ^= UInt64(byte)
            hash &*= 0x0000_0100_0000_01b3
        }
        return hash
    }

    func begin(_ key: String, waiter: UInt64) async -> Begin {
        let first: Begin = state.withLock { state in
            if let reply = state.done[key] { return .replay(reply) }
            if state.running[key] != nil {
                state.running[key, default: []].append(waiter)
                return .wait
            }
            state.running[key] = []
            return .execute(previous: nil)
        }
        guard case .execute = first, let store else { return first }
        return .execute(previous: await store.load(key))
    }

    /// Records the reply and returns the host keys of duplicates that waited for it.
    /// Replies that say "try again" (UNAVAILABLE, DEADLINE_EXCEEDED, INTERNAL) are not kept.
    func finish(_ key: String, _ reply: Envelope) async -> [UInt64] {
        let keep = ![.unavailable, .deadlineExceeded, .internal].contains(reply.status)
        if keep, let store { await store.save(key, reply) }
        return complete(key, reply, remember: keep)
    }

    private func complete(_ key: String, _ reply: Envelope, remember: Bool) -> [UInt64] {
        state.withLock { state in
            let waiters = state.running.removeValue(forKey: key) ?? []
            guard remember else { return waiters }
            if state.done.updateValue(reply, forKey: key) == nil {
                state.order.append(key)
                if state.order.count - state.head > capacity {
                    state.done[state.order[state.head]] = nil
                    state.head += 1
                    if state.head > capacity {
                        state.order.removeFirst(state.head)
                        state.head = 0
                    }
                }
            }
            return waiters
        }
    }
}
