import Foundation
public import Glibc

/// Child processes for tools that start real servers (the benchmark's deployment and Redis, the
/// tests' and the benchmark's PostgreSQL): posix_spawn and waitpid, because Foundation's
/// `Process.waitUntilExit` spins, or never returns when the child leaves a daemon behind
/// (`pg_ctl start`), on Linux.
public enum Spawn {
    /// Starts `arguments[0]` with every signal unblocked and at its default action (a caller may
    /// run where ServiceLifecycle has blocked SIGTERM, and a child inherits the mask), stdin from
    /// /dev/null, stdout and stderr to `output`, and no other descriptor of this process.
    /// - Returns: the PID, or nil when it could not start.
    public static func start(_ arguments: [String], output: String = "/dev/null") -> pid_t? {
        var argv: [UnsafeMutablePointer<CChar>?] = arguments.map { strdup($0) } + [nil]
        defer { for p in argv { free(p) } }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, output, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        posix_spawn_file_actions_adddup2(&actions, 1, 2)
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
        guard posix_spawn(&pid, arguments[0], &actions, &attributes, &argv, environ) == 0 else { return nil }
        return pid
    }

    /// Runs a command to its end. - Returns: its exit status (128 + signal when killed) and output.
    public static func run(_ arguments: [String]) -> (status: Int32, output: String) {
        let output = FileManager.default.temporaryDirectory.appendingPathComponent("frienso-spawn-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: output) }
        guard let pid = start(arguments, output: output) else { return (127, "cannot start \(arguments[0])") }
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

/// glibc's `posix_spawn_file_actions_addclosefrom_np` (2.34+), which the Glibc module does not export.
@_silgen_name("posix_spawn_file_actions_addclosefrom_np")
private func closeFrom(_ actions: UnsafeMutablePointer<posix_spawn_file_actions_t>, _ from: Int32) -> Int32
