import Foundation

/// What the kernel counts for one process, read from `/proc`: its CPU time, its page faults and
/// each live thread's context switches. Two readings around a measured window give counts per
/// operation that the VM's speed does not move the way it moves seconds: a change that saves a
/// wake-up per request shows as one fewer switch per operation in any hour of the VM
/// (`docs/benchmarks.md`, issue 16, item 45).
struct ProcessCounters: Sendable {
    /// The kernel's clock ticks per second (`ticks` are in these).
    static let ticksPerSecond = Double(sysconf(Int32(_SC_CLK_TCK)))

    /// utime + stime, in clock ticks (threads that ended are included: the kernel adds them up).
    var ticks = 0
    var minorFaults = 0
    /// Faults that had to read the page back from disk: a binary or a database page that the
    /// kernel dropped (this VM pages out memory it deems cold), felt as a stall.
    var majorFaults = 0
    /// Bytes handed to `write(2)`-family calls (`wchar` in `/proc/<pid>/io`: a database's WAL
    /// frames and checkpoints, a pipe's or an eventfd's 8 bytes; not `send(2)` on sockets), and
    /// the number of those calls (`syscw`). Per operation they show what a change to a store's
    /// writes saves, whatever the VM's speed (item 80).
    var writtenBytes = 0
    var writeCalls = 0
    /// Each thread's voluntary switches (it slept: waited for input, a lock, a disk) and
    /// involuntary ones (preempted), by thread id.
    var threads: [Int32: Switches] = [:]

    struct Switches: Sendable {
        var voluntary = 0
        var involuntary = 0
        /// The thread's utime + stime, in clock ticks, and what it is (by its name).
        var ticks = 0
        var role = Role.other
    }

    /// What a thread of a Frienso process does, by the name it runs under: the reactor (`Reactor`
    /// names its thread `frienso-reactor`: our sockets, the requests answered on it, the tasks it
    /// runs), libzmq's I/O threads (`ZMQbg/IO/n`: TCP, CurveZMQ boxes), and every other thread
    /// (the concurrency pool, GRDB's and libdispatch's queues, the checkpointer).
    enum Role: Sendable {
        case reactor, zmqIO, other

        init(threadName name: Substring) {
            self = name == "frienso-reactor" ? .reactor : name.hasPrefix("ZMQbg/IO/") || name.contains("/ZMQbg/IO/") ? .zmqIO : .other
        }
    }

    /// The process `pid` ("self" for this one); zeros for a process that is gone.
    static func read(_ pid: String) -> ProcessCounters {
        var counters = ProcessCounters()
        if let text = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8), let close = text.lastIndex(of: ")") {
            // After the command: state is field 3 of the line; minflt 10, majflt 12, utime 14, stime 15.
            let fields = text[text.index(after: close)...].split(separator: " ")
            if fields.count > 12 {
                counters.minorFaults = Int(fields[7]) ?? 0
                counters.majorFaults = Int(fields[9]) ?? 0
                counters.ticks = (Int(fields[11]) ?? 0) + (Int(fields[12]) ?? 0)
            }
        }
        if let io = try? String(contentsOfFile: "/proc/\(pid)/io", encoding: .utf8) {
            for line in io.split(separator: "\n") {
                if line.hasPrefix("wchar:") {
                    counters.writtenBytes = Self.number(line)
                } else if line.hasPrefix("syscw:") {
                    counters.writeCalls = Self.number(line)
                }
            }
        }
        for entry in (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task")) ?? [] {
            guard let tid = Int32(entry), let status = try? String(contentsOfFile: "/proc/\(pid)/task/\(entry)/status", encoding: .utf8) else { continue }
            var switches = Switches()
            for line in status.split(separator: "\n") {
                if line.hasPrefix("voluntary_ctxt_switches:") {
                    switches.voluntary = Self.number(line)
                } else if line.hasPrefix("nonvoluntary_ctxt_switches:") {
                    switches.involuntary = Self.number(line)
                }
            }
            if let stat = try? String(contentsOfFile: "/proc/\(pid)/task/\(entry)/stat", encoding: .utf8),
               let open = stat.firstIndex(of: "("), let close = stat.lastIndex(of: ")") {
                switches.role = Role(threadName: stat[stat.index(after: open)..<close])
                let fields = stat[stat.index(after: close)...].split(separator: " ")
                if fields.count > 12 { switches.ticks = (Int(fields[11]) ?? 0) + (Int(fields[12]) ?? 0) }
            }
            counters.threads[tid] = switches
        }
        return counters
    }

    private static func number(_ line: Substring) -> Int {
        line.split(whereSeparator: { $0 == " " || $0 == "\t" }).last.flatMap { Int($0) } ?? 0
    }

    /// Several processes as one (PostgreSQL's postmaster and its children).
    static func sum(_ parts: [ProcessCounters]) -> ProcessCounters {
        var total = ProcessCounters()
        for part in parts {
            total.ticks += part.ticks
            total.minorFaults += part.minorFaults
            total.majorFaults += part.majorFaults
            total.writtenBytes += part.writtenBytes
            total.writeCalls += part.writeCalls
            // Thread ids are unique on the machine while the threads live.
            total.threads.merge(part.threads) { a, _ in a }
        }
        return total
    }

    /// What happened between `earlier` and this reading. A thread that started in between counts
    /// from zero; one that ended in between is left out (its switches are not kept by the kernel
    /// per process), so a window should be long against the life of a pool thread.
    func since(_ earlier: ProcessCounters) -> Window {
        var window = Window(ticks: ticks - earlier.ticks, minorFaults: minorFaults - earlier.minorFaults,
                            majorFaults: majorFaults - earlier.majorFaults, writtenBytes: writtenBytes - earlier.writtenBytes,
                            writeCalls: writeCalls - earlier.writeCalls)
        for (tid, now) in threads {
            let before = earlier.threads[tid] ?? Switches()
            window.voluntary += max(0, now.voluntary - before.voluntary)
            window.involuntary += max(0, now.involuntary - before.involuntary)
            let ticks = max(0, now.ticks - before.ticks)
            switch now.role {
            case .reactor: window.reactorTicks += ticks
            case .zmqIO: window.zmqIOTicks += ticks
            case .other: break
            }
        }
        return window
    }

    /// Counts over a measured window.
    struct Window: Sendable {
        var ticks = 0
        var minorFaults = 0
        var majorFaults = 0
        var writtenBytes = 0
        var writeCalls = 0
        var voluntary = 0
        var involuntary = 0
        /// Of `ticks`, the reactor threads' and libzmq's I/O threads' (threads alive at the
        /// window's end; the rest, other threads and ended ones, is `ticks` minus both).
        var reactorTicks = 0
        var zmqIOTicks = 0

        /// The CPU time in the window.
        var cpuSeconds: Double { Double(ticks) / ProcessCounters.ticksPerSecond }
        var reactorSeconds: Double { Double(reactorTicks) / ProcessCounters.ticksPerSecond }
        var zmqIOSeconds: Double { Double(zmqIOTicks) / ProcessCounters.ticksPerSecond }

        static func + (a: Window, b: Window) -> Window {
            Window(ticks: a.ticks + b.ticks, minorFaults: a.minorFaults + b.minorFaults, majorFaults: a.majorFaults + b.majorFaults,
                   writtenBytes: a.writtenBytes + b.writtenBytes, writeCalls: a.writeCalls + b.writeCalls,
                   voluntary: a.voluntary + b.voluntary, involuntary: a.involuntary + b.involuntary,
                   reactorTicks: a.reactorTicks + b.reactorTicks, zmqIOTicks: a.zmqIOTicks + b.zmqIOTicks)
        }
    }
}
