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
public struct MethodRouter: RequestHandler {
    public typealias Route = @Sendable (IncomingRequest, Logger) async -> Envelope

    private var routes: [String: Route] = [:]

    public init() {}

    public var methods: [String] { routes.keys.sorted() }

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
    public mutating func replace<Request, Response>(
        _ method: RPCMethod<Request, Response>,
        encoded handler: @escaping @Sendable (Request, RequestContext) async throws -> [UInt8]
    ) {
        precondition(routes[method.fullName] != nil, "\(method.fullName) is not registered")
        routes[method.fullName] = Self.route(method, handler)
    }

    private static func route<Request, Response>(
        _ method: RPCMethod<Request, Response>,
        _ answer: @escaping @Sendable (Request, RequestContext) async throws -> [UInt8]
    ) -> Route {
        { incoming, logger in
            let envelope = incoming.envelope
            let request: Request
            do {
                request = try Request(serializedBytes: envelope.payload)
            } catch {
                return envelope.reply(error: .invalidArgument("payload is not a valid \(Request.protoName)"))
            }
            // Ids are SQLite rowids: a larger number can name nothing, and would trap where a
            // store binds it as a signed integer (found by the fuzz tests: GetProfile crashed accounts).
            guard request.largestUInt64 <= UInt64(Int64.max) else {
                return envelope.reply(error: .invalidArgument("a number in the request is out of range (ids are at most \(Int64.max))"))
            }
            if method.access == .authenticated && envelope.callerUserId == 0 {
                return envelope.reply(error: .unauthenticated("\(method.fullName) needs a session"))
            }
            let context = RequestContext(
                requestID: envelope.requestId, method: envelope.method, callerUserID: envelope.callerUserId,
                idempotencyKey: envelope.idempotencyKey, deadline: incoming.deadline,
                clientAddress: envelope.clientAddress, sessionID: envelope.sessionId, logger: logger)
            do {
                return envelope.reply(payload: try await answer(request, context))
            } catch let error as RPCError {
                logger.debug("request failed", metadata: ["status": "\(error.code.name)", "detail": "\(error.message)"])
                return envelope.reply(error: error)
            } catch let refusal as any RPCErrorConvertible {
                let error = refusal.rpcError
                logger.debug("request refused", metadata: ["status": "\(error.code.name)", "detail": "\(error.message)"])
                return envelope.reply(error: error)
            } catch is CancellationError {
                return envelope.reply(error: .unavailable("the service is shutting down"))
            } catch {
                logger.error("handler threw", metadata: ["error": "\(error)"])
                return envelope.reply(error: .internal("internal error in \(method.fullName)"))
            }
        }
    }

    public func handle(_ request: IncomingRequest, logger: Logger) async -> Envelope {
        guard let route = routes[request.envelope.method] else {
            return request.envelope.reply(error: .invalidArgument("unknown method \"\(request.envelope.method)\""))
        }
        return await route(request, logger)
    }
}
