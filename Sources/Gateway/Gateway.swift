import Foundation
import FriensoProto
public import Logging
public import ServiceLifecycle
public import Wire

/// The one endpoint clients reach: authenticates, enforces the allow-list and rate limits,
/// forwards to the services with many requests in flight, and relays live events to clients.
public final class Gateway: Service, Sendable {
    public let config: GatewayConfig
    private let host: ServiceHost
    private let clients: [String: WireClient]
    private let subscriptions: Subscriptions
    private let sessions: SessionCache
    private let logger: Logger
    private let context: ZMQContext

    /// - Parameters:
    ///   - clientOptions: deadlines, heartbeats and caps of the clients to the services; their
    ///     security always comes from `config.keyring` (`GatewayConfig.security(toward:)`).
    ///   - reactor: the event loop for the client socket and for the clients to the
    ///     services; sharing one means forwarding a request crosses no thread.
    public init(config: GatewayConfig, logger: Logger, clientOptions: ClientOptions = ClientOptions(),
                context: ZMQContext = .shared, reactor: Reactor = .shared) {
        self.config = config
        self.logger = logger
        self.context = context
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
        let handler = GatewayHandler(
            config: config, clients: clients, sessions: sessions,
            limiter: RateLimiter(rate: config.requestsPerSecond, burst: config.burst),
            subscriptions: subscriptions, nowMs: { WallClock.milliseconds() })
        var options = HostOptions(name: "gateway", endpoint: config.endpoint)
        options.maxMessageSize = config.maxMessageSize
        options.security = config.curveSecretKey.map { .curve(secretKey: $0, admission: .anyClient) } ?? .plaintext
        // No reply cache here: a client's envelope carries no caller, so keys would be shared
        // across clients; each service keeps replies by the caller the gateway stamps.
        host = ServiceHost(options: options, handler: handler, logger: logger, replyCache: nil, context: context, reactor: reactor)
    }

    public func boundEndpoint() async throws(ZMQError) -> String {
        try await host.boundEndpoint()
    }

    public var counters: HostCounters { host.counters }

    /// Connections subscribed to live events.
    public var subscriptionCount: Int { subscriptions.count }

    /// Sessions resolved and cached now.
    public var cachedSessions: Int { sessions.count }

    public func run() async throws {
        try await withThrowingDiscardingTaskGroup { group in
            for (name, endpoint) in config.eventSources where !endpoint.isEmpty {
                group.addTask { await self.relay(from: name, endpoint: endpoint) }
            }
            if let endpoint = config.sessionEvents, !endpoint.isEmpty {
                group.addTask { await self.followRevocations(endpoint: endpoint) }
            }
            group.addTask { await self.sweepSubscriptions() }
            try await host.run()
            group.cancelAll()
        }
        for client in clients.values { await client.close() }
    }

    /// Drops a user's cached sessions when accounts revokes one (a logout or a password change
    /// through any gateway), and every cached session when revocations may have been missed (a
    /// gap in the numbering, or accounts restarted: a new epoch).
    private func followRevocations(endpoint: String) async {
        guard let security = config.security(toward: "accounts") else { return }
        let subscriber = Subscriber(endpoint: endpoint, prefixes: ["sessions"], logger: logger.with("source", "accounts"),
                                    security: security, context: context, reactor: host.reactor)
        var tracker = SequenceTracker()
        await withTaskCancellationHandler {
            for await event in subscriber.events {
                if tracker.check(event.envelope, stream: "sessions") != .apply {
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

    /// Forwards `viewer.<id>.` events from one publisher to that user's connections. The socket
    /// subscribes the topics of the users connected here only (`Subscriptions.attach`).
    private func relay(from name: String, endpoint: String) async {
        guard let security = config.security(toward: name) else { return }
        let subscriptions = subscriptions
        let subscriber = Subscriber(endpoint: endpoint, prefixes: [], logger: logger.with("source", name),
                                    security: security, context: context, reactor: host.reactor) { topic in
            // A connection may lapse between the unsubscribe and the publisher hearing of it.
            ViewerTopic.user(in: topic).map { subscriptions.has($0) } ?? false
        }
        subscriptions.attach(subscriber)
        await withTaskCancellationHandler {
            for await event in subscriber.events {
                guard let user = ViewerTopic.user(in: event.topic.utf8) else { continue }
                for peer in subscriptions.peers(of: user) {
                    host.push(event.envelope, to: peer)
                }
            }
        } onCancel: {
            subscriber.stop()
        }
        subscriptions.detach(subscriber)
    }

    /// Drops lapsed subscriptions now and then, so that the publishers stop sending this gateway
    /// the events of users whose clients went away without unsubscribing.
    private func sweepSubscriptions() async {
        let period = max(.milliseconds(100), config.subscriptionTTL / 2)
        while (try? await Task.sleep(for: period)) != nil {
            subscriptions.sweep()
        }
    }

    /// Users whose events the publishers send this gateway (each one subscribed on every source).
    public var filteredUsers: Int { subscriptions.users }
}

extension Logger {
    func with(_ key: String, _ value: String) -> Logger {
        var copy = self
        copy[metadataKey: key] = "\(value)"
        return copy
    }
}
