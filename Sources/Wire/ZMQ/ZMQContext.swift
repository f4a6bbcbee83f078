import CZeroMQ

/// A libzmq context. Thread-safe, so it is `Sendable`; sockets made from it are not.
public final class ZMQContext: @unchecked Sendable {
    /// The raw context, for code that calls libzmq directly (the benchmark's baseline).
    public let handle: UnsafeMutableRawPointer

    /// - Parameter ioThreads: libzmq I/O threads (one is plenty below a few Gb/s).
    public init(ioThreads: Int32 = 1) {
        // zmq_ctx_new only fails on allocation failure or a broken process (too many open files).
        guard let handle = zmq_ctx_new() else { preconditionFailure("zmq_ctx_new failed: \(ZMQError("zmq_ctx_new"))") }
        zmq_ctx_set(handle, ZMQ_IO_THREADS, ioThreads)
        zmq_ctx_set(handle, ZMQ_BLOCKY, 0)
        self.handle = handle
    }

    /// One context for the whole process, as libzmq recommends.
    public static let shared = ZMQContext()

    /// Runs once every socket made from this context is gone (each holds its context), so
    /// terminating cannot wait on an open socket.
    deinit {
        zmq_ctx_term(handle)
    }
}
