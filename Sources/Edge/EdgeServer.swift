import Foundation
public import Gateway
import Hummingbird
import HummingbirdCore
import HummingbirdTLS
import HummingbirdWebSocket
public import Logging
import NIOCore
import NIOSSL
public import ServiceLifecycle
public import Wire

/// The HTTP/JSON and WebSocket front door: every client rpc at `POST /v1/<service>/<Rpc>` in
/// protobuf's JSON mapping, photos as binary at `/v1/photos`, live events at `/v1/events`, the
/// OpenAPI document at `/v1/openapi.json`. Requests go through a `GatewayCore`: the ZeroMQ
/// gateway's rules (sessions, allow-list, rate limits, forwarding over the internal plane) in the
/// same functions, not a copy.
public final class EdgeServer: Service, Sendable {
    public let config: EdgeConfig
    public let core: GatewayCore
    public let hub: EventHub
    let logger: Logger
    private let bound = OneShot<Result<String, EdgeConfigError>>()

    public init(config: EdgeConfig, logger: Logger, clientOptions: ClientOptions = ClientOptions(),
                context: ZMQContext = .shared, reactor: Reactor = .shared) {
        self.config = config
        self.logger = logger
        core = GatewayCore(config: config.core, logger: logger, clientOptions: clientOptions, context: context, reactor: reactor)
        // A user's log outlives their last connection by half the subscription's lifetime, and
        // the subscription is renewed as the connection closes: every event in the window is
        // still received here, so a resumed client misses nothing it is not told about.
        hub = EventHub(logCapacity: config.resumeEvents, resumeWindow: config.core.subscriptionTTL / 2)
    }

    /// `http(s)://host:port` as bound (port 0 resolved), once the server listens.
    public func boundEndpoint() async throws(EdgeConfigError) -> String {
        try await bound.value.get()
    }

    public func run() async throws {
        let application: any ApplicationProtocol
        do {
            application = try makeApplication()
        } catch {
            bound.fulfil(.failure(error as? EdgeConfigError ?? EdgeConfigError("\(error)")))
            throw error
        }
        let hub = hub
        try await withThrowingDiscardingTaskGroup { group in
            group.addTask {
                await self.core.run { user, event, _ in
                    guard let data = LiveEvents.json(event) else {
                        self.logger.debug("event not relayed: unknown to this build", metadata: ["event": "\(event.method)"])
                        return
                    }
                    hub.publish(user: user, event: event.method, text: data)
                }
            }
            group.addTask {
                while (try? await Task.sleep(for: hub.resumeWindow / 2)) != nil { hub.sweep() }
            }
            try await application.run()
            group.cancelAll()
        }
        await core.close()
    }

    private func makeApplication() throws -> some ApplicationProtocol {
        let (host, port) = try config.address()
        let tls = try tlsConfiguration()
        let routes = EdgeRoutes(config: config, core: core, hub: hub, logger: logger)
        let router = routes.router()
        let webSocketRouter = routes.webSocketRouter()
        var ws = WebSocketServerConfiguration(maxFrameSize: 1 << 16, autoPing: .enabled(timePeriod: config.pingPeriod))
        ws.closeTimeout = .seconds(5)
        var server = HTTPServerBuilder.http1WebSocketUpgrade(
            webSocketRouter: webSocketRouter,
            configuration: .init(http1: .init(idleTimeout: .seconds(120)), ws: ws))
        if let tls { server = try .tls(server, tlsConfiguration: tls) }
        let scheme = tls == nil ? "http" : "https"
        let bound = bound
        return Application(
            router: router, server: server,
            configuration: .init(address: .hostname(host, port: port), serverName: "frienso-edge"),
            onServerRunning: { channel in
                let port = channel.localAddress?.port ?? port
                let shown = host.contains(":") ? "[\(host)]" : host
                bound.fulfil(.success("\(scheme)://\(shown):\(port)"))
            },
            logger: logger)
    }

    private func tlsConfiguration() throws -> TLSConfiguration? {
        switch (config.tlsCertificateFile, config.tlsKeyFile) {
        case (nil, nil):
            return nil
        case (let certificate?, let key?):
            do {
                let chain = try NIOSSLCertificate.fromPEMFile(certificate).map { NIOSSLCertificateSource.certificate($0) }
                let privateKey = try NIOSSLPrivateKey(file: key, format: .pem)
                return TLSConfiguration.makeServerConfiguration(certificateChain: chain, privateKey: .privateKey(privateKey))
            } catch {
                throw EdgeConfigError("cannot load the edge's TLS certificate \(certificate) or key \(key): \(error)")
            }
        default:
            throw EdgeConfigError("the edge's TLS needs both a certificate file and a key file")
        }
    }
}
