import Foundation
import FriensoClient
import FriensoTesting
import GRDB
import Launcher
import Logging
import PostgresHarness
import ServiceKit
import Testing
import Wire


/// Runs the real `frienso` CLI against `gateway` with its own config dir.
struct CLI {
    let gateway: String
    let configDir: String
    var environment: [String: String] = [:]

    func run(_ arguments: [String], stdin: String? = nil) async throws -> (status: Int32, output: String) {
        try await ProcessHarness.run("frienso", arguments, stdin: stdin,
                                     environment: environment.merging(["FRIENSO_GATEWAY": gateway, "FRIENSO_CONFIG_DIR": configDir]) { $1 })
    }
}

/// Reads an endpoint file once the process has written it.
func endpoint(in path: String) async throws -> String {
    try await eventually("\(path) is written") {
        ((try? String(contentsOfFile: path, encoding: .utf8)) ?? "").hasSuffix("\n")
    }
    return try String(contentsOfFile: path, encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
}

/// Services as real processes on ephemeral ports, started one by one (a restart keeps the endpoints).
final class Stack: @unchecked Sendable {
    let procs: ProcessHarness
    var endpoints: [String: String] = [:]
    let dir: String
    init(_ procs: ProcessHarness) {
        self.procs = procs
        dir = procs.workDirectory
    }

    /// Where alerts' events will be until alerts runs: bound, never listening.
    let noAlertsYet = try! DeadPort()

    /// Added to every service's environment (e.g. a log level).
    var extraEnvironment: [String: String] = [:]

    var environment: [String: String] {
        var env = ["FRIENSO_OPERATOR_KEY": "e2e-operator", "FRIENSO_ALERTS_EVENTS": noAlertsYet.endpoint].merging(extraEnvironment) { $1 }
        for (name, value) in endpoints {
            let parts = name.split(separator: ".")
            env["FRIENSO_\(parts[0].uppercased())_\(parts.count > 1 ? "EVENTS" : "ENDPOINT")"] = value
        }
        return env
    }

    /// Starts `service`, on its previous endpoints when it ran before.
    func start(_ service: String) async throws {
        let any = "tcp://127.0.0.1:*"
        try? FileManager.default.removeItem(atPath: "\(dir)/\(service).endpoint")
        var env = environment
        env["FRIENSO_\(service.uppercased())_EVENTS"] = endpoints["\(service).events"] ?? any
        try procs.start(service, executable: "frienso-\(service)", arguments: [
            "--data-dir", "\(dir)/data", "--endpoint", endpoints[service] ?? any, "--endpoint-file", "\(dir)/\(service).endpoint"],
            environment: env)
        endpoints[service] = try await endpoint(in: "\(dir)/\(service).endpoint")
        if !["gateway", "media"].contains(service) { // the ones with a PUB socket
            endpoints["\(service).events"] = try await endpoint(in: "\(dir)/\(service).endpoint.events")
        }
    }

    func cli(_ name: String) -> CLI { CLI(gateway: endpoints["gateway"]!, configDir: "\(dir)/\(name)") }

    /// What the built-in providers sent, from alerts' database: (address, body).
    func sent() throws -> [(String, String)] {
        let queue = try DatabaseQueue(path: "\(dir)/data/alerts/alerts.sqlite", configuration: { var c = Configuration(); c.readonly = true; return c }())
        return try queue.read { db in try Row.fetchAll(db, sql: "SELECT address, body FROM sent_messages").map { ($0[0], $0[1]) } }
    }

    /// Registers and logs in each (name, phone); their CLIs by name.
    func register(_ users: [(String, String)]) async throws -> [String: CLI] {
        var clis: [String: CLI] = [:]
        for (name, phone) in users {
            let cli = self.cli(name)
            let r = try await cli.run(["register", "--username", name, "--email", "\(name)@example.org", "--phone", phone,
                                       "--first-name", name.capitalized, "--last-name", "E2E", "--password-stdin"], stdin: "password \(name)\n")
            #expect(r.status == 0, "\(r.output)\n\(procs.logs())")
            #expect(try await cli.run(["login", name, "--password-stdin"], stdin: "password \(name)\n").status == 0)
            clis[name] = cli
        }
        return clis
    }
}

/// The whole deployment as `deploy/up` runs it: `frienso-launch` starting all six services from a
/// config file, on ports reserved for the test, optionally with CurveZMQ on the gateway.
final class LaunchedStack: @unchecked Sendable {
    static let services = LaunchPlan.defaultOrder
    let procs: ProcessHarness
    let run: String
    let data: String
    let gateway: String
    /// The HTTP edge, `http://127.0.0.1:<port>` (`https://` when the test configured TLS).
    let edge: String
    /// Every member's request endpoint, and the publishers' event endpoints.
    let endpoints: [String: String]
    let events: [String: String]
    /// The keyring the launcher made.
    var keyring: String { "\(run)/keys" }
    /// The gateway's CurveZMQ public key, when it uses one.
    let serverKey: String?
    let launcher: ProcessHarness.Handle
    /// What the launcher starts (`launch`: `accounts#2` for a second instance).
    let members: [String]

    /// - Parameter environment: for the launcher and so for every service (e.g. an operator key).
    /// - Parameter configure: changes to the config file the launcher is given.
    init(_ procs: ProcessHarness, curve: Bool = false, environment: [String: String] = [:],
         configure: (inout FriensoConfig) -> Void = { _ in }) async throws {
        self.procs = procs
        let dir = procs.workDirectory
        run = "\(dir)/run"
        data = "\(dir)/data"
        // Held until the launcher is about to start, so no other test is given these ports.
        var reserved = try (0..<(Self.services.count + LaunchPlan.publishers.count)).map { _ in try DeadPort() }
        var endpoints: [String: String] = [:]
        for (i, name) in Self.services.enumerated() { endpoints[name] = reserved[i].endpoint }
        var events: [String: String] = [:]
        for (i, name) in LaunchPlan.publishers.enumerated() { events[name] = reserved[Self.services.count + i].endpoint }
        gateway = endpoints["gateway"]!
        self.events = events
        var config = FriensoConfig()
        config.endpoints = endpoints
        config.eventEndpoints = events
        config.launch = Self.services
        config.logLevel = "info"
        config.metricsListen = "127.0.0.1:0" // status.json says which port
        config.gateway = .init(requestsPerSecond: 100_000, burst: 100_000)
        if curve {
            let keys = try CurveKeys.generate()
            try keys.secretKey.write(toFile: "\(dir)/gateway.key", atomically: true, encoding: .utf8)
            config.gateway?.curveSecretKeyFile = "\(dir)/gateway.key"
            serverKey = keys.publicKey
        } else {
            serverKey = nil
        }
        configure(&config)
        members = config.launch ?? Self.services
        self.endpoints = config.endpoints ?? endpoints
        edge = (config.endpoints?["edge"] ?? endpoints["edge"]!).replacingOccurrences(of: "tcp://", with: "http://")
        try config.write(to: "\(dir)/frienso.json")
        self.environment = environment
        reserved.removeAll()
        launcher = try procs.start("launcher", executable: "frienso-launch", arguments: [
            "--config", "\(dir)/frienso.json", "--run-dir", run, "--data-dir", data, "--bin-dir", Repository.binaries.path],
            environment: environment)
        try await awaitReady()
    }

    /// The same deployment started again (same config, run folder, data, keyring and ports)
    /// after `previous`'s launcher stopped.
    init(_ procs: ProcessHarness, reusing previous: LaunchedStack) async throws {
        self.procs = procs
        run = previous.run
        data = previous.data
        gateway = previous.gateway
        edge = previous.edge
        endpoints = previous.endpoints
        events = previous.events
        serverKey = previous.serverKey
        environment = previous.environment
        members = previous.members
        launcher = try procs.start("launcher", executable: "frienso-launch", arguments: [
            "--config", "\(procs.workDirectory)/frienso.json", "--run-dir", run, "--data-dir", data, "--bin-dir", Repository.binaries.path],
            environment: environment)
        try await awaitReady()
    }

    private let environment: [String: String]

    private func awaitReady() async throws {
        let probe = client()
        defer { Task { await probe.close() } }
        do {
            for service in LaunchPlan.zeroMQMembers {
                try await eventually("\(service) answers through the gateway", timeout: .seconds(90)) {
                    (try? await probe.ping(service, deadline: .seconds(2))) != nil
                }
            }
            let edge = edge
            try await eventually("the edge answers GET /v1/health", timeout: .seconds(90)) { HTTPProbe.isReady(edge) }
        } catch {
            Issue.record("the stack did not come up:\n\(logs())")
            shutdown()
            throw error
        }
    }

    /// Stops the launcher, then every service by the PID it last recorded (a killed launcher
    /// leaves its children running). Call before `procs.shutdown()`.
    func shutdown() {
        procs.kill9(launcher.name)
        for service in Set(Self.services + members) {
            if let pid = pid(of: service) { kill(pid, SIGKILL) }
        }
    }

    /// A client of the gateway (trusting its key when it has one); a test about time names its
    /// deadline, every other call waits `TestDeadline.patient`.
    func client(deadline: Duration = TestDeadline.patient) -> FriensoClient {
        var options = ClientOptions()
        options.security = serverKey.map { .curve(serverPublicKey: $0, keys: nil) } ?? .plaintext
        options.defaultDeadline = deadline
        return FriensoClient(gateway: gateway, options: options, logger: Logger(label: "e2e-client"))
    }

    /// The real CLI with its own config dir, trusting the gateway's key.
    func cli(_ name: String) -> CLI {
        CLI(gateway: gateway, configDir: "\(procs.workDirectory)/cli-\(name)",
            environment: serverKey.map { ["FRIENSO_GATEWAY_PUBLIC_KEY": $0] } ?? [:])
    }

    /// The PID the launcher recorded for `service`.
    func pid(of service: String) -> Int32? { Supervisor.recordedPID(run, service) }

    /// `kill -9` of `service` by its PID, then waits until the launcher has started it again and
    /// it answers through the gateway (the edge: its health check).
    func kill9AndAwaitRestart(_ service: String, timeout: Duration = .seconds(60)) async throws {
        try await signalAndAwaitRestart(service, SIGKILL, timeout: timeout)
    }

    /// A graceful restart, as in a rolling one: SIGTERM (the service drains and exits), and the
    /// launcher starts it again.
    func terminateAndAwaitRestart(_ service: String, timeout: Duration = .seconds(60)) async throws {
        try await signalAndAwaitRestart(service, SIGTERM, timeout: timeout)
    }

    private func signalAndAwaitRestart(_ service: String, _ signal: Int32, timeout: Duration) async throws {
        let old = try #require(pid(of: service), "no PID file for \(service)")
        kill(old, signal)
        let probe = client(deadline: .seconds(2))
        defer { Task { await probe.close() } }
        let edge = edge
        try await eventually("the launcher restarted \(service)", timeout: timeout) {
            guard let now = self.pid(of: service), now != old else { return false }
            if service == "edge" { return HTTPProbe.isReady(edge) }
            // An instance (`accounts#2`): ready as the launcher found it (a Ping through the
            // gateway may reach the other instance).
            if service.contains("#") {
                return ((try? LaunchStatus.read(self.run).members) ?? []).contains { $0.name == service && $0.state == "ready" }
            }
            return (try? await probe.ping(service, deadline: .seconds(2))) != nil
        }
    }

    /// Every service's log and the launcher's, for a failure message.
    func logs() -> String {
        let dir = "\(run)/logs"
        let files = ((try? FileManager.default.contentsOfDirectory(atPath: dir)) ?? []).sorted()
        return procs.logs() + files.map { name in
            "----- \(name) -----\n" + ((try? String(contentsOfFile: "\(dir)/\(name)", encoding: .utf8)) ?? "").suffix(20_000)
        }.joined(separator: "\n")
    }

    /// Opens one service's database read-only.
    func database(_ service: String) throws -> DatabaseQueue {
        var configuration = Configuration()
        configuration.readonly = true
        return try DatabaseQueue(path: "\(data)/\(service)/\(service).sqlite", configuration: configuration)
    }
}

extension LaunchedStack {
    /// Runs `body`; when it throws, the failure carries every log.
    func showingLogsOnFailure(_ body: () async throws -> Void) async throws {
        do {
            try await body()
        } catch {
            Issue.record("\(error)\n\(logs())")
            throw error
        }
    }
}

extension PostgresTestServer {
    /// A fresh database of the test server for a launched deployment, and the storage section
    /// that reaches it: the password in a file of the test's folder (mode 600), never in the URL.
    static func deploymentStorage(_ name: String, in procs: ProcessHarness) async throws -> (LocalPostgresServer, String, StorageSection) {
        let server = try await PostgresTestServer.shared()
        let database = try await server.createDatabase(name)
        let passwordFile = "\(procs.workDirectory)/postgres-password"
        try server.password.write(toFile: passwordFile, atomically: true, encoding: .utf8)
        chmod(passwordFile, 0o600)
        let url = "postgres://\(PostgresTestServer.user)@127.0.0.1:\(server.port)/\(database)?sslmode=disable"
        return (server, database, StorageSection(kind: "postgres", url: url, passwordFile: passwordFile))
    }
}

extension FriensoConfig {
    /// Accounts, social, alerts and media keep their data in `storage` (geo stays on SQLite).
    mutating func keepOnPostgres(in storage: StorageSection) {
        var accounts = self.accounts ?? AccountsSection()
        accounts.storage = storage
        self.accounts = accounts
        var social = self.social ?? SocialSection()
        social.storage = storage
        self.social = social
        var alerts = self.alerts ?? AlertsSection()
        alerts.storage = storage
        self.alerts = alerts
        var media = self.media ?? MediaSection()
        media.storage = storage
        self.media = media
        var geo = self.geo ?? GeoSection()
        geo.storage = storage
        self.geo = geo
    }
}
