import Glibc
import Synchronization

/// A loopback TCP port that refuses connections for as long as this value lives: bound (so no
/// other test can take it) but never listening. An endpoint freed after binding is not enough:
/// a test running in parallel may bind the same port next.
///
/// Ports come from below the kernel's ephemeral range (`ip_local_port_range`), never from it: a
/// reservation is released just before a service binds it (the launcher starts its children one
/// after another, seconds apart on a cold start), and in that window any outgoing connection of
/// the test process could be given an ephemeral port as its local port, so the service's bind
/// would fail (seen: a whole-stack test timing out on a first run after a rebuild). Below the
/// range only explicit binds compete, and this process hands each port out once.
public final class DeadPort: @unchecked Sendable {
    public let endpoint: String
    private let fd: Int32

    /// Ports handed out by this process (never again, even after release).
    private static let handedOut = Mutex<Set<UInt16>>([])

    /// The ports below the ephemeral range, down to 10000.
    static let candidates: ClosedRange<UInt16> = {
        let text = (try? String(contentsOfFile: "/proc/sys/net/ipv4/ip_local_port_range", encoding: .utf8)) ?? ""
        let low = text.split(whereSeparator: { $0 == " " || $0 == "\t" || $0 == "\n" }).first.flatMap { UInt16($0) } ?? 32_768
        return 10_000...max(10_001, low - 1)
    }()

    public init() throws {
        let range = Self.candidates
        let span = Int(range.upperBound - range.lowerBound) + 1
        let start = Int.random(in: 0..<span)
        for step in 0..<span {
            let port = range.lowerBound + UInt16((start + step) % span)
            let claimed = Self.handedOut.withLock { $0.insert(port).inserted }
            guard claimed else { continue }
            if let fd = Self.bind(port) {
                self.fd = fd
                endpoint = "tcp://127.0.0.1:\(port)"
                return
            }
        }
        throw TimedOut(description: "no free loopback port below the ephemeral range")
    }

    /// A socket bound to 127.0.0.1:`port` (not listening), or nil when the port is taken.
    private static func bind(_ port: UInt16) -> Int32? {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { return nil }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = port.bigEndian
        let bound = withUnsafePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0 }
        }
        guard bound else {
            close(fd)
            return nil
        }
        return fd
    }

    deinit {
        close(fd)
    }
}
