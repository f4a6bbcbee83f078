import Foundation
public import Logging
import ServiceKit
public import ServiceLifecycle
import Synchronization
public import Wire

/// One process the launcher keeps running.
public struct ChildSpec: Sendable {
    /// The member, or `<member>#<n>` for an instance past the first (logs, status, metrics).
    public var name: String
    /// The deployment member it is (`accounts`): the service its Ping and metrics answer for.
    public var member: String
    public var executable: String
    public var arguments: [String]
    /// The request endpoint answering `<name>.Ping`, for readiness.
    public var endpoint: String
    /// Added to the launcher's environment for the child (every endpoint, the keyring).
    public var environment: [String: String]
    /// How the readiness probe connects (the launcher's member key).
    public var probe: ClientSecurity
    /// The child is probed over HTTP (`GET /v1/health`) instead of a ZeroMQ Ping.
    public var speaksHTTP: Bool
    /// What the launcher proves itself with when it reads the child's metrics (nil: plaintext plane).
    public var scrapeToken: [UInt8]?
    /// A PEM certificate to trust, besides the system's roots, when the child serves HTTPS (the
    /// edge's own `tlsCertificateFile`).
    public var trustedCertificateFile: String?

    public init(name: String, executable: String, arguments: [String], endpoint: String,
                environment: [String: String] = [:], probe: ClientSecurity = .plaintext, speaksHTTP: Bool = false,
                scrapeToken: [UInt8]? = nil, trustedCertificateFile: String? = nil, member: String? = nil) {
        self.member = member ?? name
        self.speaksHTTP = speaksHTTP
        self.trustedCertificateFile = trustedCertificateFile
        self.scrapeToken = scrapeToken
        self.name = name
        self.executable = executable
        self.arguments = arguments
        self.endpoint = endpoint
        self.environment = environment
        self.probe = probe
    }
}

/// Restart pacing: doubles from `initial` up to `maximum`; forgets after the child stayed up `stable`.
public struct Backoff: Sendable {
    public var initial: Duration = .milliseconds(500)
    public var maximum: Duration = .seconds(30)
    public var stable: Duration = .seconds(60)

    public init() {}

    public func delay(afterFailures failures: Int) -> Duration {
        guard failures > 0 else { return .zero }
        let factor = 1 << min(failures - 1, 16)
        return min(maximum, initial * factor)
    }
}

/// Starts children in order, waits until each answers Ping, restarts one that dies (with
/// backoff), probes them all every `probeInterval`, and on graceful shutdown stops them in
/// reverse order: SIGTERM, then SIGKILL after `stopTimeout` (past a host's longest graceful stop). Logs go to
/// `<runDir>/logs/<name>.log`, PIDs to `<runDir>/pids/<name>.pid`, and what it knows of each
/// member to `<runDir>/status.json` (`LaunchStatus`, read by `frienso-launch status`).
public final class Supervisor: Service, Sendable {
    public let children: [ChildSpec]
    public let runDirectory: String
    public let readyTimeout: Duration
    public let stopTimeout: Duration
    public let backoff: Backoff
    private let logger: Logger
    private let running = Mutex<[String: Child]>([:])
    private let restarts = Mutex<[String: Int]>([:])
    private let ready = OneShot<Result<Void, SupervisorError>>()
    private let shuttingDown = Atomic<Bool>(false)
    private let status: Mutex<LaunchStatus>
    public let probeInterval: Duration
    /// When a member's log passes `maxBytes` it is rotated, keeping `keep` older files.
    public let logRotation: LogRotation

    public init(children: [ChildSpec], runDirectory: String, logger: Logger, readyTimeout: Duration = .seconds(60),
                stopTimeout: Duration = .seconds(15), backoff: Backoff = Backoff(), probeInterval: Duration = .seconds(5),
                logRotation: LogRotation = LogRotation()) {
        self.logRotation = logRotation
        self.children = children
        self.runDirectory = runDirectory
        self.logger = logger
        self.readyTimeout = readyTimeout
        self.stopTimeout = stopTimeout
        self.backoff = backoff
        self.probeInterval = probeInterval
        status = Mutex(LaunchStatus(launcherPID: getpid(), startedAtMs: Self.nowMs(), members: children.map {
            LaunchStatus.Member(name: $0.name, state: "stopped", endpoint: $0.endpoint, restarts: 0)
        }))
    }

    static func nowMs() -> Int64 { Int64(Date().timeIntervalSince1970 * 1_000) }

    /// Changes what status.json says of `name`, and writes it.
    private func record(_ name: String, _ change: (inout LaunchStatus.Member) -> Void) {
        let runDirectory = runDirectory
        status.withLock { s in
            guard let i = s.members.firstIndex(where: { $0.name == name }) else { return }
            change(&s.members[i])
            s.write(runDirectory)
        }
    }

    /// Resolves when every child has answered Ping once (or one could not be started).
    public func allReady() async throws(SupervisorError) {
        try await ready.value.get()
    }

    /// Where the launcher keeps `name`'s PID while it runs.
    public static func pidFile(_ runDirectory: String, _ name: String) -> String { "\(runDirectory)/pids/\(name).pid" }

    /// The PID a launcher with `runDirectory` recorded for `name` (read by other processes:
    /// tests and the benchmark kill or measure the children by it).
    public static func recordedPID(_ runDirectory: String, _ name: String) -> Int32? {
        (try? String(contentsOfFile: pidFile(runDirectory, name), encoding: .utf8)).flatMap { Int32($0.trimmingCharacters(in: .whitespacesAndNewlines)) }
    }

    /// What status.json says now.
    public var currentStatus: LaunchStatus { status.withLock { $0 } }

    /// Records where the launcher serves the deployment's metrics.
    public func recordMetricsEndpoint(_ endpoint: String?, error: String? = nil) {
        let runDirectory = runDirectory
        status.withLock { s in
            s.metricsEndpoint = endpoint
            s.metricsError = error
            s.write(runDirectory)
        }
    }

    /// How many times `name` was restarted after dying.
    public func restartCount(_ name: String) -> Int { restarts.withLock { $0[name] ?? 0 } }

    /// The PID `name` runs as now.
    public func pid(of name: String) -> Int32? { running.withLock { $0[name]?.pid } }

    public func run() async throws {
        for dir in ["logs", "pids"] {
            try FileManager.default.createDirectory(atPath: "\(runDirectory)/\(dir)", withIntermediateDirectories: true)
        }
        await withGracefulShutdownHandler {
            await withDiscardingTaskGroup { group in
                for child in children {
                    do {
                        try start(child)
                        try await waitUntilAnswering(child)
                        markReady(child.name)
                        logger.info("ready", metadata: ["service": "\(child.name)", "pid": "\(pid(of: child.name) ?? 0)"])
                    } catch {
                        record(child.name) { $0.state = "failed"; $0.lastError = "\(error)" }
                        logger.error("could not start", metadata: ["service": "\(child.name)", "error": "\(error)"])
                        ready.fulfil(.failure(error as? SupervisorError ?? SupervisorError("\(child.name): \(error)")))
                        stopAll()
                        return
                    }
                    group.addTask { await self.supervise(child) }
                }
                ready.fulfil(.success(()))
                group.addTask { await self.probeLoop() }
                group.addTask { await self.rotationLoop() }
                logger.info("all services ready", metadata: ["run-dir": "\(runDirectory)"])
            }
        } onGracefulShutdown: {
            self.shuttingDown.store(true, ordering: .sequentiallyConsistent)
            self.stopAll()
        }
        stopAll()
    }

    private func start(_ child: ChildSpec) throws {
        let logPath = "\(runDirectory)/logs/\(child.name).log"
        // O_APPEND: every write goes to the end, so rotation can empty the file under the child.
        // `Spawn`, not Foundation's `Process`: two members restarted at once start two children
        // at once, which crashed Foundation's `Process.run` in the tests (see `Spawn.start`).
        let environment = ProcessInfo.processInfo.environment.merging(child.environment) { $1 }
        let pid: pid_t
        switch Spawn.start([child.executable] + child.arguments, environment: environment, output: .file(logPath, append: true, mode: 0o640)) {
        case .success(let started): pid = started
        case .failure(let error): throw SupervisorError("\(child.name): \(error)")
        }
        let process = Child(pid: pid)
        try "\(pid)\n".write(toFile: Self.pidFile(runDirectory, child.name), atomically: true, encoding: .utf8)
        running.withLock { $0[child.name] = process }
        record(child.name) { $0.state = "starting"; $0.pid = pid; $0.startedAtMs = Self.nowMs() }
    }

    /// Every `probeInterval`, each member's log over the limit is rotated.
    private func rotationLoop() async {
        while !Task.isCancelled, !shuttingDown.load(ordering: .relaxed) {
            try? await Task.sleep(for: probeInterval)
            for child in children {
                let path = "\(runDirectory)/logs/\(child.name).log"
                do {
                    if try logRotation.rotateIfNeeded(path) { logger.info("log rotated", metadata: ["service": "\(child.name)"]) }
                } catch {
                    logger.warning("could not rotate a log", metadata: ["file": "\(path)", "error": "\(error)"])
                }
            }
        }
    }

    private func markReady(_ name: String) {
        let at = Self.nowMs()
        record(name) { $0.state = "ready"; $0.lastReadyAtMs = at; $0.lastProbeAtMs = at }
        // Its version at once, not only at the first periodic probe.
        if let child = children.first(where: { $0.name == name }) {
            Task {
                let (_, version) = await probeOnce(child)
                if let version { record(name) { $0.version = version } }
            }
        }
    }

    /// Readiness after start: every member probed every `probeInterval` (a process can live and
    /// not answer: stuck, or its port taken).
    private func probeLoop() async {
        while !shuttingDown.load(ordering: .sequentiallyConsistent) && !Task.isCancelled {
            let until = ContinuousClock.now.advanced(by: probeInterval)
            // A timer, not a synchronisation: checked every 100 ms so shutdown does not wait for it.
            while ContinuousClock.now < until, !shuttingDown.load(ordering: .sequentiallyConsistent) { try? await Task.sleep(for: .milliseconds(100)) }
            for child in children where !shuttingDown.load(ordering: .sequentiallyConsistent) {
                guard running.withLock({ $0[child.name]?.isRunning ?? false }),
                      status.withLock({ s in s.members.first { $0.name == child.name }?.state }) != "starting" else { continue }
                let (answered, version) = await probeOnce(child)
                let at = Self.nowMs()
                record(child.name) { m in
                    m.lastProbeAtMs = at
                    if answered { m.lastReadyAtMs = at }
                    if let version { m.version = version }
                    m.state = answered ? "ready" : "not answering"
                }
            }
        }
    }

    /// Whether `child` answered, and the version it reports (Ping's, or the edge's health check).
    private func probeOnce(_ child: ChildSpec) async -> (answered: Bool, version: String?) {
        if child.speaksHTTP {
            let health = HTTPProbe.health(child.endpoint)
            return (health.ready, health.version)
        }
        var options = Self.probeOptions
        options.security = child.probe
        let client = WireClient(endpoint: child.endpoint, options: options, logger: logger)
        let pong = try? await client.ping(service: child.member, deadline: .seconds(2))
        await client.close()
        return (pong != nil, pong.map(\.version))
    }

    /// Pings the child with a bounded number of tries until it answers.
    private func waitUntilAnswering(_ child: ChildSpec) async throws {
        if child.speaksHTTP {
            let until = ContinuousClock.now.advanced(by: readyTimeout)
            while ContinuousClock.now < until {
                guard running.withLock({ $0[child.name]?.isRunning ?? false }) else {
                    throw SupervisorError("\(child.name) exited during start-up: see \(runDirectory)/logs/\(child.name).log")
                }
                if HTTPProbe.isReady(child.endpoint) { return }
                try await Task.sleep(for: .milliseconds(100))
            }
            throw SupervisorError("\(child.name) did not answer GET /v1/health at \(child.endpoint) within \(readyTimeout)")
        }
        var options = Self.probeOptions
        options.security = child.probe
        let client = WireClient(endpoint: child.endpoint, options: options, logger: logger)
        defer { Task { await client.close() } }
        let until = ContinuousClock.now.advanced(by: readyTimeout)
        while ContinuousClock.now < until {
            guard running.withLock({ $0[child.name]?.isRunning ?? false }) else {
                throw SupervisorError("\(child.name) exited during start-up: see \(runDirectory)/logs/\(child.name).log")
            }
            if (try? await client.ping(service: child.member, deadline: .milliseconds(500))) != nil { return }
            try await Task.sleep(for: .milliseconds(100))
        }
        throw SupervisorError("\(child.name) did not answer Ping at \(child.endpoint) within \(readyTimeout)")
    }

    static let probeOptions: ClientOptions = {
        var options = ClientOptions()
        options.failFastWhenPeerDown = false
        options.heartbeatInterval = .milliseconds(200)
        return options
    }()

    /// Waits for the child to exit; restarts it unless the launcher is shutting down.
    private func supervise(_ child: ChildSpec) async {
        var failures = 0
        while true {
            guard let process = running.withLock({ $0[child.name] }) else { return }
            let started = ContinuousClock.now
            let ended = await process.exit.value
            if shuttingDown.load(ordering: .sequentiallyConsistent) || Task.isCancelled { return }
            let lastError = LaunchStatus.lastError(inLog: "\(runDirectory)/logs/\(child.name).log")
            record(child.name) { m in
                m.state = "restarting"
                m.pid = nil
                m.lastExit = "\(ended)"
                if let lastError { m.lastError = lastError }
            }
            if started.duration(to: .now) >= backoff.stable { failures = 0 }
            failures += 1
            let delay = backoff.delay(afterFailures: failures)
            logger.warning("exited; restarting", metadata: [
                "service": "\(child.name)", "status": "\(ended)", "in": "\(delay)"])
            try? await Task.sleep(for: delay)
            if shuttingDown.load(ordering: .sequentiallyConsistent) { return }
            do {
                try start(child)
                restarts.withLock { $0[child.name, default: 0] += 1 }
                record(child.name) { $0.restarts += 1 }
                try await waitUntilAnswering(child)
                markReady(child.name)
                logger.info("restarted", metadata: ["service": "\(child.name)", "pid": "\(pid(of: child.name) ?? 0)"])
            } catch {
                record(child.name) { $0.state = "failed"; $0.lastError = "\(error)" }
                logger.error("restart failed", metadata: ["service": "\(child.name)", "error": "\(error)"])
            }
        }
    }

    /// SIGTERM to every child in reverse start order, then SIGKILL to what is left after `stopTimeout`.
    private func stopAll() {
        let processes = running.withLock { state in
            defer { state.removeAll() }
            return children.reversed().compactMap { child in state[child.name].map { (child.name, $0) } }
        }
        for (name, process) in processes where process.isRunning {
            kill(process.pid, SIGTERM)
            var ended = process.waitBlocking(for: stopTimeout)
            if ended == nil {
                logger.warning("did not stop in time; killing", metadata: ["service": "\(name)"])
                kill(process.pid, SIGKILL)
                ended = process.waitBlocking(for: .seconds(60))
            }
            try? FileManager.default.removeItem(atPath: Self.pidFile(runDirectory, name))
            record(name) { $0.state = "stopped"; $0.pid = nil }
            logger.info("stopped", metadata: ["service": "\(name)", "status": "\(ended ?? ExitStatus(raw: -1))"])
        }
    }
}

public struct SupervisorError: Error, CustomStringConvertible {
    public var description: String
    public init(_ description: String) { self.description = description }
}
