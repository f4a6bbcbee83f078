public import FriensoProto
public import Logging

/// An error that knows the status a client should get: a store's domain refusal ("the circle is
/// full"), made to conform where the service maps its rules to statuses, so the store itself
/// needs no status codes (and no Wire).
public protocol RPCErrorConvertible: Error {
    var rpcError: RPCError { get }
}

/// The usual `RequestHandler`: a table from method name to a typed handler.
/// Decodes the request (INVALID_ARGUMENT when it cannot, or when an unsigned 64-bit field is past
/// `Int64.max`), refuses authenticated methods without a
/// caller (UNAUTHENTICATED), maps a thrown `RPCError` to its status and anything else to INTERNAL
/// (logged, never shown to the caller).
///
/// The registering methods and the routes' steps are inlinable: a route is a closure made for
/// one method's request and response types, and made here, unspecialized, each request it
/// served asked the Swift runtime for the metadata of its generic values (the decoded request
/// and context, the handler's `Result`): about four lookups a request, 2,000 instructions, on
/// geo's reactor thread (`docs/benchmarks.md`, issue 16, item 135). Inlined into the service
/// that registers them, the closures are specialized for its types.
public struct MethodRouter: RequestHandler {
    public typealias Route = @Sendable (IncomingRequest, Logger) async -> Envelope

    /// By method (`MethodTable`: a method this build knows found by its ordinal, unhashed).
    @usableFromInline var routes = MethodTable<Route>()

    public init() {}

    public var methods: [String] { routes.names.sorted() }

    @inlinable
    public mutating func register<Request, Response>(
        _ method: RPCMethod<Request, Response>,
        _ handler: @escaping @Sendable (Request, RequestContext) async throws -> Response
    ) {
        precondition(routes[method.fullName] == nil, "\(method.fullName) registered twice")
        routes[method.fullName] = Self.route(method) { request, context in try await handler(request, context).serializedBytes() }
    }

    /// Replaces `method`'s handler with one that answers already-encoded `Response` bytes (a
    /// service that caches its encoded replies: social's friend lists). Everything else (decoding,
    /// checks, errors) is as `register`'s.
    @inlinable
    public mutating func replace<Request, Response>(
        _ method: RPCMethod<Request, Response>,
        encoded handler: @escaping @Sendable (Request, RequestContext) async throws -> [UInt8]
    ) {
        precondition(routes[method.fullName] != nil, "\(method.fullName) is not registered")
        routes[method.fullName] = Self.route(method, handler)
    }

    /// Handlers that never suspend (reads from memory), answered on the host's reactor thread as
    /// the request comes off the socket: no task and no hand-over per request
    /// (`ReactorRequestHandler`). The same method also stays on the task path, for callers that
    /// dispatch in process.
    @inlinable
    public mutating func answerOnReactor<Request, Response>(
        _ method: RPCMethod<Request, Response>,
        _ handler: @escaping @Sendable (Request, RequestContext) throws -> Response
    ) {
        precondition(routes[method.fullName] != nil, "\(method.fullName) is not registered")
        let answer: @Sendable (IncomingRequest, Logger) -> Envelope = { incoming, logger in
            Self.answer(method, incoming, logger) { request, context in try handler(request, context).serializedBytes() }
        }
        reactorRoutes[method.fullName] = .now(answer)
        routes[method.fullName] = { incoming, logger in answer(incoming, logger) }
    }

    /// Handlers that start on the host's reactor thread and answer once, later, from any thread
    /// (`done`): a write that waits for its group commit, with no task and no hand-over per
    /// request on the way in or out (the reply goes to the loop's command queue from the commit's
    /// thread: `LaterReply`). What runs before `done` must not block. Only requests the host
    /// offers the reactor come here: without an idempotency key while it keeps replies, unless
    /// `keyed`; in-process callers take `method`'s registered handler on a task.
    ///
    /// - Parameter keyed: keyed requests start here too, for a method that claims first
    ///   (`claimFirst`): the host runs the reply cache's steps that need no store read on the
    ///   reactor (a reply kept in memory replayed, a duplicate in flight waiting for the first,
    ///   a key reused for another request refused) and hands the handler the request's scope as
    ///   `context.idempotency`, which it must pass to its store write (there is no task to bind
    ///   it to). A write that meets an earlier run's claim goes on as on a task (the store read,
    ///   a dry run). Whatever the handler cannot do without suspending, it does on a task of its
    ///   own with the scope bound.
    @inlinable
    public mutating func startOnReactor<Request, Response>(
        _ method: RPCMethod<Request, Response>, keyed: Bool = false,
        _ handler: @escaping @Sendable (Request, RequestContext, _ done: @escaping @Sendable (Result<Response, any Error>) -> Void) -> Void
    ) {
        precondition(routes[method.fullName] != nil, "\(method.fullName) is not registered")
        precondition(!keyed || claimsFirst(method.fullName), "\(method.fullName) starts keyed requests on the reactor: it must claim first")
        if keyed { keyedOnReactor[method.fullName] = true }
        reactorRoutes[method.fullName] = .later { incoming, logger, scope, reply in
            let request: Request
            var context: RequestContext
            switch Self.prepare(method, incoming, logger) {
            case .success(let prepared): (request, context) = prepared
            case .failure(let refusal): return reply(refusal.envelope)
            }
            context.idempotency = scope
            let envelope = incoming.envelope, label = RequestScope.current
            handler(request, context) { result in
                switch result {
                case .success(let response):
                    // The reply its write made durable with it, when it did (`IdempotencyScope.reply(payload:)`).
                    reply(scope?.claims.keptReply ?? envelope.reply(payload: response.serializedBytes()))
                case .failure(let error):
                    reply(RequestScope.$current.withValue(label) { Self.reply(to: envelope, method.fullName, error, logger) })
                }
            }
        }
    }

    /// Lets a keyed request for `method` run before the reply cache reads the durable store:
    /// the claim of its first write refuses a request applied before (after a restart, or on
    /// another instance), and only then is the store read, for the reply to give back. Every
    /// other keyed request pays a read transaction before it starts (issue 16, item 54: a fifth
    /// of geo's CPU per check-in). For a handler whose first effect is its store write through
    /// `ServiceDatabase` (which claims): what it does before must be reads, or must come after
    /// `IdempotencyScope.confirmFirstRun()`, which reads the store first when it has to.
    public mutating func claimFirst<Request, Response>(_ method: RPCMethod<Request, Response>) {
        precondition(routes[method.fullName] != nil, "\(method.fullName) is not registered")
        claimingFirst[method.fullName] = true
    }

    @usableFromInline var claimingFirst = MethodTable<Bool>()

    public func claimsFirst(_ method: String) -> Bool { claimingFirst[method] ?? false }

    /// Methods whose keyed requests start on the reactor (`startOnReactor(_:keyed:_:)`).
    @usableFromInline var keyedOnReactor = MethodTable<Bool>()

    /// How a method is answered on the reactor: at once (`answerOnReactor`), or later from any
    /// thread (`startOnReactor`).
    @usableFromInline
    enum ReactorRoute: Sendable {
        case now(@Sendable (IncomingRequest, Logger) -> Envelope)
        case later(@Sendable (IncomingRequest, Logger, IdempotencyScope?, LaterReply) -> Void)
    }
    @usableFromInline var reactorRoutes = MethodTable<ReactorRoute>()

    @inlinable
    static func route<Request, Response>(
        _ method: RPCMethod<Request, Response>,
        _ answer: @escaping @Sendable (Request, RequestContext) async throws -> [UInt8]
    ) -> Route {
        { incoming, logger in
            let request: Request, context: RequestContext
            switch prepare(method, incoming, logger) {
            case .success(let prepared): (request, context) = prepared
            case .failure(let refusal): return refusal.envelope
            }
            do {
                return incoming.envelope.reply(payload: try await answer(request, context))
            } catch {
                return reply(to: incoming.envelope, method.fullName, error, logger)
            }
        }
    }

    /// The reactor path's `route`: the same steps, synchronously.
    @inlinable
    static func answer<Request, Response>(
        _ method: RPCMethod<Request, Response>, _ incoming: IncomingRequest, _ logger: Logger,
        _ answer: (Request, RequestContext) throws -> [UInt8]
    ) -> Envelope {
        let request: Request, context: RequestContext
        switch prepare(method, incoming, logger) {
        case .success(let prepared): (request, context) = prepared
        case .failure(let refusal): return refusal.envelope
        }
        do {
            return incoming.envelope.reply(payload: try answer(request, context))
        } catch {
            return reply(to: incoming.envelope, method.fullName, error, logger)
        }
    }

    @usableFromInline
    struct Refusal: Error {
        @usableFromInline let envelope: Envelope
        @usableFromInline init(envelope: Envelope) { self.envelope = envelope }
    }

    /// Decodes the request (INVALID_ARGUMENT when it cannot, or when an unsigned 64-bit field is
    /// past `Int64.max`) and refuses an authenticated method without a caller (UNAUTHENTICATED).
    @inlinable
    static func prepare<Request, Response>(
        _ method: RPCMethod<Request, Response>, _ incoming: IncomingRequest, _ logger: Logger
    ) -> Result<(Request, RequestContext), Refusal> {
        let envelope = incoming.envelope
        let request: Request
        do {
            request = try Request(serializedBytes: envelope.payload)
        } catch {
            return .failure(Refusal(envelope: envelope.reply(error: .invalidArgument("payload is not a valid \(Request.protoName)"))))
        }
        // Ids are SQLite rowids: a larger number can name nothing, and would trap where a
        // store binds it as a signed integer (found by the fuzz tests: GetProfile crashed accounts).
        guard request.largestUInt64 <= UInt64(Int64.max) else {
            return .failure(Refusal(envelope: envelope.reply(error: .invalidArgument(
                "a number in the request is out of range (ids are at most \(Int64.max))"))))
        }
        if method.access == .authenticated && envelope.callerUserId == 0 {
            return .failure(Refusal(envelope: envelope.reply(error: .unauthenticated("\(method.fullName) needs a session"))))
        }
        return .success((request, context(incoming, logger)))
    }

    /// The context of a request `prepare` accepted.
    @usableFromInline
    static func context(_ incoming: IncomingRequest, _ logger: Logger) -> RequestContext {
        let envelope = incoming.envelope
        return RequestContext(
            requestID: envelope.requestId, method: envelope.method, callerUserID: envelope.callerUserId,
            idempotencyKey: envelope.idempotencyKey, deadline: incoming.deadline,
            clientAddress: envelope.clientAddress, sessionID: envelope.sessionId, logger: logger,
            idempotency: IdempotencyScope.current)
    }

    /// A thrown `RPCError` as its status, a domain refusal as the status it names, anything else
    /// as INTERNAL (logged, never shown to the caller).
    @usableFromInline
    static func reply(to envelope: Envelope, _ method: String, _ error: any Error, _ logger: Logger) -> Envelope {
        switch error {
        case let error as RPCError:
            logger.debug("request failed", metadata: ["status": "\(error.code.name)", "detail": "\(error.message)"])
            return envelope.reply(error: error)
        case let refusal as any RPCErrorConvertible:
            let error = refusal.rpcError
            logger.debug("request refused", metadata: ["status": "\(error.code.name)", "detail": "\(error.message)"])
            return envelope.reply(error: error)
        case is CancellationError:
            return envelope.reply(error: .unavailable("the service is shutting down"))
        default:
            logger.error("handler threw", metadata: ["error": "\(error)"])
            return envelope.reply(error: .internal("internal error in \(method)"))
        }
    }

    public func handle(_ request: IncomingRequest, logger: Logger) async -> Envelope {
        guard let route = routes[request: request] else {
            return request.envelope.reply(error: .invalidArgument("unknown method \"\(request.envelope.method)\""))
        }
        return await route(request, logger)
    }
}

extension MethodRouter: ReactorRequestHandler {
    /// Logs like a host's handler: the request's id and method come from `RequestScope`.
    private static let reactorLogger = RequestScope.attach(to: Logger(label: "frienso"))

    public var takesRequestsOnReactor: Bool { !reactorRoutes.isEmpty }

    public func take(_ request: IncomingRequest, reply: ReactorReply) -> Bool {
        guard let route = reactorRoutes[request: request] else { return false }
        RequestScope.$current.withValue(Self.label(request)) {
            switch route {
            case .now(let answer): reply(answer(request, Self.reactorLogger))
            case .later(let start): start(request, Self.reactorLogger, nil, reply.fromAnyThread)
            }
        }
        return true
    }

    public func takesKeyedOnReactor(_ method: String) -> Bool { keyedOnReactor[method] ?? false }

    public func startKeyed(_ request: IncomingRequest, scope: IdempotencyScope, done: LaterReply) -> Bool {
        guard keyedOnReactor[request: request] ?? false, case .later(let start)? = reactorRoutes[request: request] else {
            return false
        }
        RequestScope.$current.withValue(Self.label(request)) { start(request, Self.reactorLogger, scope, done) }
        return true
    }

    private static func label(_ request: IncomingRequest) -> RequestScope.Label {
        RequestScope.Label(requestID: request.envelope.requestId, method: request.envelope.method, callerUserID: request.envelope.callerUserId)
    }
}
