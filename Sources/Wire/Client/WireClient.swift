public import FriensoProto
import Foundation
public import Logging
import Synchronization

/// A Lazy Pirate client for one peer: a DEALER socket on its own thread, any number of calls in
/// flight, a deadline on every call, heartbeats, and a reopened socket when the peer goes silent
/// (kept, though, while a call that cannot be resent waits for its reply). A call never hangs: it ends with the reply, DEADLINE_EXCEEDED (peer alive but slow) or
/// UNAVAILABLE (peer silent or down) by its deadline.
///
/// Given several instances of the peer (an `EndpointList`), it keeps one such socket per
/// instance and spreads calls over the instances that answer, in turn. An instance that goes
/// silent is out of the turn within its dead window (`ClientOptions.deadAfter`); its calls that
/// may be resent (idempotent, or with an idempotency key) and those it never sent go to another
/// instance; it is back in the turn when it answers a heartbeat again.
public final class WireClient: Sendable {
    /// The peer's endpoint as given (a list when it has several instances).
    public let endpoint: String
    public let endpoints: [String]
    public let options: ClientOptions
    /// Events the peer pushed, and reconnections (after which subscriptions must be renewed).
    public let events: AsyncStream<ClientEvent>
    public let reactor: Reactor
    /// One per instance.
    private let queues: [CommandQueue<ClientCommand>]
    private let slots: [ClientLoop.Slot]
    private let health: [ClientLoop.Health]
    private let finished: [OneShot<Void>]
    private let turn = Atomic<Int>(0)
    private let nextRequestID = Atomic<UInt64>(0)

    /// Connects (in the background: the first call waits for the connection within its deadline).
    /// - Parameters:
    ///   - endpoint: the peer's endpoint, or its instances' (`EndpointList`).
    ///   - reactor: the event loop that owns the sockets. Callers running on it (as handlers of
    ///     a host on the same reactor do) send and resume without a thread hop.
    public init(endpoint: String, options: ClientOptions = ClientOptions(), logger: Logger,
                context: ZMQContext = .shared, reactor: Reactor = .shared) {
        self.endpoint = endpoint
        let listed = EndpointList.split(endpoint)
        let endpoints = listed.isEmpty ? [endpoint] : listed
        self.endpoints = endpoints
        self.options = options
        self.reactor = reactor
        let queues = endpoints.map { _ in CommandQueue<ClientCommand>(reactor: reactor) }
        let slots = endpoints.map { _ in ClientLoop.Slot() }
        let finished = endpoints.map { _ in OneShot<Void>() }
        // Made here, so callers can choose an instance before the reactor has made the loops.
        let health = endpoints.map { _ in ClientLoop.Health() }
        self.queues = queues
        self.slots = slots
        self.finished = finished
        self.health = health
        let (events, continuation) = AsyncStream.makeStream(of: ClientEvent.self, bufferingPolicy: .bufferingNewest(10_000))
        self.events = events
        reactor.execute {
            for index in endpoints.indices {
                let loop = ClientLoop(endpoint: endpoints[index], options: options, context: context, commands: queues[index],
                                      events: continuation, logger: logger, finished: finished[index], slot: slots[index],
                                      health: health[index], watchesConnection: slots.count > 1)
                if slots.count > 1 {
                    loop.handOff = { request in
                        for offset in 1..<slots.count {
                            let other = (index + offset) % slots.count
                            if let peer = slots[other].loop, peer.isAnswering {
                                peer.adopt(request)
                                return true
                            }
                        }
                        return false
                    }
                }
                slots[index].loop = loop
                reactor.register(loop)
            }
        }
    }

    deinit {
        for queue in queues { queue.post(.stop) }
    }

    /// Stops the socket thread; calls in flight end with UNAVAILABLE.
    public func close() async {
        for queue in queues { queue.post(.stop) }
        for done in finished { await done.value }
    }

    /// The instance the next call goes to: the next in turn that answers (any, when none does).
    private func chooseInstance() -> Int {
        let count = queues.count
        guard count > 1 else { return 0 }
        let start = turn.add(1, ordering: .relaxed).newValue
        for offset in 0..<count {
            let index = (start + offset) % count
            if health[index].answering.load(ordering: .relaxed) { return index }
        }
        return start % count
    }

    /// How many instances answer now, as this client knows it.
    public var answeringInstances: Int {
        health.filter { $0.answering.load(ordering: .relaxed) }.count
    }

    /// Sends a request envelope and returns the reply envelope (whose status may be an error).
    /// The request id is assigned here.
    ///
    /// The request is taken, not copied (`consuming`, as in `sendOnReactor`): a caller's last use
    /// of it moves it into the call. A copy of an envelope retains its seven strings and arrays,
    /// and its destruction releases them: about 400 instructions each (issue 16, item 104).
    public nonisolated(nonsending) func send(_ request: consuming Envelope, deadline: Duration? = nil, retryable: Bool = false) async -> Envelope {
        await send(request, from: .now, deadline: deadline, retryable: retryable)
    }

    /// `send`, its deadline counted from `start` (a typed call's, read once for both).
    private nonisolated(nonsending) func send(_ request: consuming Envelope, from start: Moment, deadline: Duration?, retryable: Bool) async -> Envelope {
        let id = nextID()
        if Task.isCancelled { return stamped(request, id: id).reply(error: .unavailable("call cancelled")) }
        let until = start.advanced(by: deadline ?? options.defaultDeadline)
        let instance = chooseInstance()
        let commands = queues[instance], slot = slots[instance], reactor = reactor, queues = queues
        // The request moves into the call here, outside the closures: one they captured would be
        // copied into it.
        let call = ClientLoop.Pending(envelope: stamped(request, id: id), deadline: until, retryable: retryable)
        return await withTaskCancellationHandler {
            await withResumedOnce { (continuation: ReplyContinuation) in
                call.resumes(continuation)
                // A caller on this client's reactor (a task preferring it, a handler of a host
                // on it) hands the call to its loop now: taken without the queue's hand-over,
                // and a full batch goes out at once, while the turn's other callers run, instead
                // of every call of the turn at its end (issue 16, item 164).
                if reactor.isCurrent, let loop = slot.loop {
                    loop.callNow(call)
                } else if !commands.post(.call(call)) {
                    continuation.resume(returning: call.envelope.reply(error: .unavailable("client closed")))
                }
            }
        } onCancel: {
            // The call may have moved to another instance's loop.
            for queue in queues { queue.post(.cancel(id)) }
        }
    }

    /// Sends a request from code running on this client's reactor thread (a host's
    /// `ReactorRequestHandler` sharing the reactor, as the gateway's does): the request goes to
    /// libzmq now, and `completion` is called on this thread with the reply or the client's
    /// error (UNAVAILABLE, DEADLINE_EXCEEDED), exactly once, as `send` would return them. No task,
    /// no continuation, no hand-over between threads. `completion` must not call this client.
    /// - Returns: false, having sent nothing, when called off this client's reactor thread or
    ///   before its socket exists; the caller then takes the async path (`send`).
    public func sendOnReactor(_ request: consuming Envelope, deadline: Duration? = nil, retryable: Bool = false,
                              completion: @escaping (Envelope) -> Void) -> Bool {
        callOnReactor(request, deadline: deadline, retryable: retryable, completion: .call(completion))
    }

    /// `sendOnReactor` for a caller that passes the reply on (the gateway): `completion` is
    /// handed the reply's status, message and payload where the reply lies in libzmq's memory,
    /// for a `ReactorReply.relay` inside the completion, with nothing decoded (`RelayedReply`).
    public func relayOnReactor(_ request: consuming Envelope, deadline: Duration? = nil, retryable: Bool = false,
                               completion: @escaping (RelayedReply) -> Void) -> Bool {
        callOnReactor(request, deadline: deadline, retryable: retryable, completion: .relay(completion))
    }

    private func callOnReactor(_ request: consuming Envelope, deadline: Duration?, retryable: Bool, completion: ClientLoop.Pending.Completion) -> Bool {
        guard reactor.isCurrent, let loop = slots[chooseInstance()].loop else { return false }
        let until = Moment.now.advanced(by: deadline ?? options.defaultDeadline)
        loop.callNow(ClientLoop.Pending(envelope: stamped(request, id: nextID()), deadline: until, retryable: retryable,
                                        completion: completion))
        return true
    }

    /// Whether `sendOnReactor` would send now: on this client's reactor thread, its socket made.
    public var canSendOnReactor: Bool { reactor.isCurrent && slots.allSatisfy { $0.loop != nil } }

    /// This client's next request id.
    private func nextID() -> UInt64 { nextRequestID.add(1, ordering: .relaxed).newValue }

    /// A request with this client's protocol version, kind and the request id `id`.
    private func stamped(_ request: consuming Envelope, id: UInt64) -> Envelope {
        var request = request
        request.version = WireProtocol.version
        request.kind = .request
        request.requestId = id
        return request
    }

    /// Calls a typed method. A read (`frienso:read`), an idempotent call or a keyed one may be
    /// sent again (after the peer went silent, or to another instance). Its time and status, as
    /// the caller sees them, go to `PeerCallMetrics`.
    /// - Throws: `RPCError` with the reply's status, or UNAVAILABLE / DEADLINE_EXCEEDED from the client.
    public nonisolated(nonsending) func call<Request, Response>(
        _ method: RPCMethod<Request, Response>, _ request: Request, options call: CallOptions = CallOptions()
    ) async throws(RPCError) -> Response {
        let envelope = Envelope(
            method: method.fullName, callerUserId: call.callerUserID, sessionToken: call.sessionToken,
            idempotencyKey: call.idempotencyKey, payload: request.serializedBytes(), clientAddress: call.clientAddress,
            sessionId: call.sessionID)
        let started = Moment.now
        let reply = await send(envelope, from: started, deadline: call.deadline, retryable: call.mayResend(method))
        // A call its caller gave up (its task cancelled: the client answers it UNAVAILABLE) says
        // nothing of the peer: not recorded, or a retried helpNow, whose lookups are cancelled
        // unread, would read as social and geo failing.
        if !Task.isCancelled {
            options.metrics.record(method: method.fullName, status: reply.status,
                                   afterNanoseconds: Moment.now.nanoseconds - started.nanoseconds)
        }
        return try reply.decodeReply(Response.self)
    }

    /// Pings `<service>.Ping` on the peer.
    public func ping(service: String, deadline: Duration? = nil) async throws(RPCError) -> CommonV1.PingResponse {
        try await call(CommonMethods.ping(service), CommonV1.PingRequest(), options: CallOptions(deadline: deadline))
    }
}
