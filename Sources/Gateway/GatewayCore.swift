import Foundation
public import FriensoProto
public import Logging
import Synchronization
public import Wire

/// What every front door of the deployment shares: the clients to the services, the session
/// cache, the rate limiter, the allow-list and the live-event subscriptions, with one set of rules
/// (`GatewayHandler`). The ZeroMQ gateway puts a ROUTER socket in front of it; the HTTP edge
/// (`frienso-edge`) puts HTTP/JSON and WebSocket in front of it. Neither has rules of its own.
public final class GatewayCore: Sendable {
    public let config: GatewayConfig
    let clients: [String: WireClient]
    let subscriptions: Subscriptions
    let sessions: SessionCache
    let handler: GatewayHandler
    private let logger: Logger
    private let context: ZMQContext
    private let reactor: Reactor

    /// - Parameters:
    ///   - clientOptions: deadlines, heartbeats and caps of the clients to the services; their
    ///     security always comes from `config.keyring` (`GatewayConfig.security(toward:)`).
    public init(config: GatewayConfig, logger: Logger, clientOptions: ClientOptions = ClientOptions(),
                context: ZMQContext = .shared, reactor: Reactor = .shared) {
        self.config = config
        self.logger = logger
        self.context = context
        self.reactor = reactor
        var clients: [String: WireClient] = [:]
        // Only services with a contract can be called; the others are not built yet.
        let contracted = Set(ProtoIndex.methods.map(\.service))
        for (name, endpoint) in config.services where !endpoint.isEmpty && contracted.contains(name) {
            guard let security = config.security(toward: name) else { continue }
            var options = clientOptions
            options.security = security
            clients[name] = WireClient(endpoint: endpoint, options: options, logger: logger.with("peer", name),
                                       context: context, reactor: reactor)
        }
        self.clients = clients
        subscriptions = Subscriptions(ttl: config.subscriptionTTL)
        sessions = SessionCache(ttl: config.sessionCacheTTL)
        handler = GatewayHandler(
            config: config, clients: clients, sessions: sessions,
            limiter: RateLimiter(rate: config.requestsPerSecond, burst: config.burst),
            subscriptions: subscriptions, nowMs: { WallClock.milliseconds() })
    }

    /// Connections subscribed to live events.
    public var subscriptionCount: Int { subscriptions.count }

    /// Sessions resolved and cached now.
    public var cachedSessions: Int { sessions.count }

    /// Users whose events the publishers send here (each one subscribed on every source).
    public var filteredUsers: Int { subscriptions.users }

    /// A client's request, by the gateway's rules: the method allowed, the session resolved, the
    /// rate limit charged, forwarded to its service with the caller stamped; the reply as the
    /// client gets it (errors as a status and message, never thrown).
    public func handle(_ request: IncomingRequest, logger: Logger) async -> Envelope {
        await handler.handle(request, logger: logger)
    }

    /// The user a session token names, checked as every request's is (cached, else accounts).
    /// - Throws: `RPCError` UNAUTHENTICATED for an unknown, expired or revoked session.
    public func authenticate(_ token: String, budget: Duration = .seconds(2)) async throws(RPCError) -> UInt64 {
        try await handler.resolve(token, budget: budget).userID
    }

    /// `peer` receives `user`'s live events until `unsubscribe` or `config.subscriptionTTL`
    /// without a renewal (call again to renew).
    public func subscribe(_ peer: PeerIdentity, user: UInt64) {
        subscriptions.subscribe(peer, user: user)
    }

    public func unsubscribe(_ peer: PeerIdentity, user: UInt64) {
        subscriptions.unsubscribe(peer, user: user)
    }

    /// Relays live events until cancelled: each `viewer.<id>.` event from every source is handed
    /// to `deliver` with its user and that user's live connections (the topics subscribed are
    /// those of the users connected here only). Also follows accounts' session revocations and
    /// sweeps lapsed subscriptions.
    public func run(deliver: @escaping @Sendable (_ user: UInt64, _ event: Envelope, _ peers: [PeerIdentity]) -> Void) async {
        await withDiscardingTaskGroup { group in
            for (name, endpoint) in config.eventSources where !endpoint.isEmpty {
                group.addTask { await self.relay(from: name, endpoint: endpoint, deliver: deliver) }
            }
            if let endpoint = config.sessionEvents, !endpoint.isEmpty {
                group.addTask { await self.followRevocations(endpoint: endpoint) }
            }
            group.addTask { await self.sweepSubscriptions() }
        }
    }

    /// Closes the clients to the services.
    public func close() async {
        for client in clients.values { await client.close() }
    }

    /// Drops a user's cached sessions when accounts revokes one (a logout or a password change
    /// through any front door), and every cached session when revocations may have been missed (a
    /// gap in the numbering, or accounts restarted: a new epoch).
    private func followRevocations(endpoint: String) async {
        guard let security = config.security(toward: "accounts") else { return }
        let subscriber = Subscriber(endpoint: endpoint, prefixes: ["sessions"], logger: logger.with("source", "accounts"),
                                    security: security, context: context, reactor: reactor)
        var tracker = SequenceTracker()
        await withTaskCancellationHandler {
            for await event in subscriber.events {
                switch tracker.check(event.envelope, stream: "sessions") {
                case .apply:
                    break
                case .stale:
                    continue // another instance of accounts relayed it first
                case .resync:
                    // The first event after (re)connecting, or after a gap: whatever was missed is
                    // covered by forgetting everything; follow the numbering from here.
                    sessions.invalidateAll()
                    tracker.reset(epoch: event.envelope.epoch, stream: "sessions", sequence: event.envelope.sequence)
                    continue
                }
                if let revoked = try? AccountsV1.SessionsRevoked(serializedBytes: event.envelope.payload) {
                    sessions.invalidate(userID: revoked.userId)
                }
            }
        } onCancel: {
            subscriber.stop()
        }
    }

    /// Forwards `viewer.<id>.` events from one publisher. The socket subscribes the topics of
    /// the users connected here only (`Subscriptions.attach`).
    private func relay(from name: String, endpoint: String,
                       deliver: @escaping @Sendable (UInt64, Envelope, [PeerIdentity]) -> Void) async {
        guard let security = config.security(toward: name) else { return }
        let subscriptions = subscriptions
        let subscriber = Subscriber(endpoint: endpoint, prefixes: [], logger: logger.with("source", name),
                                    security: security, context: context, reactor: reactor) { topic in
            // A connection may lapse between the unsubscribe and the publisher hearing of it.
            ViewerTopic.user(in: topic).map { subscriptions.has($0) } ?? false
        }
        subscriptions.attach(subscriber)
        await withTaskCancellationHandler {
            for await event in subscriber.events {
                guard let user = ViewerTopic.user(in: event.topic.utf8) else { continue }
                let peers = subscriptions.peers(of: user)
                if !peers.isEmpty { deliver(user, event.envelope, peers) }
            }
        } onCancel: {
            subscriber.stop()
        }
        subscriptions.detach(subscriber)
    }

    /// Drops lapsed subscriptions now and then, so that the publishers stop sending here the
    /// events of users whose clients went away without unsubscribing.
    private func sweepSubscriptions() async {
        let period = max(.milliseconds(100), config.subscriptionTTL / 2)
        while (try? await Task.sleep(for: period)) != nil {
            subscriptions.sweep()
        }
    }
}
