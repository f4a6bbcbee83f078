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

    /// Whether `user` has a connection subscribed (lapsed or not: `peers(of:)` decides).
    func has(_ user: UInt64) -> Bool {
        byUser.withLock { $0[user] != nil }
    }

    private static let viewerPrefix = Array("viewer.".utf8)

    /// The user a `viewer.<id>` topic is for, read from its bytes; nil for any other topic.
    static func viewer(inTopic topic: [UInt8]) -> UInt64? {
        let prefix = viewerPrefix
        guard topic.count > prefix.count, topic.count <= prefix.count + 20, topic.starts(with: prefix) else { return nil }
        var id: UInt64 = 0
        for byte in topic[prefix.count...] {
            guard (48...57).contains(byte) else { return nil }
            let (shifted, o1) = id.multipliedReportingOverflow(by: 10)
            let (sum, o2) = shifted.addingReportingOverflow(UInt64(byte - 48))
            guard !o1, !o2 else { return nil }
            id = sum
        }
        return id
    }

    var count: Int { byUser.withLock { $0.values.reduce(0) { $0 + $1.count } } }
}
