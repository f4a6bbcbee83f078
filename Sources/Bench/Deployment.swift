import Foundation
import FriensoClient
import Glibc
import Launcher
import Logging
import PostgresHarness
import ServiceKit
import Wire

/// `frienso-launch` with every member (the six ZeroMQ ones and the edge) on free loopback ports,
/// in a scratch folder.
struct Deployment {
    static let services = LaunchPlan.defaultOrder
    /// The members that run as two instances in a `postgres-x2` deployment.
    static let scaled = ["accounts", "social", "geo", "alerts", "media"]
    let gateway: String
    /// The HTTP edge, `http://127.0.0.1:<port>`.
    let edge: String
    let run: String
    let pid: pid_t
    /// Every launched member (`accounts#2` for a second instance).
    let members: [String]
    /// The PostgreSQL server the services use, if any: its processes' CPU counts too.
    let postgres: LocalPostgresServer?

    /// - Parameters:
    ///   - plaintext: `--insecure-plaintext` (for the comparison), else CurveZMQ with the keyring the launcher makes.
    ///   - storage: where every service keeps its data (nil: SQLite).
    ///   - instances: how many instances of each of them (more than one needs `storage`).
    static func start(in dir: String, binDirectory: String, plaintext: Bool = false, storage: StorageSection? = nil, instances: Int = 1,
                      postgres: LocalPostgresServer? = nil) throws -> Deployment {
        func anyPort() throws -> String {
            guard let port = Spawn.freePort() else { throw RPCError(.internal, "no free port") }
            return "tcp://127.0.0.1:\(port)"
        }
        func ports(_ name: String) throws -> String {
            let count = scaled.contains(name) ? instances : 1
            return EndpointList.join(try (0..<count).map { _ in try anyPort() })
        }
        var endpoints: [String: String] = [:]
        for name in services { endpoints[name] = try ports(name) }
        var events: [String: String] = [:]
        for name in LaunchPlan.publishers { events[name] = try ports(name) }
        var config = FriensoConfig()
        config.endpoints = endpoints
        config.eventEndpoints = events
        config.logLevel = "warning"
        config.metricsListen = "127.0.0.1:0"
        config.gateway = .init(requestsPerSecond: 1_000_000, burst: 1_000_000)
        config.storage = storage
        let members = services + (instances > 1 ? scaled.flatMap { name in (2...instances).map { "\(name)#\($0)" } } : [])
        config.launch = members
        try config.write(to: "\(dir)/frienso.json")
        let path = "\(binDirectory)/frienso-launch"
        guard FileManager.default.isExecutableFile(atPath: path) else { throw RPCError(.failedPrecondition, "no \(path): build with -c release") }
        guard let pid = Spawn.start([path, "--config", "\(dir)/frienso.json", "--run-dir", "\(dir)/run", "--data-dir", "\(dir)/data",
                                     "--bin-dir", binDirectory] + (plaintext ? ["--insecure-plaintext"] : []), output: "\(dir)/launcher.log") else {
            throw RPCError(.internal, "cannot start \(path)")
        }
        return Deployment(gateway: endpoints["gateway"]!, edge: endpoints["edge"]!.replacingOccurrences(of: "tcp://", with: "http://"),
                          run: "\(dir)/run", pid: pid, members: members, postgres: postgres)
    }

    /// Waits (bounded) until every ZeroMQ member answers Ping through the gateway and the edge
    /// its health check.
    func awaitReady(logger: Logger) async throws {
        let client = FriensoClient(gateway: gateway, logger: logger)
        defer { Task { await client.close() } }
        for service in LaunchPlan.zeroMQMembers {
            var up = false
            for _ in 0..<600 where !up {
                up = (try? await client.ping(service, deadline: .seconds(1))) != nil
                if !up { try await Task.sleep(for: .milliseconds(100)) } // waiting for start-up, not measuring
            }
            guard up else { throw RPCError(.unavailable, "\(service) did not start: see \(run)/logs") }
        }
        for _ in 0..<600 {
            if HTTPProbe.isReady(edge) { return }
            try await Task.sleep(for: .milliseconds(100))
        }
        throw RPCError(.unavailable, "the edge did not start: see \(run)/logs/edge.log")
    }

    func pid(of service: String) -> pid_t? { Supervisor.recordedPID(run, service) }

    /// The kernel's counts (CPU, context switches, page faults) of each member, of PostgreSQL's
    /// processes (the postmaster and its children: "postgresql") and of this process ("bench client").
    func counters() -> [String: ProcessCounters] {
        var counters: [String: ProcessCounters] = [:]
        for name in members { if let p = pid(of: name) { counters[name] = .read(String(p)) } }
        if let postmaster = postgres?.postmasterPID {
            var parts = [ProcessCounters.read(String(postmaster))]
            for entry in (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? [] where Int32(entry) != nil {
                if Self.parent("/proc/\(entry)/stat") == postmaster { parts.append(.read(entry)) }
            }
            counters["postgresql"] = .sum(parts)
        }
        counters["bench client"] = .read("self")
        return counters
    }

    /// A process's parent's pid, from its stat line.
    static func parent(_ path: String) -> pid_t? {
        guard let text = try? String(contentsOfFile: path, encoding: .utf8), let close = text.lastIndex(of: ")") else { return nil }
        let fields = text[text.index(after: close)...].split(separator: " ")
        return fields.count > 1 ? pid_t(fields[1]) : nil
    }

    static func status(_ pid: String, _ key: String) -> String {
        let text = (try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8)) ?? ""
        let line = text.split(separator: "\n").first { $0.hasPrefix(key) } ?? ""
        let kb = Double(line.split(separator: " ").dropFirst().first { Int($0) != nil }.flatMap { Int($0) } ?? 0)
        return String(format: "%.1f", kb / 1_024)
    }

    /// CPU per process over the measured window, as a share of one core and as µs per operation
    /// (and of that, its reactor thread's and libzmq's I/O threads'), with its context switches
    /// per operation (voluntary: it slept and was woken; involuntary: preempted), the page faults
    /// that read from disk and the bytes it wrote per operation (`ProcessCounters.writtenBytes`);
    /// then the sums (the services alone, and with the load generator).
    func resources(before: [String: ProcessCounters], after: [String: ProcessCounters], seconds: Double,
                   operations: Int) -> (lines: [String], windows: [String: ProcessCounters.Window]) {
        var lines = ["| process | CPU (% of one core) | CPU µs per operation | its reactor thread | libzmq's I/O threads | wake-ups per operation | preemptions per operation | major faults | KiB written per operation | RSS MiB | peak RSS MiB |",
                     "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
        var windows: [String: ProcessCounters.Window] = [:]
        let ops = Double(max(1, operations))
        func row(_ name: String, _ w: ProcessCounters.Window, bold: Bool = false, memory: (String, String) = ("", "")) -> String {
            let used = w.cpuSeconds, b = bold ? "**" : ""
            return "| \(name) | \(String(format: "%.0f", used / seconds * 100)) | \(b)\(String(format: "%.0f", used / ops * 1e6))\(b) | "
                + "\(String(format: "%.0f", w.reactorSeconds / ops * 1e6)) | \(String(format: "%.0f", w.zmqIOSeconds / ops * 1e6)) | "
                + "\(String(format: "%.2f", Double(w.voluntary) / ops)) | \(String(format: "%.2f", Double(w.involuntary) / ops)) | \(w.majorFaults) | "
                + "\(String(format: "%.2f", Double(w.writtenBytes) / 1_024 / ops)) | \(memory.0) | \(memory.1) |"
        }
        let processes = members + (postgres != nil ? ["postgresql"] : [])
        for name in processes + ["bench client"] {
            let w = (after[name] ?? ProcessCounters()).since(before[name] ?? ProcessCounters())
            windows[name] = w
            let p = name == "bench client" ? "self" : name == "postgresql" ? postgres.map { String($0.postmasterPID) } ?? "?" : pid(of: name).map { String($0) } ?? "?"
            let memory = name == "postgresql" ? ("(all its processes)", "") : (Self.status(p, "VmRSS"), Self.status(p, "VmHWM"))
            lines.append(row(name, w, memory: memory))
        }
        let services = processes.reduce(ProcessCounters.Window()) { $0 + (windows[$1] ?? .init()) }
        let all = services + (windows["bench client"] ?? .init())
        lines.append(row("**all services**", services, bold: true))
        lines.append(row("all, with the load generator", all))
        windows["all services"] = services
        let servicesCPU = services.cpuSeconds, allCPU = all.cpuSeconds
        lines += ["", "- CPU per operation: \(String(format: "%.0f", servicesCPU / ops * 1e6)) µs summed over the deployment's processes, "
                  + "\(String(format: "%.0f", allCPU / ops * 1e6)) µs with the load generator (target: ≤ 120 µs); "
                  + "\(String(format: "%.1f", Double(services.voluntary) / ops)) wake-ups and \(String(format: "%.1f", Double(services.involuntary) / ops)) "
                  + "preemptions per operation in the services' threads"]
        return (lines, windows)
    }

    /// SIGTERM: the launcher stops its children and removes their PID files.
    func stop() {
        Spawn.stop(pid, signal: SIGTERM)
    }
}
