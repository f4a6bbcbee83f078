public import FriensoProto
import Foundation
public import Logging
import Synchronization

/// A Lazy Pirate client for one peer: a DEALER socket on its own thread, any number of calls in
/// flight, a deadline on every call, heartbeats, and a reopened socket when the peer goes silent.
/// A call never hangs: it ends with the reply, DEADLINE_EXCEEDED (peer alive but slow) or
/// UNAVAILABLE (peer silent or down) by its deadline.
public final class WireClient: Sendable {
    public let endpoint: String
    public let options: ClientOptions
    /// Events the peer pushed, and reconnections (after which subscriptions must be renewed).
    public let events: AsyncStream<ClientEvent>
    public let reactor: Reactor
    private let commands: CommandQueue<ClientCommand>
    private let slot = ClientLoop.Slot()
    private let nextRequestID = Atomic<UInt64>(0)
    private let finished = OneShot<Void>()

    /// Connects (in the background: the first call waits for the connection within its deadline).
    /// - Parameter reactor: the event loop that owns the socket. Callers running on it (as
    ///   handlers of a host on the same reactor do) send and resume without a thread hop.
    public init(endpoint: String, options: ClientOptions = ClientOptions(), logger: Logger,
                context: ZMQContext = .shared, reactor: Reactor = .shared) {
        self.endpoint = endpoint
        self.options = options
        self.reactor = reactor
        let commands = CommandQueue<ClientCommand>(reactor: reactor)
        self.commands = commands
        let (events, continuation) = AsyncStream.makeStream(of: ClientEvent.self, bufferingPolicy: .bufferingNewest(10_000))
        self.events = events
        let finished = finished, slot = slot
        reactor.execute {
            let loop = ClientLoop(endpoint: endpoint, options: options, context: context, commands: commands,
                                  events: continuation, logger: logger, finished: finished, slot: slot)
            slot.loop = loop
            reactor.register(loop)
        }
    }

    deinit {
        commands.post(.stop)
    }

    /// Stops the socket thread; calls in flight end with UNAVAILABLE.
    public func close() async {
        commands.post(.stop)
        await finished.value
    }

    /// Sends a request envelope and returns the reply envelope (whose status may be an error).
    /// The request id is assigned here.
    public func send(_ request: Envelope, deadline: Duration? = nil, retryable: Bool = false) async -> Envelope {
        let request = stamped(request)
        let id = request.requestId
        if Task.isCancelled { return request.reply(error: .unavailable("call cancelled")) }
        let until = ContinuousClock.now.advanced(by: deadline ?? options.defaultDeadline)
        let commands = commands
        return await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                let posted = commands.post(.call(ClientLoop.Pending(envelope: request, deadline: until, retryable: retryable,
                                                                    completion: .resume(continuation))))
                if !posted { continuation.resume(returning: request.reply(error: .unavailable("client closed"))) }
            }
        } onCancel: {
            commands.post(.cancel(id))
        }
    }

    /// Sends a request from code running on this client's reactor thread (a host's
    /// `ReactorRequestHandler` sharing the reactor, as the gateway's does): the request goes to
    /// libzmq now, and `completion` is called on this thread with the reply or the client's
    /// error (UNAVAILABLE, DEADLINE_EXCEEDED), exactly once, as `send` would return them. No task,
    /// no continuation, no hand-over between threads. `completion` must not call this client.
    /// - Returns: false, having sent nothing, when called off this client's reactor thread or
    ///   before its socket exists; the caller then takes the async path (`send`).
    public func sendOnReactor(_ request: Envelope, deadline: Duration? = nil, retryable: Bool = false,
                              completion: @escaping (Envelope) -> Void) -> Bool {
        guard reactor.isCurrent, let loop = slot.loop else { return false }
        let request = stamped(request)
        let until = ContinuousClock.now.advanced(by: deadline ?? options.defaultDeadline)
        loop.callNow(ClientLoop.Pending(envelope: request, deadline: until, retryable: retryable, completion: .call(completion)))
        return true
    }

    /// Whether `sendOnReactor` would send now: on this client's reactor thread, its socket made.
    public var canSendOnReactor: Bool { reactor.isCurrent && slot.loop != nil }

    /// A request with this client's protocol version, kind and next request id.
    private func stamped(_ request: Envelope) -> Envelope {
        var request = request
        request.version = WireProtocol.version
        request.kind = .request
        request.requestId = nextRequestID.add(1, ordering: .relaxed).newValue
        return request
    }

    /// Calls a typed method.
    /// - Throws: `RPCError` with the reply's status, or UNAVAILABLE / DEADLINE_EXCEEDED from the client.
    public func call<Request, Response>(
        _ method: RPCMethod<Request, Response>, _ request: Request, options call: CallOptions = CallOptions()
    ) async throws(RPCError) -> Response {
        let envelope = Envelope(
            method: method.fullName, callerUserId: call.callerUserID, sessionToken: call.sessionToken,
            idempotencyKey: call.idempotencyKey, payload: request.serializedBytes(), clientAddress: call.clientAddress,
            sessionId: call.sessionID)
        let reply = await send(envelope, deadline: call.deadline, retryable: call.idempotent || !call.idempotencyKey.isEmpty)
        return try reply.decodeReply(Response.self)
    }

    /// Pings `<service>.Ping` on the peer.
    public func ping(service: String, deadline: Duration? = nil) async throws(RPCError) -> CommonV1.PingResponse {
        try await call(CommonMethods.ping(service), CommonV1.PingRequest(), options: CallOptions(deadline: deadline, idempotent: true))
    }
}
