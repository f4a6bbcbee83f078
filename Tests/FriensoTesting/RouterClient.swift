public import FriensoProto
public import Logging
import Synchronization
public import Wire

/// A service called in process, with no socket and no reactor: each request is encoded,
/// dispatched exactly as a `ServiceHost` dispatches it (`RequestDispatcher`: Ping, the reply
/// cache with the service's durable store, the idempotency scope of the storage layer), and the
/// reply decoded. The same `call` as `WireClient`, so a domain's tests switch by their harness.
/// What only sockets do (deadlines, heartbeats, frame caps, the plane) has its own tests in the
/// Wire, gateway and end-to-end suites.
public final class RouterClient: RPCCalling {
    private let dispatcher: RequestDispatcher
    private let router: MethodRouter
    private let logger: Logger
    private let waiting = Mutex<[UInt64: CheckedContinuation<Envelope, Never>]>([:])
    private let nextKey = Atomic<UInt64>(0)

    public init(name: String, router: MethodRouter, replyCache: ReplyCache? = ReplyCache(), logger: Logger) {
        dispatcher = RequestDispatcher(name: name, handler: router, replyCache: replyCache)
        self.router = router
        self.logger = logger
    }

    /// `service` as its host would serve it: its router, and its replies kept in its own database.
    public convenience init<Service: FriensoService>(_ service: Service, name: String, logger: Logger) {
        self.init(name: name, router: service.router(), replyCache: ReplyCache(store: service.replyStore), logger: logger)
    }

    /// Sends a request envelope and returns the reply envelope (whose status may be an error).
    public func send(_ request: Envelope, deadline: Duration = TestDeadline.patient) async -> Envelope {
        let key = nextKey.add(1, ordering: .relaxed).newValue
        var envelope = request
        envelope.version = WireProtocol.version
        envelope.kind = .request
        envelope.requestId = key
        let incoming = IncomingRequest(local: envelope, key: key, deadline: .now.advanced(by: deadline))
        let dispatcher = dispatcher, logger = logger
        return await withCheckedContinuation { continuation in
            waiting.withLock { $0[key] = continuation }
            Task {
                await dispatcher.dispatch(incoming, logger: logger) { key, reply in
                    self.waiting.withLock { $0.removeValue(forKey: key) }?.resume(returning: reply)
                }
            }
        }
    }

    /// Calls a typed method, as `WireClient.call` does.
    public func call<Request, Response>(
        _ method: RPCMethod<Request, Response>, _ request: Request, options: CallOptions = CallOptions()
    ) async throws(RPCError) -> Response {
        let envelope = Envelope(
            method: method.fullName, callerUserId: options.callerUserID, idempotencyKey: options.idempotencyKey,
            payload: request.serializedBytes(), clientAddress: options.clientAddress, sessionId: options.sessionID)
        return try await send(envelope, deadline: options.deadline ?? TestDeadline.patient).decodeReply(Response.self)
    }

    /// Applies a keyed mutation as a host would up to its commit, then "dies": the reply is
    /// neither saved nor kept, as when the process is killed between the commit and the reply.
    /// A retry of the request after a restart finds only its claim (and gets the dry run).
    public func callThenLoseTheReply<Request, Response>(
        _ method: RPCMethod<Request, Response>, _ request: Request, options: CallOptions
    ) async throws(RPCError) -> Response {
        precondition(!options.idempotencyKey.isEmpty, "only a keyed mutation leaves a claim")
        let envelope = Envelope(
            version: WireProtocol.version, kind: .request, requestId: nextKey.add(1, ordering: .relaxed).newValue,
            method: method.fullName, callerUserId: options.callerUserID, idempotencyKey: options.idempotencyKey,
            payload: request.serializedBytes(), clientAddress: options.clientAddress, sessionId: options.sessionID)
        let (key, digest) = ReplyCache.key(for: envelope)
        let incoming = IncomingRequest(local: envelope, key: envelope.requestId, deadline: .now.advanced(by: options.deadline ?? TestDeadline.patient))
        let router = router, logger = logger
        let reply = await IdempotencyScope.$current.withValue(IdempotencyScope(key: key, digest: digest, dryRun: false)) {
            await router.handle(incoming, logger: logger)
        }
        return try reply.decodeReply(Response.self)
    }

    /// Waits for the replies still being saved (after their mutation committed and the caller
    /// was answered), as a host's graceful stop does: a test that "restarts" the service on the
    /// same folder calls it first, or a retry may find only the claim (and be answered
    /// ALREADY_EXISTS, as after a kill -9 in that moment).
    public func flush() async {
        await dispatcher.flush()
    }

    public func ping(service: String) async throws(RPCError) -> CommonV1.PingResponse {
        try await call(CommonMethods.ping(service), CommonV1.PingRequest())
    }
}
