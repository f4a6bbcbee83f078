import Synchronization
import Wire

/// Which client connections want which user's live events. A subscription lapses unless renewed.
final class Subscriptions: Sendable {
    private let byUser = Mutex<[UInt64: [PeerIdentity: ContinuousClock.Instant]]>([:])
    private let ttl: Duration

    init(ttl: Duration) {
        self.ttl = ttl
    }

    func subscribe(_ peer: PeerIdentity, user: UInt64) {
        byUser.withLock { $0[user, default: [:]][peer] = .now.advanced(by: ttl) }
    }

    func unsubscribe(_ peer: PeerIdentity, user: UInt64) {
        byUser.withLock { state in
            state[user]?[peer] = nil
            if state[user]?.isEmpty == true { state[user] = nil }
        }
    }

    /// The live connections of `user` (lapsed ones are dropped on the way).
    func peers(of user: UInt64) -> [PeerIdentity] {
        byUser.withLock { state in
            guard let peers = state[user] else { return [] }
            let now = ContinuousClock.now
            let live = peers.filter { $0.value > now }
            state[user] = live.isEmpty ? nil : live
            return Array(live.keys)
        }
    }

    var count: Int { byUser.withLock { $0.values.reduce(0) { $0 + $1.count } } }
}
