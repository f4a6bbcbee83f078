import Foundation
import FriensoProto
public import Logging
public import ServiceLifecycle
public import Wire

/// The one ZeroMQ endpoint clients reach: a `GatewayCore` (authentication, allow-list, rate
/// limits, forwarding, live events) behind a ROUTER socket.
public final class Gateway: Service, Sendable {
    public let core: GatewayCore
    private let host: ServiceHost

    /// - Parameters:
    ///   - clientOptions: deadlines, heartbeats and caps of the clients to the services; their
    ///     security always comes from `config.keyring` (`GatewayConfig.security(toward:)`).
    ///   - reactor: the event loop for the client socket and for the clients to the
    ///     services; sharing one means forwarding a request crosses no thread.
    public init(config: GatewayConfig, logger: Logger, clientOptions: ClientOptions = ClientOptions(),
                context: ZMQContext = .shared, reactor: Reactor = .shared) {
        core = GatewayCore(config: config, logger: logger, clientOptions: clientOptions, context: context, reactor: reactor)
        var options = HostOptions(name: "gateway", endpoint: config.endpoint)
        options.maxMessageSize = config.maxMessageSize
        options.security = config.curveSecretKey.map { .curve(secretKey: $0, admission: .anyClient) } ?? .plaintext
        options.metrics = config.metrics
        // The per-address rate limit and the forwarded envelope's client address need it.
        options.keepsPeerAddress = true
        // Clients of any build connect here: one envelope a message, as every build speaks
        // (batches are for the deployment's own hops, `WireBatch`).
        options.takesBatches = false
        // No reply cache here: a client's envelope carries no caller, so keys would be shared
        // across clients; each service keeps replies by the caller the gateway stamps.
        host = ServiceHost(options: options, handler: core.handler, logger: logger, replyCache: nil, context: context, reactor: reactor)
    }

    public var config: GatewayConfig { core.config }

    public func boundEndpoint() async throws(ZMQError) -> String {
        try await host.boundEndpoint()
    }

    public var counters: HostCounters { host.counters }

    /// Connections subscribed to live events.
    public var subscriptionCount: Int { core.subscriptionCount }

    /// Sessions resolved and cached now.
    public var cachedSessions: Int { core.cachedSessions }

    /// Users whose events the publishers send this gateway (each one subscribed on every source).
    public var filteredUsers: Int { core.filteredUsers }

    public func run() async throws {
        let host = host
        try await withThrowingDiscardingTaskGroup { group in
            group.addTask {
                await self.core.run { _, envelope, peers in
                    for peer in peers { host.push(envelope, to: peer) }
                }
            }
            try await host.run()
            group.cancelAll()
        }
        await core.close()
    }
}

extension Logger {
    func with(_ key: String, _ value: String) -> Logger {
        var copy = self
        copy[metadataKey: key] = "\(value)"
        return copy
    }
}
