@testable import Bench
import Foundation
import Glibc
import Testing

@Suite("process counters")
struct ProcessCountersTests {
    /// This thread's id, as `/proc/self/task` names it (`/proc/thread-self` is `<pid>/task/<tid>`).
    static func threadID() throws -> Int32 {
        let link = try FileManager.default.destinationOfSymbolicLink(atPath: "/proc/thread-self")
        return try #require(link.split(separator: "/").last.flatMap { Int32($0) })
    }

    @Test("a thread that sleeps is counted as switched out each time, by its own id")
    func sleepsAreVoluntarySwitches() throws {
        let tid = try Self.threadID()
        let before = ProcessCounters.read("self")
        // Each nanosleep blocks: the thread leaves the CPU voluntarily (the event counted, not a wait for another thread).
        for _ in 0..<20 { usleep(500) }
        let after = ProcessCounters.read("self")
        let mine = try #require(after.threads[tid])
        let earlier = try #require(before.threads[tid])
        #expect(mine.voluntary - earlier.voluntary >= 20)
        #expect(after.since(before).voluntary >= 20)
    }

    @Test("touching fresh pages counts minor faults; CPU time only grows")
    func faultsAndTicks() throws {
        let before = ProcessCounters.read("self")
        let size = 8 << 20
        let memory = try #require(mmap(nil, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0))
        defer { munmap(memory, size) }
        let bytes = memory.assumingMemoryBound(to: UInt8.self)
        for page in stride(from: 0, to: size, by: 4_096) { bytes[page] = 1 }
        let window = ProcessCounters.read("self").since(before)
        #expect(window.minorFaults > 0)
        #expect(window.ticks >= 0)
        #expect(window.majorFaults >= 0)
    }

    @Test("a window counts threads alive at its end: a new one from zero, an ended one not at all")
    func windowsOverThreadsThatComeAndGo() {
        var earlier = ProcessCounters(ticks: 100, minorFaults: 10, majorFaults: 1)
        earlier.threads = [1: .init(voluntary: 5, involuntary: 2), 2: .init(voluntary: 7, involuntary: 0)]
        var later = ProcessCounters(ticks: 130, minorFaults: 15, majorFaults: 3)
        later.threads = [1: .init(voluntary: 9, involuntary: 3), 3: .init(voluntary: 4, involuntary: 1)] // 2 ended, 3 began
        let window = later.since(earlier)
        #expect(window.ticks == 30)
        #expect(window.minorFaults == 5)
        #expect(window.majorFaults == 2)
        #expect(window.voluntary == 4 + 4)
        #expect(window.involuntary == 1 + 1)
    }

    @Test("processes summed as one keep every thread")
    func sums() {
        var a = ProcessCounters(ticks: 1, minorFaults: 2, majorFaults: 3)
        a.threads = [10: .init(voluntary: 1, involuntary: 1)]
        var b = ProcessCounters(ticks: 4, minorFaults: 5, majorFaults: 6)
        b.threads = [11: .init(voluntary: 2, involuntary: 0)]
        let total = ProcessCounters.sum([a, b])
        #expect(total.ticks == 5 && total.minorFaults == 7 && total.majorFaults == 9)
        #expect(total.threads.count == 2)
        #expect(total.since(ProcessCounters()).voluntary == 3)
    }
}
