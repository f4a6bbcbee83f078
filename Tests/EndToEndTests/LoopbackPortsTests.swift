import Foundation
import Glibc
import ServiceKit
import Testing

/// The ports the tools name for the servers they start (the benchmark's deployment, Redis,
/// PostgreSQL, the tests' reservations). No process is started.
@Suite("loopback ports for servers started on a named port")
struct LoopbackPortsTests {
    /// The kernel's ephemeral range starts here: outgoing connections take their local ports from it.
    static let ephemeralLow: Int = {
        let text = (try? String(contentsOfFile: "/proc/sys/net/ipv4/ip_local_port_range", encoding: .utf8)) ?? ""
        return text.split(whereSeparator: \.isWhitespace).first.flatMap { Int($0) } ?? 32_768
    }()

    @Test func portsComeFromBelowTheEphemeralRange_eachOnce_andNobodyElseCanBindAClaimedOne() throws {
        var seen = Set<Int>()
        var held: [Int32] = []
        defer { for fd in held { close(fd) } }
        for _ in 0..<40 {
            let (port, fd) = try #require(LoopbackPorts.claim())
            held.append(fd)
            #expect((10_000..<Self.ephemeralLow).contains(Int(port)), "port \(port) is inside the ephemeral range")
            #expect(seen.insert(Int(port)).inserted, "port \(port) handed out twice")
            #expect(!Self.canBind(Int(port)), "a claimed port \(port) could be bound again")
        }
        // What the benchmark and the PostgreSQL harness use: the same rule, released at once.
        let free = try #require(Spawn.freePort())
        #expect((10_000..<Self.ephemeralLow).contains(free) && !seen.contains(free))
        #expect(Self.canBind(free))
    }

    static func canBind(_ port: Int) -> Bool {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = UInt16(port).bigEndian
        return withUnsafePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0 }
        }
    }
}
