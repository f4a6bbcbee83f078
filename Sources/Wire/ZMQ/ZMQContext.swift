import CZeroMQ
public import Logging
import Synchronization

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
        // libzmq's default is 1,023 sockets a context; a load generator with a client per
        // simulated user needs more (the process's file limit still applies).
        zmq_ctx_set(handle, ZMQ_MAX_SOCKETS, 16_384)
        self.handle = handle
    }

    private let zap = Mutex<ZAPAuthenticator?>(nil)

    /// The context's ZAP handler, started on first use (by the first CurveZMQ server socket).
    public func authenticator(logger: Logger = Logger(label: "frienso.zap")) throws(ZMQError) -> ZAPAuthenticator {
        try zap.withLock { (existing: inout ZAPAuthenticator?) throws(ZMQError) -> ZAPAuthenticator in
            if let existing { return existing }
            let made = try ZAPAuthenticator(context: handle, logger: logger)
            existing = made
            return made
        }
    }

    /// One context for the whole process, as libzmq recommends.
    public static let shared = ZMQContext()

    /// Runs once every socket made from this context is gone (each holds its context), so
    /// terminating cannot wait on an open socket.
    deinit {
        zmq_ctx_term(handle)
    }
}
