import Foundation
import Glibc

/// Child processes for the scenarios that need real servers (the deployment, Redis).
/// posix_spawn and waitpid: Foundation's `Process.waitUntilExit` spins on Linux here.
enum Spawn {
    /// Starts `arguments[0]` with every signal unblocked and at its default action (a scenario
    /// may run where ServiceLifecycle has blocked SIGTERM, and a child inherits the mask),
    /// stdout and stderr to `output`. - Returns: the PID, or nil when it could not start.
    static func start(_ arguments: [String], output: String = "/dev/null") -> pid_t? {
        var argv: [UnsafeMutablePointer<CChar>?] = arguments.map { strdup($0) } + [nil]
        defer { for p in argv { free(p) } }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 1, output, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        posix_spawn_file_actions_adddup2(&actions, 1, 2)
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

    /// Sends `signal` and reaps the child.
    static func stop(_ pid: pid_t, signal: Int32) {
        kill(pid, signal)
        var status: Int32 = 0
        waitpid(pid, &status, 0)
    }

    /// A loopback port the kernel just handed out and let go of, for a child to bind.
    static func freePort() -> Int? {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let ok = withUnsafeMutablePointer(to: &address) { p in
            p.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) == 0 && getsockname(fd, $0, &length) == 0 }
        }
        return ok ? Int(UInt16(bigEndian: address.sin_port)) : nil
    }
}
