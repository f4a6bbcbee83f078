import Glibc
import Synchronization

/// Loopback TCP ports for servers a tool starts on a port it names (the benchmark's deployment,
/// Redis, PostgreSQL; the tests' reserved ports), taken from below the kernel's ephemeral range
/// (`ip_local_port_range`), never from it.
///
/// A port handed out is bound by its server only later (the launcher starts its children one
/// after another, seconds apart on a cold start). A port from the ephemeral range may meanwhile
/// become the local port of an outgoing connection (a service that started first connecting to
/// its peers), and then the server's bind fails and keeps failing while that connection lives
/// (seen: a whole-stack test timing out on a first run after a rebuild; the likely cause of a
/// benchmark deployment whose accounts "did not start"). Below the range only explicit binds
/// compete, and this process hands each port out once.
public enum LoopbackPorts {
    /// Ports handed out by this process (never again, even after release).
    private static let handedOut = Mutex<Set<UInt16>>([])

    /// The ports below the ephemeral range, down to 10000.
    static let candidates: ClosedRange<UInt16> = {
        let text = (try? String(contentsOfFile: "/proc/sys/net/ipv4/ip_local_port_range", encoding: .utf8)) ?? ""
        let low = text.split(whereSeparator: { $0 == " " || $0 == "\t" || $0 == "\n" }).first.flatMap { UInt16($0) } ?? 32_768
        return 10_000...max(10_001, low - 1)
    }()

    /// A port not handed out before, with a socket bound to 127.0.0.1 on it (not listening):
    /// while the caller keeps the socket, nobody else can bind the port. Nil when none is free.
    public static func claim() -> (port: UInt16, socket: Int32)? {
        let range = candidates
        let span = Int(range.upperBound - range.lowerBound) + 1
        let start = Int.random(in: 0..<span)
        for step in 0..<span {
            let port = range.lowerBound + UInt16((start + step) % span)
            guard handedOut.withLock({ $0.insert(port).inserted }) else { continue }
            if let fd = bind(port) { return (port, fd) }
        }
        return nil
    }

    /// A socket bound to 127.0.0.1:`port`, or nil when the port is taken.
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
}
