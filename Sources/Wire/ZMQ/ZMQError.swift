import CZeroMQ
import Glibc

/// A libzmq call failed. `errno` is libzmq's error number; `operation` names the call.
public struct ZMQError: Error, Hashable, CustomStringConvertible {
    public var operation: String
    public var errno: Int32

    init(_ operation: String, errno: Int32 = zmq_errno()) {
        self.operation = operation
        self.errno = errno
    }

    public var description: String { "\(operation): \(String(cString: zmq_strerror(errno))) (errno \(errno))" }

    /// The call would have blocked (non-blocking send/receive).
    public var wouldBlock: Bool { errno == EAGAIN }
    /// The context was terminated: the owning loop should stop.
    public var contextTerminated: Bool { errno == ETERM }
    public var interrupted: Bool { errno == EINTR }
}
