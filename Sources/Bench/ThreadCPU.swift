import CZeroMQ
import Foundation
import Glibc
import Wire

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

    /// Each thread's CPU time so far, ns (a thread that has ended is left out).
    func read() -> [pid_t: UInt64] {
        var times: [pid_t: UInt64] = [:]
        for tid in threads {
            // The kernel's per-thread CPU clock of `tid` (what glibc's pthread_getcpuclockid
            // makes): ~tid << 3, per-thread bit 4, scheduler clock 2.
            let clock = clockid_t((~Int32(tid)) << 3) | 4 | 2
            var now = timespec()
            if clock_gettime(clock, &now) == 0 { times[tid] = UInt64(now.tv_sec) * 1_000_000_000 + UInt64(now.tv_nsec) }
        }
        return times
    }

    /// CPU time the threads spent between two readings, ns: a thread that ended in between
    /// counts nothing (its clock is gone), rather than making the sum go backwards.
    static func spent(from before: [pid_t: UInt64], to after: [pid_t: UInt64]) -> UInt64 {
        after.reduce(0) { sum, entry in
            guard let start = before[entry.key], entry.value >= start else { return sum }
            return sum + (entry.value - start)
        }
    }

    /// Gives `context`'s libzmq I/O thread a name of its own (before its first socket starts the
    /// thread), so its CPU can be told from other contexts' in this one process.
    /// - Returns: that name.
    static func nameIOThread(of context: ZMQContext, prefix: Int32) -> String {
        zmq_ctx_set(context.handle, ZMQ_THREAD_NAME_PREFIX, prefix)
        return "\(prefix)/ZMQbg/IO/0"
    }
}
