import CZeroMQ
import FriensoProto
import FriensoTesting
import Foundation
import Logging
import Synchronization
@testable import Wire

/// A test-only method: echoes the ping payload.
let echo = RPCMethod<CommonV1.PingRequest, CommonV1.PingResponse>(service: "test", name: "Echo", access: .public)
let slow = RPCMethod<CommonV1.PingRequest, CommonV1.PingResponse>(service: "test", name: "Slow", access: .public)
let needsSession = RPCMethod<CommonV1.PingRequest, CommonV1.PingResponse>(service: "test", name: "Private", access: .authenticated)

/// Runs a host with `router` on an ephemeral port and gives `body` a client to it.
func withHost<T: Sendable>(
    _ router: MethodRouter, logs: CapturedLogs, options: (inout HostOptions) -> Void = { _ in },
    clientOptions: ClientOptions = .patient, replyCache: ReplyCache = ReplyCache(),
    _ body: @Sendable (ServiceHost, WireClient) async throws -> T
) async throws -> T {
    var hostOptions = HostOptions(name: "test", endpoint: "tcp://127.0.0.1:*")
    options(&hostOptions)
    let host = ServiceHost(options: hostOptions, handler: router, logger: logs.logger("host"), replyCache: replyCache)
    return try await withRunningServices([host], logger: logs.logger("group")) {
        let endpoint = try await host.boundEndpoint()
        let client = WireClient(endpoint: endpoint, options: clientOptions, logger: logs.logger("client"))
        defer { Task { await client.close() } }
        return try await body(host, client)
    }
}

/// For the dead-peer tests only: quicker than production (500 ms × 3) so they stay short. Every
/// other test uses the production settings: on a freshly built two-core machine running the whole
/// suite, a 600 ms silence window was occasionally exceeded at start-up (seen in CI runs).
func fastClient() -> ClientOptions {
    var options = ClientOptions()
    options.heartbeatInterval = .milliseconds(200)
    options.defaultDeadline = .seconds(5)
    return options
}

/// Counts how many times a handler really ran.
final class Counter: Sendable {
    private let value = Atomic<Int>(0)
    func increment() -> Int { value.add(1, ordering: .relaxed).newValue }
    var count: Int { value.load(ordering: .relaxed) }
}

/// A raw socket for sending what a well-behaved client never would.
final class RawPeer {
    let socket: ZMQSocket

    init(_ kind: ZMQSocket.Kind, connect endpoint: String) throws {
        socket = try ZMQSocket(.shared, kind)
        try socket.set(ZMQ_RCVTIMEO, 5_000)
        try socket.connect(endpoint)
    }

    init(bind endpoint: String) throws {
        socket = try ZMQSocket(.shared, .router)
        try socket.set(ZMQ_RCVTIMEO, 100)
        try socket.bind(endpoint)
    }

    func send(_ frames: [[UInt8]]) throws {
        try socket.send(frames, dontWait: false)
    }

    /// Runs `serve` on a thread of its own with a ROUTER bound to an ephemeral port (a test's
    /// scripted peer); `done` is fulfilled when `serve` returns.
    /// - Returns: the bound endpoint.
    static func serve(done: OneShot<Void>, _ serve: @escaping @Sendable (RawPeer) -> Void) async throws -> String {
        let bound = OneShot<String>()
        Thread {
            defer { done.fulfil(()) }
            guard let peer = try? RawPeer(bind: "tcp://127.0.0.1:*"), let endpoint = try? peer.socket.lastEndpoint() else {
                bound.fulfil("")
                return
            }
            bound.fulfil(endpoint)
            serve(peer)
        }.start()
        let endpoint = await bound.value
        guard !endpoint.isEmpty else { throw TimedOut(description: "a scripted peer could not bind") }
        return endpoint
    }

    /// The next message on a bound ROUTER: its routing frames and its envelope; nil after the
    /// receive timeout or for a frame that is no envelope.
    func receiveRouted() -> (route: [[UInt8]], envelope: Envelope)? {
        guard let message = try? socket.receive(dontWait: false), let last = message.frames.last,
              let envelope = try? Envelope(serializedBytes: last) else { return nil }
        return (Array(message.frames.dropLast()), envelope)
    }

    func answerHeartbeat(_ heartbeat: Envelope, to route: [[UInt8]]) {
        let beat = Envelope(version: WireProtocol.version, kind: .heartbeat, requestId: heartbeat.requestId)
        _ = try? socket.send(route, packing: beat, dontWait: true)
    }

    /// The next envelope from the host (the last frame), or nil after the receive timeout.
    func receiveEnvelope() throws -> Envelope? {
        guard let message = try? socket.receive(dontWait: false), let last = message.frames.last else { return nil }
        return try Envelope(serializedBytes: last)
    }
}

extension MethodRouter {
    /// `test.Slow`: says it started, then waits for `gate` before answering with `service`.
    mutating func registerSlow(started: OneShot<Void>, gate: OneShot<Void>, answering service: String) {
        register(slow) { _, _ in
            started.fulfil(())
            await gate.value
            return CommonV1.PingResponse(service: service)
        }
    }
}
