import Foundation
import FriensoProto
import Gateway
import HTTPTypes
import Hummingbird
import HummingbirdWebSocket
import Logging
import NIOCore
import Wire

/// The request context of every edge route: Hummingbird's, the WebSocket upgrade's, and the
/// client's address (for the per-address rate limit before login).
struct EdgeContext: Hummingbird.RequestContext, WebSocketRequestContext {
    var coreContext: CoreRequestContextStorage
    let webSocket: WebSocketHandlerReference<EdgeContext>
    /// "ip:port" of the TCP peer, an IPv6 address in brackets ("[2001:db8::1]:443"), so the
    /// gateway finds the IP in it as in a ZeroMQ peer's address (`GatewayHandler.host(of:)`).
    let clientAddress: String

    init(source: ApplicationRequestContextSource) {
        coreContext = .init(source: source)
        webSocket = .init()
        if let address = source.channel.remoteAddress, let ip = address.ipAddress {
            clientAddress = ip.contains(":") ? "[\(ip)]:\(address.port ?? 0)" : "\(ip):\(address.port ?? 0)"
        } else {
            clientAddress = ""
        }
    }
}

extension HTTPField.Name {
    static let idempotencyKey = Self("Idempotency-Key")!
}

/// The edge's routes. Each one turns HTTP into the envelope the ZeroMQ gateway would have
/// received and hands it to the same `GatewayCore`; nothing here decides who may do what.
struct EdgeRoutes: Sendable {
    let config: EdgeConfig
    let core: GatewayCore
    let hub: EventHub
    let logger: Logger

    static let maxIdempotencyKey = 128

    func router() -> Router<EdgeContext> {
        let router = Router(context: EdgeContext.self)
        router.add(middleware: HTTPMetricsMiddleware())
        router.add(middleware: EdgeMiddleware(corsOrigins: Set(config.corsOrigins)))
        if let webRoot = config.webRoot {
            // Tried when no route matched: the web app's files, index.html at /.
            router.add(middleware: FileMiddleware(webRoot, cacheControl: .init([(MediaType(type: .any), [.noCache])]),
                                                  searchForIndexHtml: true, logger: logger))
        }
        router.get("/v1/health") { _, _ in json(.ok, .object([("status", .string("ok")), ("version", .string(FriensoVersion.current))])) }
        if let webRoot = config.webRoot {
            // A share link's page: the token stays in the address (the page's script reads it and
            // asks /v1/geo/ViewShareLink); the page itself is the same for every link.
            router.get("/s/:token") { _, _ in
                guard let page = FileManager.default.contents(atPath: "\(webRoot)/share.html") else {
                    return error(.notFound, "no share page in this deployment")
                }
                return Response(status: .ok, headers: [.contentType: "text/html; charset=utf-8", .cacheControl: "no-store"],
                                body: .init(byteBuffer: ByteBuffer(bytes: page)))
            }
        }
        router.get("/metrics") { request, _ in await metrics(request) }
        router.get("/v1/openapi.json") { _, _ in
            Response(status: .ok, headers: [.contentType: "application/json", .cacheControl: "no-cache"],
                     body: .init(byteBuffer: ByteBuffer(string: OpenAPIDocument.json)))
        }
        router.post("/v1/:service/:rpc") { request, context in try await rpc(request, context) }
        router.put("/v1/photos") { request, context in try await PhotoTransfer(routes: self).upload(request, context) }
        router.get("/v1/photos/:mediaId") { request, context in try await PhotoTransfer(routes: self).download(request, context) }
        // Reached only when the WebSocket upgrade was declined: say why.
        router.get("/v1/events") { request, _ in
            guard let token = Self.bearer(request) ?? Self.subprotocolToken(request) else {
                return error(.unauthenticated, "no session: send Authorization: Bearer <token> or the subprotocol frienso.bearer.<base64url token>")
            }
            do throws(RPCError) {
                _ = try await core.authenticate(token)
            } catch {
                return self.error(error.code, error.message)
            }
            return Self.errorResponse(status: .upgradeRequired, .failedPrecondition, "/v1/events is a WebSocket: send Upgrade: websocket")
        }
        return router
    }

    func webSocketRouter() -> Router<EdgeContext> {
        let router = Router(context: EdgeContext.self)
        let live = LiveConnection(routes: self)
        router.ws("/v1/events") { request, _ in
            await live.shouldUpgrade(request)
        } onUpgrade: { inbound, outbound, context in
            try await live.run(inbound: inbound, outbound: outbound, request: context.request)
        }
        return router
    }

    // MARK: rpc

    /// `POST /v1/<service>/<Rpc>`: the JSON body is the request message; the reply the response.
    func rpc(_ request: Request, _ context: EdgeContext) async throws -> Response {
        let service = context.parameters.get("service") ?? "", name = context.parameters.get("rpc") ?? ""
        let method = "\(service).\(name)"
        guard let codec = ProtoIndex.jsonCodecs[method] ?? (name == "Ping" && GatewayConfig.serviceNames.contains(service) ? CommonMethods.ping(service).jsonCodec : nil) else {
            return error(.notFound, "no method \(method): see /v1/openapi.json")
        }
        var request = request
        let body: ByteBuffer
        do {
            body = try await request.collectBody(upTo: config.maxJSONBytes)
        } catch {
            return Self.errorResponse(status: .contentTooLarge, .invalidArgument, "the body is larger than \(config.maxJSONBytes) bytes")
        }
        if let type = request.headers[.contentType], !type.lowercased().hasPrefix("application/json") {
            return Self.errorResponse(status: .unsupportedMediaType, .invalidArgument, "send Content-Type: application/json")
        }
        let payload: [UInt8]
        if codec.method.access == .internal {
            // Refused by the core's allow-list, as the gateway refuses it; the body is not read.
            payload = []
        } else {
            do throws(JSONMappingError) {
                let bytes = Array(body.readableBytesView)
                let json = bytes.allSatisfy { $0 == 0x20 || $0 == 0x0A || $0 == 0x0D || $0 == 0x09 } ? JSONValue.object([]) : try JSONParser.parse(bytes)
                payload = try codec.request(json)
            } catch {
                return self.error(.invalidArgument, "\(codec.requestName): \(error.description)")
            }
        }
        let reply: Envelope
        do throws(RPCError) {
            reply = try await call(method, payload: payload, request: request, context: context)
        } catch {
            return self.error(error.code, error.message)
        }
        guard reply.status == .ok else { return self.error(reply.status, reply.statusMessage) }
        guard let json = codec.response(reply.payload) else {
            logger.error("a reply that does not decode", metadata: ["method": "\(method)", "bytes": "\(reply.payload.count)"])
            return self.error(.internal, "the reply of \(method) could not be read")
        }
        return self.json(.ok, text: json)
    }

    /// One request through the core, as the client's (session, idempotency key, address).
    /// - Throws: `RPCError` for a malformed header.
    func call(_ method: String, payload: [UInt8], request: Request, context: EdgeContext,
              idempotencyKey: String? = nil) async throws(RPCError) -> Envelope {
        let key: String
        if let idempotencyKey { key = idempotencyKey } else { key = try Self.idempotencyKey(request) }
        let token = try Self.session(request)
        let envelope = Envelope(version: WireProtocol.version, kind: .request, method: method, sessionToken: token ?? "",
                                idempotencyKey: key, payload: payload)
        let incoming = IncomingRequest(frontDoor: envelope, peer: PeerIdentity(routingID: [], hasDelimiter: false),
                                       peerAddress: context.clientAddress, deadline: .now.advanced(by: config.requestTimeout))
        return await core.handle(incoming, logger: logger)
    }

    // MARK: headers

    static func idempotencyKey(_ request: Request) throws(RPCError) -> String {
        guard let key = request.headers[.idempotencyKey] else { return "" }
        guard !key.isEmpty, key.utf8.count <= maxIdempotencyKey else {
            throw .invalidArgument("Idempotency-Key: 1 to \(maxIdempotencyKey) bytes")
        }
        return key
    }

    /// The session token of `Authorization: Bearer`, nil without the header.
    /// - Throws: UNAUTHENTICATED for another scheme or an empty token.
    static func session(_ request: Request) throws(RPCError) -> String? {
        guard let header = request.headers[.authorization] else { return nil }
        guard let token = bearer(header) else { throw .unauthenticated("Authorization: use the Bearer scheme with the session token") }
        return token
    }

    static func bearer(_ request: Request) -> String? {
        request.headers[.authorization].flatMap(bearer)
    }

    /// The token of `Bearer <token>`: the scheme in any case after optional spaces, then a
    /// space, then the token without the spaces and tabs around it (HTTP's optional whitespace).
    /// Read in UTF-8, on every request: Foundation's trimming cost 2% of the edge's CPU.
    static func bearer(_ header: String) -> String? {
        let isBlank = { (byte: UInt8) in byte == UInt8(ascii: " ") || byte == UInt8(ascii: "\t") }
        let value = header.utf8.drop { $0 == UInt8(ascii: " ") }
        let scheme = "bearer".utf8
        guard value.count > scheme.count, zip(value, scheme).allSatisfy({ $0 | 0x20 == $1 }) else { return nil }
        let rest = value.dropFirst(scheme.count)
        guard rest.first == UInt8(ascii: " ") else { return nil }
        var token = rest.drop(while: isBlank)
        while let last = token.last, isBlank(last) { token = token.dropLast() }
        return token.isEmpty ? nil : String(decoding: token, as: UTF8.self)
    }

    static let subprotocol = "frienso.v1"
    static let bearerSubprotocol = "frienso.bearer."

    /// A browser cannot set headers on a WebSocket: it offers the subprotocols `frienso.v1` and
    /// `frienso.bearer.<the token in base64url>` instead.
    static func subprotocolToken(_ request: Request) -> String? {
        guard let offered = request.headers[.secWebSocketProtocol] else { return nil }
        for item in offered.split(separator: ",") {
            let value = item.trimmingCharacters(in: .whitespaces)
            guard value.hasPrefix(bearerSubprotocol) else { continue }
            // base64url, as proto3 JSON's bytes may be: the same decoder.
            guard let bytes = try? ProtoJSON.bytes(.string(String(value.dropFirst(bearerSubprotocol.count)))),
                  let token = String(validating: bytes, as: UTF8.self), !token.isEmpty else { return nil }
            return token
        }
        return nil
    }

    // MARK: responses

    func json(_ status: HTTPResponse.Status, _ value: JSONValue) -> Response {
        json(status, text: value.utf8())
    }

    /// A JSON body already written (`MethodJSONCodec.response`).
    func json(_ status: HTTPResponse.Status, text: [UInt8]) -> Response {
        Response(status: status, headers: [.contentType: "application/json", .cacheControl: "no-store"],
                 body: .init(byteBuffer: ByteBuffer(bytes: text)))
    }

    func error(_ code: StatusCode, _ message: String) -> Response {
        Self.errorResponse(status: .init(code: ErrorMapping.httpStatus(code)), code, message)
    }

    static func errorResponse(status: HTTPResponse.Status, _ code: StatusCode, _ message: String) -> Response {
        var headers: HTTPFields = [.contentType: "application/json", .cacheControl: "no-store"]
        if status == .unauthorized { headers[.wwwAuthenticate] = "Bearer" }
        return Response(status: status, headers: headers,
                        body: .init(byteBuffer: ByteBuffer(bytes: ErrorMapping.body(code, message).utf8())))
    }
}

/// On every response: CORS for the configured origins only, `nosniff`; and Hummingbird's own
/// errors (no route, a body too large) as the JSON error body every other error has.
struct EdgeMiddleware: RouterMiddleware {
    typealias Context = EdgeContext
    let corsOrigins: Set<String>

    func handle(_ request: Request, context: EdgeContext, next: (Request, EdgeContext) async throws -> Response) async throws -> Response {
        let origin = request.headers[.origin]
        let allowed = origin.map { corsOrigins.contains($0) } ?? false
        if request.method == .options, origin != nil, request.headers[.accessControlRequestMethod] != nil {
            guard allowed, let origin else {
                return EdgeRoutes.errorResponse(status: .forbidden, .permissionDenied, "origin not allowed")
            }
            var response = Response(status: .noContent)
            Self.cors(&response.headers, origin: origin)
            response.headers[.accessControlAllowMethods] = "GET, POST, PUT, OPTIONS"
            response.headers[.accessControlAllowHeaders] = "Authorization, Content-Type, Idempotency-Key, If-None-Match"
            response.headers[.accessControlMaxAge] = "600"
            return response
        }
        var response: Response
        do {
            response = try await next(request, context)
        } catch let error as HTTPError {
            let code: StatusCode = switch error.status.code {
            case 404: .notFound
            case 401: .unauthenticated
            case 403: .permissionDenied
            case 413, 400, 405, 411, 415: .invalidArgument
            case 429: .resourceExhausted
            case 503: .unavailable
            default: .internal
            }
            let message = error.body ?? (error.status.code == 404 ? "no such route: see /v1/openapi.json" : error.status.reasonPhrase)
            response = EdgeRoutes.errorResponse(status: error.status, code, message)
        }
        response.headers[.xContentTypeOptions] = "nosniff"
        if !request.uri.path.hasPrefix("/v1/") {
            // The web app: its own scripts, styles and photos only; no framing.
            response.headers[.contentSecurityPolicy] = "default-src 'self'; img-src 'self' blob: data:; connect-src 'self'; frame-ancestors 'none'"
            // A share link's token is in the page's address: never sent on to anyone.
            response.headers[HTTPField.Name("Referrer-Policy")!] = "no-referrer"
        }
        if allowed, let origin {
            Self.cors(&response.headers, origin: origin)
            response.headers[.accessControlExposeHeaders] = "ETag, Location"
        }
        return response
    }

    static func cors(_ headers: inout HTTPFields, origin: String) {
        headers[.accessControlAllowOrigin] = origin
        headers[.vary] = "Origin"
    }
}
