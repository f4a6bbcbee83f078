import Foundation
import Glibc

/// CPU time of some of this process's threads, found by name: what one simulated process's
/// threads spent (its reactor and its libzmq I/O thread) while the others ran beside it in the
/// same process. Read from each thread's own CPU clock, to the nanosecond.
struct ThreadCPU {
    let threads: [pid_t]

    /// The threads whose name (`/proc/self/task/*/comm`, at most 15 characters) is one of `names`.
    init(named names: Set<String>) {
        let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/task")) ?? []
        threads = tasks.compactMap { entry in
            guard let tid = pid_t(entry),
                  let comm = try? String(contentsOfFile: "/proc/self/task/\(entry)/comm", encoding: .utf8) else { return nil }
            return names.contains(comm.trimmingCharacters(in: .newlines)) ? tid : nil
        }
    }

    /// Their CPU time so far, ns (a thread that ended counts 0).
    func nanos() -> UInt64 {
        threads.reduce(0) { sum, tid in
            // The kernel's per-thread CPU clock of `tid` (what glibc's pthread_getcpuclockid
            // makes): ~tid << 3, per-thread bit 4, scheduler clock 2.
            let clock = clockid_t((~Int32(tid)) << 3) | 4 | 2
            var now = timespec()
            guard clock_gettime(clock, &now) == 0 else { return sum }
            return sum + UInt64(now.tv_sec) * 1_000_000_000 + UInt64(now.tv_nsec)
        }
    }

    /// The name libzmq gives the I/O thread of a context whose `ZMQ_THREAD_NAME_PREFIX` is `prefix`.
    static func ioThread(prefix: Int32) -> String { "\(prefix)/ZMQbg/IO/0" }
}
