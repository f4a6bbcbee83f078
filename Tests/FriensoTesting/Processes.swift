public import Foundation
import ServiceKit
import Synchronization
import Testing

/// Real executables started by a test: each with its own log file; stopped by the PID it
/// recorded, never by name. `logs()` gathers every log for a failure message.
public final class ProcessHarness: Sendable {
    public struct Handle: Sendable {
        public let name: String
        public let pid: Int32
        public let logPath: String
    }

    private let directory: TemporaryDirectory
    private let handles = Mutex<[String: Handle]>([:])
    /// Ports standing in for members a test did not start (see `deploymentEnvironment`).
    private let placeholders = Mutex<[String: DeadPort]>([:])
    private let decoyAtStart: Int

    public init() throws {
        directory = try TemporaryDirectory("frienso-procs")
        decoyAtStart = DefaultPortDecoy.shared.connections
    }

    public var workDirectory: String { directory.path }

    /// The keyring every service this harness starts by hand shares (made on first use), as
    /// frienso-launch would make it.
    public var keyringFolder: String {
        let folder = "\(directory.path)/keys"
        _ = try? KeyringFiles.ensure(at: folder)
        return folder
    }

    static let services = Defaults.endpoints.keys.sorted()
    static let publishers = Defaults.eventEndpoints.keys.sorted()

    /// What a service started by hand needs besides the test's own settings: the harness's
    /// keyring, and an endpoint for every member the test did not name, a port of this test
    /// where nothing listens (a service never falls back to the default ports, where another
    /// deployment may run). Its own event endpoint, unnamed, is an ephemeral port.
    func deploymentEnvironment(for executable: String, given: [String: String]) -> [String: String] {
        let name = (executable as NSString).lastPathComponent
        guard name.hasPrefix("frienso-"), Self.services.contains(String(name.dropFirst("frienso-".count))) else { return given }
        let own = String(name.dropFirst("frienso-".count))
        var environment = given
        environment["FRIENSO_KEYRING"] = environment["FRIENSO_KEYRING"] ?? keyringFolder
        let keys = Self.services.filter { $0 != own }.map { "FRIENSO_\($0.uppercased())_ENDPOINT" }
            + Self.publishers.map { "FRIENSO_\($0.uppercased())_EVENTS" }
        for key in keys where environment[key] == nil && ProcessInfo.processInfo.environment[key] == nil {
            if key == "FRIENSO_\(own.uppercased())_EVENTS" {
                environment[key] = "tcp://127.0.0.1:*"
            } else {
                environment[key] = placeholders.withLock { ports in
                    if ports[key] == nil { ports[key] = try? DeadPort() }
                    return ports[key]?.endpoint ?? "tcp://127.0.0.1:1"
                }
            }
        }
        return environment
    }

    /// Starts `executable` (a name in `Repository.binaries`, or a path), its output to its own log
    /// (`Spawn`, not Foundation's `Process`: see `Spawn.start`).
    @discardableResult
    public func start(_ name: String, executable: String, arguments: [String], environment: [String: String] = [:]) throws -> Handle {
        var env = ProcessInfo.processInfo.environment
        env.merge(deploymentEnvironment(for: executable, given: environment)) { $1 }
        let logPath = "\(directory.path)/\(name).log"
        let pid = try Spawn.start([Self.path(of: executable)] + arguments, environment: env, output: .file(logPath)).get()
        let handle = Handle(name: name, pid: pid, logPath: logPath)
        handles.withLock { $0[name] = handle }
        return handle
    }

    static func path(of executable: String) -> String {
        executable.hasPrefix("/") ? executable : Repository.binaries.appendingPathComponent(executable).path
    }

    /// `kill -9` by PID, and reap it.
    public func kill9(_ name: String) {
        guard let handle = handles.withLock({ $0.removeValue(forKey: name) }) else { return }
        kill(handle.pid, SIGKILL)
        _ = Spawn.wait(handle.pid)
    }

    /// SIGTERM by PID and wait for the exit (on its own thread: never block the cooperative pool).
    /// - Returns: the exit status (128 + the signal when a signal ended it).
    @discardableResult
    public func terminate(_ name: String) async -> Int32 {
        guard let handle = handles.withLock({ $0.removeValue(forKey: name) }) else { return -1 }
        kill(handle.pid, SIGTERM)
        return await Self.offPool { Spawn.wait(handle.pid) }
    }

    /// Runs blocking work on a thread of its own. Test code that waits on processes must not
    /// hold one of the cooperative pool's threads (two, on two cores): the services under test
    /// need them.
    public static func offPool<T: Sendable>(_ work: @escaping @Sendable () -> T) async -> T {
        await withCheckedContinuation { continuation in
            Thread { continuation.resume(returning: work()) }.start()
        }
    }

    /// Whether `name` was started and has not exited (read from /proc: not reaped here, so the
    /// one who stops it gets its status).
    public func isRunning(_ name: String) -> Bool {
        guard let pid = handles.withLock({ $0[name]?.pid }), let state = ProcessState.of(pid) else { return false }
        return state != "Z" && state != "X"
    }

    /// Every started process's log, for a failure message.
    public func logs() -> String {
        let paths = (try? FileManager.default.contentsOfDirectory(atPath: directory.path)) ?? []
        return paths.sorted().filter { $0.hasSuffix(".log") }.map { name in
            let text = (try? String(contentsOfFile: "\(directory.path)/\(name)", encoding: .utf8)) ?? ""
            return "----- \(name) -----\n\(text.suffix(20_000))"
        }.joined(separator: "\n")
    }

    /// Kills what is still running (SIGKILL by PID: a test's processes keep nothing that needs a
    /// clean stop) and removes the work directory.
    public func shutdown() {
        let all = handles.withLock { state in
            defer { state.removeAll() }
            return Array(state.values)
        }
        for handle in all { kill(handle.pid, SIGKILL) } // one already exited waits as a zombie: no other process has its PID
        for handle in all { _ = Spawn.wait(handle.pid) }
        directory.remove()
        let reached = DefaultPortDecoy.shared.connections - decoyAtStart
        if reached > 0 {
            Issue.record("\(reached) connection(s) reached the default deployment ports during this test: something fell back to a default endpoint (\(DefaultPortDecoy.shared.report()))")
        }
    }

    /// Runs a command to completion, waiting on a thread of its own.
    /// - Returns: exit status and combined output.
    /// - Parameter directory: the working directory (default: the test runner's).
    public static func run(_ executable: String, _ arguments: [String], stdin: String? = nil,
                           environment: [String: String] = [:], directory: String? = nil) async throws -> (status: Int32, output: String) {
        let result = await offPool { Result { try runBlocking(executable, arguments, stdin: stdin, environment: environment, directory: directory) } }
        return try result.get()
    }

    private static func runBlocking(_ executable: String, _ arguments: [String], stdin: String?,
                                     environment: [String: String], directory: String?) throws -> (status: Int32, output: String) {
        var env = ProcessInfo.processInfo.environment
        env.merge(environment) { $1 }
        let (status, output) = try runCapturing([path(of: executable)] + arguments, input: stdin.map { Data($0.utf8) },
                                                environment: env, directory: directory)
        return (status, String(decoding: output, as: UTF8.self))
    }

    /// Runs `arguments[0]` (a path) to its end on this thread: `input` on its stdin, its stdout
    /// (and its stderr, unless `errorsToOutput` is false) read whole.
    /// - Parameter environment: its whole environment; nil: the test runner's.
    public static func runCapturing(_ arguments: [String], input: Data?, environment: [String: String]? = nil, directory: String? = nil,
                                    errorsToOutput: Bool = true) throws -> (status: Int32, output: Data) {
        let out = Pipe(), stdin = Pipe()
        let pid = try Spawn.start(arguments, environment: environment, directory: directory,
                                  input: stdin.fileHandleForReading.fileDescriptor,
                                  output: .descriptor(out.fileHandleForWriting.fileDescriptor), errorsToOutput: errorsToOutput).get()
        // The child's ends are its own now: the output reads to its end once the child (and
        // anything it left running) has closed it.
        try out.fileHandleForWriting.close()
        try stdin.fileHandleForReading.close()
        if let input { POSIXIO.writeAll(stdin.fileHandleForWriting, input) }
        try stdin.fileHandleForWriting.close()
        let data = POSIXIO.readAll(out.fileHandleForReading)
        try out.fileHandleForReading.close()
        return (Spawn.wait(pid), data)
    }
}

/// A process's state as the kernel reports it (`/proc/<pid>/stat`): `R` running, `S` sleeping,
/// `T` stopped, `Z` a zombie…; nil when there is no such process.
public enum ProcessState {
    public static func of(_ pid: Int32) -> Character? {
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
              let close = stat.lastIndex(of: ")") else { return nil }
        // "pid (comm) S ...": the state follows the command name's closing parenthesis.
        return stat[stat.index(after: close)...].first { $0 != " " }
    }
}
