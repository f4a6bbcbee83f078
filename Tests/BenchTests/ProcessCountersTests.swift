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

    @Test("bytes handed to pwrite(2) are counted, with the calls: whatever the file system does with them")
    func writesAreCounted() throws {
        var template = Array((FileManager.default.temporaryDirectory.path + "/frienso-process-counters-XXXXXX").utf8CString)
        let fd = mkstemp(&template)
        try #require(fd >= 0)
        defer {
            close(fd)
            unlink(template)
        }
        let page = [UInt8](repeating: 7, count: 4_096)
        let before = ProcessCounters.read("self")
        for i in 0..<16 { _ = page.withUnsafeBytes { pwrite(fd, $0.baseAddress, $0.count, off_t(i * 4_096)) } }
        let window = ProcessCounters.read("self").since(before)
        // Other threads of the test process may write too (logs): at least ours.
        #expect(window.writtenBytes >= 16 * 4_096)
        #expect(window.writeCalls >= 16)
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
        a.writtenBytes = 100; b.writtenBytes = 28; a.writeCalls = 2; b.writeCalls = 1
        #expect(ProcessCounters.sum([a, b]).since(ProcessCounters()).writtenBytes == 128)
        #expect(ProcessCounters.sum([a, b]).since(ProcessCounters()).writeCalls == 3)
        #expect(total.threads.count == 2)
        #expect(total.since(ProcessCounters()).voluntary == 3)
    }

    @Test("a thread's CPU counts as its role's: the reactor by its name, libzmq's I/O threads by theirs")
    func ticksByRole() {
        #expect(ProcessCounters.Role(threadName: "frienso-reactor") == .reactor)
        #expect(ProcessCounters.Role(threadName: "ZMQbg/IO/0") == .zmqIO)
        #expect(ProcessCounters.Role(threadName: "2/ZMQbg/IO/0") == .zmqIO)
        #expect(ProcessCounters.Role(threadName: "ZMQbg/Reaper") == .other)
        #expect(ProcessCounters.Role(threadName: "oot.default-qos") == .other)
        var earlier = ProcessCounters(ticks: 100)
        earlier.threads = [1: .init(ticks: 40, role: .reactor), 2: .init(ticks: 10, role: .zmqIO), 3: .init(ticks: 5, role: .other)]
        var later = ProcessCounters(ticks: 160)
        later.threads = [1: .init(ticks: 70, role: .reactor), 2: .init(ticks: 22, role: .zmqIO), 3: .init(ticks: 9, role: .other),
                         4: .init(ticks: 3, role: .reactor)] // a reactor that started in the window counts from zero
        let window = later.since(earlier)
        #expect(window.ticks == 60)
        #expect(window.reactorTicks == 30 + 3)
        #expect(window.zmqIOTicks == 12)
        #expect((window + window).reactorTicks == 66)
    }

    @Test("this process's own threads are read with their names and CPU")
    func readsThreadNamesAndTicks() throws {
        let tid = try Self.threadID()
        let mine = try #require(ProcessCounters.read("self").threads[tid])
        #expect(mine.ticks >= 0)
        #expect(mine.role == .other) // the test's thread is not a reactor
    }
}
