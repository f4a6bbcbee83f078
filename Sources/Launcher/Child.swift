import Foundation
import Synchronization
import Wire

/// A child the supervisor started: a thread of its own waits for it to end and reaps it (nobody
/// else calls `waitpid` on it), so its exit is known at once, to every reader.
final class Child: Sendable {
    let pid: pid_t
    let exit = OneShot<ExitStatus>()
    private let ended = Mutex<ExitStatus?>(nil)

    init(pid: pid_t) {
        self.pid = pid
        Thread { [self] in
            var raw: Int32 = 0, reaped: pid_t
            repeat { reaped = waitpid(pid, &raw, 0) } while reaped < 0 && errno == EINTR
            let status = ExitStatus(raw: reaped == pid ? raw : -1) // -1: reaped by someone else, status unknown
            ended.withLock { $0 = status }
            exit.fulfil(status)
        }.start()
    }

    var isRunning: Bool { ended.withLock { $0 == nil } }

    /// Waits on this thread (the supervisor's shutdown is synchronous) for at most `timeout`.
    /// - Returns: how it ended, or nil when it is still running.
    func waitBlocking(for timeout: Duration) -> ExitStatus? {
        let until = ContinuousClock.now.advanced(by: timeout)
        // A bounded poll of what the reaper saw, every 20 ms as the shutdown did before.
        while isRunning && ContinuousClock.now < until { usleep(20_000) }
        return ended.withLock { $0 }
    }
}

/// How a child ended, as `waitpid` said.
struct ExitStatus: Sendable, CustomStringConvertible {
    let raw: Int32
    var description: String {
        guard raw >= 0 else { return "unknown" }
        return raw & 0x7f == 0 ? "exit status \((raw >> 8) & 0xff)" : "signal \(raw & 0x7f)"
    }
}
