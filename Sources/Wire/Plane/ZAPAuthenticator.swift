import CZeroMQ
import Foundation
import Logging
public import Synchronization

/// The ZAP handler (ZeroMQ RFC 27) of one libzmq context: libzmq asks it about every CurveZMQ
/// handshake on that context's server sockets, and it answers from the admission table the
/// socket registered under its ZAP domain. An admitted peer's messages then carry the member's
/// name as their `User-Id` property; a refused one never gets past the handshake (no reply, no
/// event: libzmq closes the connection).
///
/// It runs on a thread of its own with a blocking REP socket on `inproc://zeromq.zap.01`, bound
/// before any server socket of the context is created, so no handshake can happen without it
/// (and server sockets set `ZMQ_ZAP_ENFORCE_DOMAIN`, so libzmq refuses everyone if it were missing).
/// The thread ends when the context is terminated.
public final class ZAPAuthenticator: Sendable {
    private enum Table: Sendable {
        case anyClient
        /// 32-byte public key → member name.
        case members([[UInt8]: String])
    }

    private let domains = Mutex<[String: Table]>([:])
    private let nextDomain = Atomic<UInt64>(0)
    private let logger: Logger
    private let lastRefusalLog = Mutex<ContinuousClock.Instant?>(nil)
    /// Handshakes admitted and refused, over the context's life.
    public let admitted = Atomic<Int>(0)
    public let refused = Atomic<Int>(0)

    static let endpoint = "inproc://zeromq.zap.01"

    /// Starts the handler thread and waits until its socket is bound.
    init(context: UnsafeMutableRawPointer, logger: Logger) throws(ZMQError) {
        self.logger = logger
        let outcome = Mutex<Result<Void, ZMQError>?>(nil)
        let started = DispatchSemaphore(value: 0)
        nonisolated(unsafe) let context = context // libzmq contexts are thread-safe
        let thread = Thread { [self] in
            guard let socket = zmq_socket(context, ZMQ_REP) else {
                outcome.withLock { $0 = .failure(ZMQError("zmq_socket(ZAP)")) }
                started.signal()
                return
            }
            var linger: Int32 = 0
            zmq_setsockopt(socket, ZMQ_LINGER, &linger, MemoryLayout<Int32>.size)
            guard zmq_bind(socket, Self.endpoint) == 0 else {
                outcome.withLock { $0 = .failure(ZMQError("zmq_bind(\(Self.endpoint))")) }
                zmq_close(socket)
                started.signal()
                return
            }
            outcome.withLock { $0 = .success(()) }
            started.signal()
            serve(socket)
            zmq_close(socket)
        }
        thread.name = "frienso-zap"
        thread.start()
        started.wait()
        try outcome.withLock { $0! }.get()
    }

    /// Registers a server socket's admission rule. - Returns: the ZAP domain the socket must carry.
    func register(_ admission: ServerSecurity.Admission) -> String {
        let domain = "frienso.\(nextDomain.add(1, ordering: .relaxed).newValue)"
        let table: Table
        switch admission {
        case .anyClient:
            table = .anyClient
        case .members(let keys):
            table = .members(Dictionary(keys.compactMap { key, name in CurveKeys.binary(key).map { ($0, name) } },
                                        uniquingKeysWith: { first, _ in first }))
        }
        domains.withLock { $0[domain] = table }
        return domain
    }

    /// Forgets a closed socket's rule.
    func unregister(_ domain: String) {
        _ = domains.withLock { $0.removeValue(forKey: domain) }
    }

    /// The member name for a handshake, or nil to refuse it.
    func decide(domain: String, mechanism: String, credentials: [UInt8]) -> String? {
        guard mechanism == "CURVE", credentials.count == 32 else { return nil }
        switch domains.withLock({ $0[domain] }) {
        case .anyClient: return ""
        case .members(let keys): return keys[credentials]
        case nil: return nil
        }
    }

    // MARK: The handler thread

    private func serve(_ socket: UnsafeMutableRawPointer) {
        while true {
            guard let request = Self.receive(socket) else { return } // context terminated
            // RFC 27: version, request id, domain, address, routing id, mechanism, credentials…
            guard request.count >= 6 else {
                Self.send(socket, ["1.0", "", "500", "malformed ZAP request", "", ""].map { Array($0.utf8) })
                continue
            }
            let version = String(decoding: request[0], as: UTF8.self)
            let domain = String(decoding: request[2], as: UTF8.self)
            let address = String(decoding: request[3], as: UTF8.self)
            let mechanism = String(decoding: request[5], as: UTF8.self)
            let credentials = request.count > 6 ? request[6] : []
            let member = version == "1.0" ? decide(domain: domain, mechanism: mechanism, credentials: credentials) : nil
            if let member {
                admitted.add(1, ordering: .relaxed)
                Self.send(socket, [Array("1.0".utf8), request[1], Array("200".utf8), Array("OK".utf8), Array(member.utf8), []])
            } else {
                refused.add(1, ordering: .relaxed)
                noteRefusal(address: address, mechanism: mechanism)
                Self.send(socket, [Array("1.0".utf8), request[1], Array("400".utf8), Array("not a member of this deployment".utf8), [], []])
            }
        }
    }

    /// One log line a second at most: a peer retrying with a wrong key must not flood the log.
    private func noteRefusal(address: String, mechanism: String) {
        let now = ContinuousClock.now
        let due = lastRefusalLog.withLock { last -> Bool in
            guard last.map({ $0.duration(to: now) >= .seconds(1) }) ?? true else { return false }
            last = now
            return true
        }
        if due {
            logger.warning("refused a connection: its key is not a member of this deployment",
                           metadata: ["peer-address": "\(address)", "mechanism": "\(mechanism)", "refused": "\(refused.load(ordering: .relaxed))"])
        }
    }

    private static func receive(_ socket: UnsafeMutableRawPointer) -> [[UInt8]]? {
        var frames: [[UInt8]] = []
        while true {
            var message = zmq_msg_t()
            zmq_msg_init(&message)
            defer { zmq_msg_close(&message) }
            if zmq_msg_recv(&message, socket, 0) < 0 {
                if zmq_errno() == EINTR { continue }
                return nil
            }
            let size = zmq_msg_size(&message)
            frames.append(size > 0 ? Array(UnsafeRawBufferPointer(start: zmq_msg_data(&message), count: size)) : [])
            if zmq_msg_more(&message) == 0 { return frames }
        }
    }

    private static func send(_ socket: UnsafeMutableRawPointer, _ frames: [[UInt8]]) {
        for (index, frame) in frames.enumerated() {
            let flags = index < frames.count - 1 ? ZMQ_SNDMORE : 0
            _ = frame.withUnsafeBytes { zmq_send(socket, $0.baseAddress, $0.count, flags) }
        }
    }
}
