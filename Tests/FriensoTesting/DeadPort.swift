import Glibc
import ServiceKit

/// A loopback TCP port that refuses connections for as long as this value lives: bound (so no
/// other test can take it) but never listening. An endpoint freed after binding is not enough:
/// a test running in parallel may bind the same port next.
///
/// Ports come from below the kernel's ephemeral range (`LoopbackPorts`, which says why).
public final class DeadPort: @unchecked Sendable {
    public let endpoint: String
    private let fd: Int32

    public init() throws {
        guard let (port, fd) = LoopbackPorts.claim() else {
            throw TimedOut(description: "no free loopback port below the ephemeral range")
        }
        self.fd = fd
        endpoint = "tcp://127.0.0.1:\(port)"
    }

    deinit {
        close(fd)
    }
}
