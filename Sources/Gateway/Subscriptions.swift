import Synchronization
import Wire

/// Which client connections want which user's live events. A subscription lapses unless renewed.
///
/// It also keeps the gateway's event sources filtered to the users connected here: the first
/// connection of a user subscribes `viewer.<id>.` on every source (`TopicFiltering`), the last one
/// leaving (unsubscribed, or lapsed) unsubscribes it. The publishers then send this gateway only
/// the events someone here will receive, instead of every event of the deployment to be dropped
/// on arrival (libzmq filters at the publisher).
final class Subscriptions: Sendable {
    private struct State {
        var byUser: [UInt64: [PeerIdentity: ContinuousClock.Instant]] = [:]
        var sources: [any TopicFiltering] = []

        /// Adds or removes `user`'s topic on every source; under the lock, so that the
        /// subscribe and unsubscribe of one user reach each socket in the order they happened.
        func filter(_ user: UInt64, on: Bool) {
            let topic = ViewerTopic.of(user)
            for source in sources {
                if on { source.subscribe(topic) } else { source.unsubscribe(topic) }
            }
        }

        /// Drops `user`'s lapsed connections. - Returns: the live ones.
        mutating func prune(_ user: UInt64, now: ContinuousClock.Instant) -> [PeerIdentity: ContinuousClock.Instant] {
            guard let peers = byUser[user] else { return [:] }
            let live = peers.filter { $0.value > now }
            if live.count != peers.count { set(user, live) }
            return live
        }

        /// Stores `user`'s connections, filtering the sources when the user arrives or leaves.
        mutating func set(_ user: UInt64, _ peers: [PeerIdentity: ContinuousClock.Instant]) {
            let had = byUser[user] != nil
            byUser[user] = peers.isEmpty ? nil : peers
            if had != !peers.isEmpty { filter(user, on: !peers.isEmpty) }
        }
    }

    private let state = Mutex(State())
    private let ttl: Duration

    init(ttl: Duration) {
        self.ttl = ttl
    }

    /// Filters `source` to the users connected now and from now on.
    func attach(_ source: some TopicFiltering) {
        state.withLock { state in
            state.sources.append(source)
            for user in state.byUser.keys { source.subscribe(ViewerTopic.of(user)) }
        }
    }

    /// Stops filtering `source` (it is closing).
    func detach(_ source: some TopicFiltering) {
        state.withLock { state in state.sources.removeAll { $0 === source } }
    }

    func subscribe(_ peer: PeerIdentity, user: UInt64) {
        let until = ContinuousClock.now.advanced(by: ttl)
        state.withLock { state in
            var peers = state.byUser[user] ?? [:]
            peers[peer] = until
            state.set(user, peers)
        }
    }

    func unsubscribe(_ peer: PeerIdentity, user: UInt64) {
        state.withLock { state in
            guard var peers = state.byUser[user] else { return }
            peers[peer] = nil
            state.set(user, peers)
        }
    }

    /// The live connections of `user` (lapsed ones are dropped on the way).
    func peers(of user: UInt64) -> [PeerIdentity] {
        state.withLock { state in Array(state.prune(user, now: .now).keys) }
    }

    /// Drops every lapsed connection (a client that stopped renewing without unsubscribing):
    /// run now and then, so that a user nobody listens to any more stops being sent here.
    /// - Returns: the users that left.
    @discardableResult
    func sweep(now: ContinuousClock.Instant = .now) -> [UInt64] {
        state.withLock { state in
            var left: [UInt64] = []
            for user in Array(state.byUser.keys) where state.prune(user, now: now).isEmpty { left.append(user) }
            return left
        }
    }

    /// Whether `user` has a connection subscribed (lapsed or not: `peers(of:)` decides).
    func has(_ user: UInt64) -> Bool {
        state.withLock { $0.byUser[user] != nil }
    }

    var count: Int { state.withLock { $0.byUser.values.reduce(0) { $0 + $1.count } } }

    /// Users with a subscription here (each one subscribed on every source).
    var users: Int { state.withLock { $0.byUser.count } }
}
