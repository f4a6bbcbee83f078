import CLinuxShims
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

extension RawZMQ {
    /// What libzmq alone spends forwarding: DEALER clients with `window` requests outstanding →
    /// `zmq_proxy` (a ROUTER in front, a DEALER behind, on a thread and context of its own, as a
    /// gateway process has) → a ROUTER echo; CurveZMQ on the hop behind the proxy when `curve`
    /// (the internal plane), the front plain (as a client's default socket is).
    /// - Returns: the latencies, and the proxy's CPU per request (its thread and its context's
    ///   I/O thread, over the measured requests), µs.
    static func proxied(payload: [UInt8], count: Int, warmup: Int, window: Int, clients: Int, curve: Bool,
                        contexts: (client: ZMQContext, proxy: ZMQContext, server: ZMQContext), proxyPrefix: Int32?) -> (LatencyStats, Double) {
        var stats = LatencyStats(name: "raw DEALER → zmq_proxy → ROUTER" + (clients > 1 ? ", \(clients) clients" : "") + (curve ? " (CURVE)" : ""), inFlight: window)
        let total = count + warmup
        var server = (public: [CChar](repeating: 0, count: 41), secret: [CChar](repeating: 0, count: 41))
        var proxyKeys = (public: [CChar](repeating: 0, count: 41), secret: [CChar](repeating: 0, count: 41))
        if curve {
            zmq_curve_keypair(&server.public, &server.secret)
            zmq_curve_keypair(&proxyKeys.public, &proxyKeys.secret)
        }
        let serverKeys = server
        let echoEndpoint = OneShotEndpoint()
        let echo = Thread {
            let router = RawSocket(contexts.server, ZMQ_ROUTER)
            if curve {
                var on: Int32 = 1
                zmq_setsockopt(router.handle, ZMQ_CURVE_SERVER, &on, 4)
                zmq_setsockopt(router.handle, ZMQ_CURVE_SECRETKEY, serverKeys.secret, 40)
            }
            echoEndpoint.set(router.bind("tcp://127.0.0.1:*"))
            // Each frame goes back as it arrives, in libzmq's own message (no copy): the proxy's
            // identity, the client's (which the proxy's DEALER carries along), the body.
            var frame = zmq_msg_t()
            zmq_msg_init(&frame)
            defer { zmq_msg_close(&frame) }
            for _ in 0..<total {
                var more: Int32 = 1
                while more != 0 {
                    guard zmq_msg_recv(&frame, router.handle, 0) >= 0 else { return }
                    more = zmq_msg_more(&frame)
                    _ = zmq_msg_send(&frame, router.handle, more != 0 ? ZMQ_SNDMORE : 0)
                }
            }
        }
        echo.start()
        // Named before its first socket starts it, so its CPU can be told from the others'.
        let ioThread = proxyPrefix.map { ThreadCPU.nameIOThread(of: contexts.proxy, prefix: $0) }
        let frontEndpoint = OneShotEndpoint()
        let proxyName = "raw-proxy-\(proxyPrefix ?? 0)"
        // Its own control endpoint: with a shared context an earlier proxy may still hold its name.
        let control = "inproc://raw-proxy-control-\(UUID().uuidString)"
        let backEndpoint = echoEndpoint.wait()
        let keys = proxyKeys
        let proxy = Thread {
            _ = frienso_set_thread_name(proxyName)
            let front = RawSocket(contexts.proxy, ZMQ_ROUTER), back = RawSocket(contexts.proxy, ZMQ_DEALER)
            let steering = RawSocket(contexts.proxy, ZMQ_PAIR)
            _ = steering.bind(control)
            if curve {
                zmq_setsockopt(back.handle, ZMQ_CURVE_SERVERKEY, serverKeys.public, 40)
                zmq_setsockopt(back.handle, ZMQ_CURVE_PUBLICKEY, keys.public, 40)
                zmq_setsockopt(back.handle, ZMQ_CURVE_SECRETKEY, keys.secret, 40)
            }
            back.connect(backEndpoint)
            frontEndpoint.set(front.bind("tcp://127.0.0.1:*"))
            zmq_proxy_steerable(front.handle, back.handle, nil, steering.handle)
        }
        proxy.start()
        // `clients` connections, as many phones would have: each request goes out on the next
        // one in turn, so with more connections than requests in flight each carries one at a time.
        let front = frontEndpoint.wait()
        let dealers = (0..<max(1, clients)).map { _ in RawSocket(contexts.client, ZMQ_DEALER) }
        for dealer in dealers { dealer.connect(front) }
        var items = dealers.map { zmq_pollitem_t(socket: $0.handle, fd: 0, events: Int16(ZMQ_POLLIN), revents: 0) }
        // The proxy named its thread before it bound the front, so it has its name by now.
        let cpu = ThreadCPU(named: Set([proxyName] + (ioThread.map { [$0] } ?? [])))
        var sentAt = [ContinuousClock.Instant](repeating: .now, count: total)
        var message = [UInt8](repeating: 0, count: 8) + payload
        var buffer = [UInt8](repeating: 0, count: 65_536)
        var sent = 0, received = 0
        func sendNext() {
            withUnsafeBytes(of: UInt64(sent)) { message.replaceSubrange(0..<8, with: $0) }
            sentAt[sent] = .now
            _ = zmq_send(dealers[sent % dealers.count].handle, message, message.count, 0)
            sent += 1
        }
        while sent < min(window, total) { sendNext() }
        var started = ContinuousClock.now, cpuAtStart = cpu.read()
        receiving: while received < total {
            guard zmq_poll(&items, Int32(items.count), -1) >= 0 else { stats.errors += 1; break }
            for i in items.indices where items[i].revents & Int16(ZMQ_POLLIN) != 0 {
                while true {
                    let n = zmq_recv(dealers[i].handle, &buffer, buffer.count, ZMQ_DONTWAIT)
                    if n < 0 { break }
                    guard n >= 8 else { stats.errors += 1; break receiving }
                    let index = buffer.withUnsafeBytes { $0.loadUnaligned(as: UInt64.self) }
                    if Int(index) >= warmup { stats.record(sentAt[Int(index)].duration(to: .now)) }
                    received += 1
                    if received == warmup { started = .now; cpuAtStart = cpu.read() }
                    if sent < total { sendNext() }
                }
            }
        }
        stats.elapsed = started.duration(to: .now)
        let forwarding = Double(ThreadCPU.spent(from: cpuAtStart, to: cpu.read())) / 1_000 / Double(max(1, count))
        let stop = RawSocket(contexts.proxy, ZMQ_PAIR)
        stop.connect(control)
        _ = zmq_send(stop.handle, "TERMINATE", 9, 0)
        return (stats, forwarding)
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
