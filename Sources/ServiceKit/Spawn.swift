import Foundation
public import Glibc

/// Child processes for tools that start real servers (the benchmark's deployment and Redis, the
/// tests' and the benchmark's PostgreSQL): posix_spawn and waitpid, because Foundation's
/// `Process.waitUntilExit` spins, or never returns when the child leaves a daemon behind
/// (`pg_ctl start`), on Linux.
public enum Spawn {
    /// Where a child's standard output goes.
    public enum Output: Sendable {
        /// A file, created (with `mode`) if missing, truncated or appended to.
        case file(String, append: Bool = false, mode: mode_t = 0o644)
        /// A descriptor of this process (a pipe's write end), handed to the child as its stdout.
        case descriptor(Int32)
    }

    /// Starts `arguments[0]` with every signal unblocked and at its default action (a caller may
    /// run where ServiceLifecycle has blocked SIGTERM, and a child inherits the mask), stdin from
    /// /dev/null, stdout and stderr to `output`, and no other descriptor of this process.
    /// - Returns: the PID, or nil when it could not start.
    public static func start(_ arguments: [String], output: String = "/dev/null") -> pid_t? {
        try? start(arguments, output: .file(output)).get()
    }

    /// Starts `arguments[0]` (a path) as `start(_:output:)` does, with more said.
    /// Foundation's `Process.run` is not used for this either: a test run on two busy cores, with
    /// several threads starting children, crashed inside it (a bad read in a `memcpy`); and on
    /// Linux it closes a child's descriptors one by one up to the highest it found open before
    /// the spawn, so one another thread opens meanwhile can stay open in the child
    /// (`posix_spawn_file_actions_addclosefrom_np` here closes them all).
    /// - Parameters:
    ///   - environment: the child's whole environment; nil: this process's.
    ///   - directory: its working directory; nil: this process's.
    ///   - input: a descriptor of this process to be its stdin (a pipe's read end); nil: /dev/null.
    ///   - output: where its stdout goes.
    ///   - errorsToOutput: its stderr goes where its stdout does; false: this process's stderr.
    /// - Returns: the PID, or the error posix_spawn gave.
    public static func start(_ arguments: [String], environment: [String: String]? = nil, directory: String? = nil,
                             input: Int32? = nil, output: Output, errorsToOutput: Bool = true) -> Result<pid_t, SpawnError> {
        guard let path = arguments.first else { return .failure(SpawnError(code: EINVAL, path: "")) }
        var argv: [UnsafeMutablePointer<CChar>?] = arguments.map { strdup($0) } + [nil]
        defer { for p in argv { free(p) } }
        var envp: [UnsafeMutablePointer<CChar>?]? = environment.map { $0.map { strdup("\($0.key)=\($0.value)") } + [nil] }
        defer { for p in envp ?? [] { free(p) } }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        if let input {
            posix_spawn_file_actions_adddup2(&actions, input, 0)
        } else {
            posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        }
        switch output {
        case .file(let file, let append, let mode):
            posix_spawn_file_actions_addopen(&actions, 1, file, O_WRONLY | O_CREAT | (append ? O_APPEND : O_TRUNC), mode)
        case .descriptor(let descriptor):
            posix_spawn_file_actions_adddup2(&actions, descriptor, 1)
        }
        if errorsToOutput { posix_spawn_file_actions_adddup2(&actions, 1, 2) }
        if let directory { _ = addChdir(&actions, directory) } // after the opens: a relative output path is this process's
        _ = closeFrom(&actions, 3)
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var none = sigset_t(), all = sigset_t()
        sigemptyset(&none)
        sigfillset(&all)
        posix_spawnattr_setsigmask(&attributes, &none)
        posix_spawnattr_setsigdefault(&attributes, &all)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))
        var pid: pid_t = 0
        let code: Int32
        if envp != nil {
            code = envp!.withUnsafeMutableBufferPointer { posix_spawn(&pid, path, &actions, &attributes, &argv, $0.baseAddress) }
        } else {
            code = posix_spawn(&pid, path, &actions, &attributes, &argv, environ)
        }
        return code == 0 ? .success(pid) : .failure(SpawnError(code: code, path: path))
    }

    /// Why a child could not be started.
    public struct SpawnError: Error, CustomStringConvertible {
        public let code: Int32
        public let path: String
        public var description: String { "cannot start \(path): \(String(cString: strerror(code)))" }
    }

    /// Runs a command to its end. - Returns: its exit status (128 + signal when killed) and output.
    public static func run(_ arguments: [String]) -> (status: Int32, output: String) {
        let output = FileManager.default.temporaryDirectory.appendingPathComponent("frienso-spawn-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: output) }
        let pid: pid_t
        switch start(arguments, output: .file(output)) {
        case .success(let started): pid = started
        case .failure(let error): return (127, "\(error)")
        }
        return (wait(pid), (try? String(contentsOfFile: output, encoding: .utf8)) ?? "")
    }

    /// Reaps `pid`. - Returns: its exit status (128 + signal when killed).
    public static func wait(_ pid: pid_t) -> Int32 {
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        return (status & 0x7f) == 0 ? (status >> 8) & 0xff : 128 + (status & 0x7f)
    }

    /// Sends `signal` and reaps the child.
    public static func stop(_ pid: pid_t, signal: Int32) {
        kill(pid, signal)
        _ = wait(pid)
    }

    /// A free loopback port for a child to bind, from below the ephemeral range
    /// (`LoopbackPorts`): released at once, so another process could still take it first.
    public static func freePort() -> Int? {
        guard let (port, fd) = LoopbackPorts.claim() else { return nil }
        close(fd)
        return Int(port)
    }
}

/// glibc's `posix_spawn_file_actions_addchdir_np` (2.29+), which the Glibc module does not export.
@_silgen_name("posix_spawn_file_actions_addchdir_np")
private func addChdir(_ actions: UnsafeMutablePointer<posix_spawn_file_actions_t>, _ path: UnsafePointer<CChar>) -> Int32

/// glibc's `posix_spawn_file_actions_addclosefrom_np` (2.34+), which the Glibc module does not export.
@_silgen_name("posix_spawn_file_actions_addclosefrom_np")
private func closeFrom(_ actions: UnsafeMutablePointer<posix_spawn_file_actions_t>, _ from: Int32) -> Int32
