import Glibc

/// A loopback TCP port that refuses connections for as long as this value lives: bound (so no
/// other test can take it) but never listening. An endpoint freed after binding is not enough:
/// a test running in parallel may bind the same port next.
public final class DeadPort: @unchecked Sendable {
    public let endpoint: String
    private let fd: Int32

    public init() throws {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw TimedOut(description: "socket() failed") }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { sa in
                bind(fd, sa, length) == 0 && getsockname(fd, sa, &length) == 0
            }
        }
        guard bound else {
            close(fd)
            throw TimedOut(description: "bind() failed")
        }
        self.fd = fd
        endpoint = "tcp://127.0.0.1:\(UInt16(bigEndian: address.sin_port))"
    }

    deinit {
        close(fd)
    }
}
