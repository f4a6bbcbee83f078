import CZeroMQ
import Foundation
import Wire

/// The baseline: libzmq called directly from C, no Swift layer at all beyond the loop.
enum RawZMQ {
    /// REQ/REP, one request in flight, `count` round trips of `payload`.
    static func reqRep(payload: [UInt8], count: Int, warmup: Int, contexts: (server: ZMQContext, client: ZMQContext)) -> LatencyStats {
        var stats = LatencyStats(name: "raw libzmq REQ/REP", inFlight: 1)
        let (context, clientContext) = contexts
        let server = OneShotEndpoint()
        let serverThread = Thread {
            let rep = RawSocket(context, ZMQ_REP)
            server.set(rep.bind("tcp://127.0.0.1:*"))
            var buffer = [UInt8](repeating: 0, count: 65_536)
            for _ in 0..<(count + warmup) {
                let n = zmq_recv(rep.handle, &buffer, buffer.count, 0)
                guard n >= 0 else { return }
                _ = zmq_send(rep.handle, buffer, Int(n), 0)
            }
        }
        serverThread.start()
        let req = RawSocket(clientContext, ZMQ_REQ)
        req.connect(server.wait())
        var buffer = [UInt8](repeating: 0, count: 65_536)
        let started = ContinuousClock.now
        for i in 0..<(count + warmup) {
            let t0 = ContinuousClock.now
            _ = zmq_send(req.handle, payload, payload.count, 0)
            _ = zmq_recv(req.handle, &buffer, buffer.count, 0)
            if i >= warmup { stats.record(t0.duration(to: .now)) }
        }
        stats.elapsed = started.duration(to: .now) * (Double(count) / Double(count + warmup))
        return stats
    }

    /// A raw REQ client (C calls, one in flight) against any endpoint: against a Wire host it
    /// isolates the host's share of the Wire overhead.
    static func reqClient(name: String, endpoint: String, payload: [UInt8], count: Int, warmup: Int, context: ZMQContext) -> LatencyStats {
        var stats = LatencyStats(name: name, inFlight: 1)
        let req = RawSocket(context, ZMQ_REQ)
        req.connect(endpoint)
        var buffer = [UInt8](repeating: 0, count: 65_536)
        let started = ContinuousClock.now
        for i in 0..<(count + warmup) {
            let t0 = ContinuousClock.now
            _ = zmq_send(req.handle, payload, payload.count, 0)
            guard zmq_recv(req.handle, &buffer, buffer.count, 0) >= 0 else { stats.errors += 1; break }
            if i >= warmup { stats.record(t0.duration(to: .now)) }
        }
        stats.elapsed = started.duration(to: .now) * (Double(count) / Double(count + warmup))
        return stats
    }

    /// DEALER → ROUTER echo with `window` requests outstanding (the raw ceiling at N in flight).
    static func pipelined(payload: [UInt8], count: Int, window: Int, contexts: (server: ZMQContext, client: ZMQContext)) -> LatencyStats {
        var stats = LatencyStats(name: "raw libzmq DEALER/ROUTER", inFlight: window)
        let (context, clientContext) = contexts
        let server = OneShotEndpoint()
        let serverThread = Thread {
            let router = RawSocket(context, ZMQ_ROUTER)
            server.set(router.bind("tcp://127.0.0.1:*"))
            var id = [UInt8](repeating: 0, count: 256), body = [UInt8](repeating: 0, count: 65_536)
            for _ in 0..<count {
                let idLen = zmq_recv(router.handle, &id, id.count, 0)
                let n = zmq_recv(router.handle, &body, body.count, 0)
                guard idLen >= 0, n >= 0 else { return }
                _ = zmq_send(router.handle, id, Int(idLen), ZMQ_SNDMORE)
                _ = zmq_send(router.handle, body, Int(n), 0)
            }
        }
        serverThread.start()
        let dealer = RawSocket(clientContext, ZMQ_DEALER)
        dealer.connect(server.wait())
        var sentAt = [ContinuousClock.Instant](repeating: .now, count: count)
        var message = [UInt8](repeating: 0, count: 8) + payload
        var buffer = [UInt8](repeating: 0, count: 65_536)
        var sent = 0, received = 0
        let started = ContinuousClock.now
        while received < count {
            while sent < count && sent - received < window {
                withUnsafeBytes(of: UInt64(sent)) { message.replaceSubrange(0..<8, with: $0) }
                sentAt[sent] = .now
                _ = zmq_send(dealer.handle, message, message.count, 0)
                sent += 1
            }
            let n = zmq_recv(dealer.handle, &buffer, buffer.count, 0)
            guard n >= 8 else { break }
            let index = buffer.withUnsafeBytes { $0.loadUnaligned(as: UInt64.self) }
            stats.record(sentAt[Int(index)].duration(to: .now))
            received += 1
        }
        stats.elapsed = started.duration(to: .now)
        return stats
    }
}

/// A bare libzmq socket for the baseline (the Wire wrapper is what is being measured against).
final class RawSocket {
    let handle: UnsafeMutableRawPointer
    private let context: ZMQContext // outlives the socket, as in ZMQSocket

    init(_ context: ZMQContext, _ type: Int32) {
        self.context = context
        guard let handle = zmq_socket(context.handle, type) else { preconditionFailure("zmq_socket failed") }
        self.handle = handle
        var linger: Int32 = 0
        zmq_setsockopt(handle, ZMQ_LINGER, &linger, 4)
    }

    func bind(_ endpoint: String) -> String {
        zmq_bind(handle, endpoint)
        var buffer = [CChar](repeating: 0, count: 256)
        var size = buffer.count
        zmq_getsockopt(handle, ZMQ_LAST_ENDPOINT, &buffer, &size)
        return String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    func connect(_ endpoint: String) {
        zmq_connect(handle, endpoint)
    }

    deinit {
        zmq_close(handle)
    }
}

/// Hands the server thread's bound endpoint to the client thread.
final class OneShotEndpoint: @unchecked Sendable {
    private let condition = NSCondition()
    private var value: String?

    func set(_ endpoint: String) {
        condition.lock()
        value = endpoint
        condition.broadcast()
        condition.unlock()
    }

    func wait() -> String {
        condition.lock()
        defer { condition.unlock() }
        while true {
            if let value { return value }
            condition.wait()
        }
    }
}
