import Foundation
import FriensoTesting
import GRDB
import Testing
import Wire


/// Runs the real `frienso` CLI against `gateway` with its own config dir.
struct CLI {
    let gateway: String
    let configDir: String

    func run(_ arguments: [String], stdin: String? = nil) async throws -> (status: Int32, output: String) {
        try await ProcessHarness.run("frienso", arguments, stdin: stdin,
                               environment: ["FRIENSO_GATEWAY": gateway, "FRIENSO_CONFIG_DIR": configDir])
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
        if !["accounts", "gateway", "media"].contains(service) { // the ones with a PUB socket
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
