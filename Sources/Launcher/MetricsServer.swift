import AsyncHTTPClient
import Foundation
import FriensoProto
import Hummingbird
import NIOCore
import NIOSSL
public import Logging
public import ServiceLifecycle
import ServiceKit
import Wire

/// The whole deployment's metrics on one HTTP port (`metricsListen`, default
/// `127.0.0.1:9100`): on every `GET /metrics` the launcher reads each member's metrics at once
/// (`<member>.Metrics` over the internal plane with its scrape token; the edge's `GET /metrics`
/// with the token as a bearer), merges them (`PrometheusText`) and adds its own view of each
/// member:
/// - `frienso_member_up{service}`: 1 when the member's metrics could be read, else 0;
/// - `frienso_member_ready{service}`: 1 when its last readiness probe was answered;
/// - `frienso_member_restarts_total{service}`: restarts after it died;
/// - `frienso_scrape_duration_seconds{service}`: how long reading it took.
/// No member's metrics carry a user id; the port is bound to loopback unless configured otherwise.
public final class MetricsServer: Service, Sendable {
    public let listen: String
    private let supervisor: Supervisor
    private let clients: [String: WireClient]
    /// For a member that serves HTTPS (the edge with its certificate): its chain is verified
    /// against the system's roots and the configured certificate; not the host name, since the
    /// launcher reaches it at its listen address (often 127.0.0.1), not the name it serves.
    private let https: HTTPClient?
    private let logger: Logger
    private let bound = OneShot<Result<String, SupervisorError>>()

    /// - Parameter listen: `host:port`; port 0 picks a free one (status.json says which).
    public init(listen: String, supervisor: Supervisor, logger: Logger) {
        self.listen = listen
        self.supervisor = supervisor
        self.logger = logger
        var options = ClientOptions()
        options.failFastWhenPeerDown = false
        options.heartbeatInterval = .seconds(1)
        var clients: [String: WireClient] = [:]
        for child in supervisor.children where !child.speaksHTTP {
            var o = options
            o.security = child.probe
            clients[child.name] = WireClient(endpoint: child.endpoint, options: o, logger: logger)
        }
        self.clients = clients
        if let child = supervisor.children.first(where: { $0.speaksHTTP && $0.endpoint.hasPrefix("https://") }) {
            var tls = TLSConfiguration.makeClientConfiguration()
            tls.certificateVerification = .noHostnameVerification
            if let file = child.trustedCertificateFile { tls.additionalTrustRoots = [.file(file)] }
            https = HTTPClient(eventLoopGroupProvider: .singleton, configuration: .init(tlsConfiguration: tls))
        } else {
            https = nil
        }
    }

    /// `http://host:port/metrics`, once listening.
    public func boundEndpoint() async throws(SupervisorError) -> String {
        try await bound.value.get()
    }

    public func run() async throws {
        guard let (host, port) = EndpointAddress.hostAndPort(listen) else {
            let error = SupervisorError("metricsListen \"\(listen)\" is not host:port (or off)")
            bound.fulfil(.failure(error))
            throw error
        }
        let router = Router()
        router.get("/metrics") { _, _ in
            Response(status: .ok, headers: [.contentType: "text/plain; version=0.0.4; charset=utf-8", .cacheControl: "no-store"],
                     body: .init(byteBuffer: ByteBuffer(string: await self.scrape())))
        }
        let bound = bound, supervisor = supervisor, logger = logger
        let application = Application(
            router: router,
            configuration: .init(address: .hostname(host, port: port), serverName: "frienso-launch"),
            onServerRunning: { channel in
                let port = channel.localAddress?.port ?? port
                let endpoint = "http://\(host.contains(":") ? "[\(host)]" : host):\(port)/metrics"
                supervisor.recordMetricsEndpoint(endpoint)
                logger.info("serving the deployment's metrics", metadata: ["endpoint": "\(endpoint)"])
                bound.fulfil(.success(endpoint))
            },
            logger: logger)
        do {
            try await application.run()
        } catch {
            // The deployment goes on serving people without its metrics (port 9100 is also
            // node_exporter's default): said loudly, in the log and in status.json.
            let problem = "cannot serve metrics on \(listen): \(error)"
            logger.error("the deployment's metrics are not served", metadata: ["listen": "\(listen)", "error": "\(error)"])
            supervisor.recordMetricsEndpoint(nil, error: problem)
            bound.fulfil(.failure(SupervisorError(problem)))
            try? await gracefulShutdown()
        }
        for client in clients.values { await client.close() }
        try? await https?.shutdown()
    }

    /// Every member's metrics, merged, and the launcher's own.
    public func scrape() async -> String {
        let results = await withTaskGroup(of: (String, String?, Duration).self) { group in
            for child in supervisor.children {
                group.addTask { await self.read(child) }
            }
            var all: [String: (String?, Duration)] = [:]
            for await (name, text, took) in group { all[name] = (text, took) }
            return all
        }
        let names = supervisor.children.map(\.name)
        let members = Dictionary(supervisor.currentStatus.members.map { ($0.name, $0) }) { first, _ in first }
        var own = ""
        /// One family of the launcher's own: a value per member.
        func family(_ name: String, _ type: String, _ help: String, _ value: (String) -> String) {
            own += "# HELP \(name) \(help)\n# TYPE \(name) \(type)\n"
            for member in names { own += "\(name){service=\"\(PrometheusText.escape(member))\"} \(value(member))\n" }
        }
        family("frienso_member_up", "gauge", "Whether the launcher could read the member's metrics (1) or not (0).") {
            results[$0]?.0 == nil ? "0" : "1"
        }
        family("frienso_member_ready", "gauge", "Whether the member answered the launcher's last readiness probe.") {
            members[$0]?.state == "ready" ? "1" : "0"
        }
        family("frienso_member_restarts_total", "counter", "Restarts of the member after it died, since the launcher started.") {
            "\(members[$0]?.restarts ?? 0)"
        }
        family("frienso_scrape_duration_seconds", "gauge", "How long reading the member's metrics took.") {
            let took = results[$0]?.1 ?? .zero
            return "\(Double(took.components.seconds) + Double(took.components.attoseconds) / 1e18)"
        }
        return PrometheusText.merge([own] + names.compactMap { results[$0]?.0 }, help: MetricCatalog.help)
    }

    private func read(_ child: ChildSpec) async -> (String, String?, Duration) {
        let started = ContinuousClock.now
        var text: String?
        if child.speaksHTTP {
            let headers = child.scrapeToken.map { ["Authorization": "Bearer " + Hex.encode($0)] } ?? [:]
            if let https, child.endpoint.hasPrefix("https://") {
                text = await readHTTPS(child.endpoint + "/metrics", headers: headers, client: https)
            } else {
                let answer = await Task.detached { HTTPProbe.get(child.endpoint, path: "/metrics", headers: headers) }.value
                if let answer, answer.status == 200 { text = answer.body }
            }
        } else if let client = clients[child.name] {
            let reply = try? await client.call(CommonMethods.metrics(child.member), CommonV1.MetricsRequest(token: child.scrapeToken ?? []),
                                               options: CallOptions(deadline: .seconds(2)))
            text = reply?.exposition
        }
        if text == nil { logger.debug("could not read a member's metrics", metadata: ["service": "\(child.name)"]) }
        return (child.name, text, started.duration(to: .now))
    }

    private func readHTTPS(_ url: String, headers: [String: String], client: HTTPClient) async -> String? {
        var request = HTTPClientRequest(url: url)
        for (name, value) in headers { request.headers.add(name: name, value: value) }
        do {
            let response = try await client.execute(request, timeout: .seconds(2))
            guard response.status == .ok else { return nil }
            let body = try await response.body.collect(upTo: 16 << 20)
            return String(buffer: body)
        } catch {
            logger.debug("could not read a member's metrics over TLS", metadata: ["url": "\(url)", "error": "\(error)"])
            return nil
        }
    }
}
