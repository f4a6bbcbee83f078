import Foundation
import NIOCore
import NIOHTTP1
import NIOHTTP2
import NIOPosix
import NIOSSL
import NIOTLS
public import Synchronization

/// A test certificate authority and a server certificate it signed for 127.0.0.1 and localhost,
/// made with Debian's openssl in a temporary folder. Clients trust `caFile`.
public struct TestCA: Sendable {
    public let directory: String
    public var caFile: String { "\(directory)/ca.crt" }
    public var certificateFile: String { "\(directory)/server.crt" }
    public var keyFile: String { "\(directory)/server.key" }

    public static func make(in directory: String) async throws -> TestCA {
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        try "subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\nbasicConstraints=CA:FALSE\n"
            .write(toFile: "\(directory)/server.ext", atomically: true, encoding: .utf8)
        let steps: [[String]] = [
            ["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-days", "2", "-keyout", "\(directory)/ca.key",
             "-out", "\(directory)/ca.crt", "-subj", "/CN=Frienso test CA", "-addext", "basicConstraints=critical,CA:TRUE",
             "-addext", "keyUsage=critical,keyCertSign,cRLSign"],
            ["req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout", "\(directory)/server.key",
             "-out", "\(directory)/server.csr", "-subj", "/CN=localhost"],
            ["x509", "-req", "-in", "\(directory)/server.csr", "-CA", "\(directory)/ca.crt", "-CAkey", "\(directory)/ca.key", "-CAcreateserial",
             "-days", "2", "-out", "\(directory)/server.crt", "-extfile", "\(directory)/server.ext"],
        ]
        for args in steps { try await OpenSSL.run(args) }
        return TestCA(directory: directory)
    }
}

/// Debian's openssl, for test keys and certificates.
public enum OpenSSL {
    public static func run(_ args: [String]) async throws {
        let made = try await ProcessHarness.run("/usr/bin/openssl", args)
        guard made.status == 0 else { throw FakeServerError("openssl \(args.first ?? ""): \(made.output)") }
    }

    /// A new private key in PKCS#8 PEM: "RSA" (2048 bits) or "EC" (P-256). - Returns: (private, public) PEM.
    public static func key(_ algorithm: String, in directory: String, name: String) async throws -> (privatePEM: String, publicPEM: String) {
        let file = "\(directory)/\(name).pem"
        try await run(["genpkey", "-algorithm", algorithm] + (algorithm == "RSA" ? ["-pkeyopt", "rsa_keygen_bits:2048"] : ["-pkeyopt", "ec_paramgen_curve:P-256"])
                      + ["-out", file])
        try await run(["pkey", "-in", file, "-pubout", "-out", "\(directory)/\(name).pub"])
        return (try String(contentsOfFile: file, encoding: .utf8), try String(contentsOfFile: "\(directory)/\(name).pub", encoding: .utf8))
    }
}

public struct FakeServerError: Error, CustomStringConvertible {
    public let description: String
    public init(_ description: String) { self.description = description }
}

/// One request as the fake server received it.
public struct RecordedRequest: Sendable {
    public var method: String
    public var path: String
    /// HTTP/1.1 or HTTP/2 (as the TLS handshake negotiated it).
    public var version: String
    public var headers: [(String, String)]
    public var body: [UInt8]

    public func header(_ name: String) -> String? {
        headers.first { $0.0.lowercased() == name.lowercased() }?.1
    }

    public var text: String { String(decoding: body, as: UTF8.self) }

    public var json: [String: Any]? {
        (try? JSONSerialization.jsonObject(with: Data(body))) as? [String: Any]
    }

    /// An `application/x-www-form-urlencoded` body's fields.
    public var form: [String: String] {
        var out: [String: String] = [:]
        for pair in text.split(separator: "&") {
            let parts = pair.split(separator: "=", maxSplits: 1).map { String($0).replacingOccurrences(of: "+", with: " ").removingPercentEncoding ?? "" }
            out[parts[0]] = parts.count > 1 ? parts[1] : ""
        }
        return out
    }
}

/// What the fake server answers.
public struct FakeResponse: Sendable {
    public var status: Int
    public var headers: [(String, String)]
    public var body: [UInt8]

    public init(status: Int, headers: [(String, String)] = [], json: [String: Any]? = nil) {
        self.status = status
        self.headers = headers + (json == nil ? [] : [("content-type", "application/json")])
        body = json.map { (try? JSONSerialization.data(withJSONObject: $0, options: [.sortedKeys])).map(Array.init) ?? [] } ?? []
    }
}

/// A local HTTPS server, TLS from a `TestCA`, for the delivery providers' tests: HTTP/1.1, or
/// HTTP/2 only (ALPN `h2` and nothing else, as APNs). Every request is recorded and answered by
/// `respond` (which checks it as the provider's documentation says and answers as it does).
public final class FakeProviderServer: Sendable {
    public enum HTTPKind: Sendable { case http1, http2 }

    private let channel: any Channel
    public let port: Int
    private let log = Mutex<[RecordedRequest]>([])
    /// Handshakes refused because the client did not offer HTTP/2 (an HTTP/2-only server).
    public let refusedHandshakes = Atomic<Int>(0)
    public var baseURL: String { "https://127.0.0.1:\(port)" }

    public static func start(ca: TestCA, protocol kind: HTTPKind,
                             respond: @escaping @Sendable (RecordedRequest) -> FakeResponse) async throws -> FakeProviderServer {
        var tls = TLSConfiguration.makeServerConfiguration(
            certificateChain: try NIOSSLCertificate.fromPEMFile(ca.certificateFile).map { .certificate($0) },
            privateKey: .privateKey(try NIOSSLPrivateKey(file: ca.keyFile, format: .pem)))
        tls.applicationProtocols = kind == .http2 ? ["h2"] : ["http/1.1"]
        let context = try NIOSSLContext(configuration: tls)
        let box = ServerBox()
        let connections = Connections()
        let bootstrap = ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(.backlog, value: 64)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { channel in
                connections.add(channel)
                return channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(NIOSSLServerHandler(context: context))
                }.flatMap {
                    switch kind {
                    case .http1:
                        return channel.pipeline.configureHTTPServerPipeline().flatMapThrowing {
                            try channel.pipeline.syncOperations.addHandler(RequestHandler(version: "HTTP/1.1", box: box, respond: respond))
                        }
                    case .http2:
                        return channel.eventLoop.makeCompletedFuture { try channel.pipeline.syncOperations.addHandler(ApplicationProtocolNegotiationHandler { result, channel in
                            guard case .negotiated("h2") = result else {
                                box.server?.refusedHandshakes.add(1, ordering: .relaxed)
                                return channel.close()
                            }
                            return channel.configureHTTP2Pipeline(mode: .server) { stream in
                                stream.eventLoop.makeCompletedFuture {
                                    try stream.pipeline.syncOperations.addHandlers([HTTP2FramePayloadToHTTP1ServerCodec(),
                                                                                    RequestHandler(version: "HTTP/2", box: box, respond: respond)])
                                }
                            }.map { _ in }
                        }) }
                    }
                }
            }
        let channel = try await bootstrap.bind(host: "127.0.0.1", port: 0).get()
        let server = FakeProviderServer(channel: channel, port: channel.localAddress?.port ?? 0, connections: connections)
        box.server = server
        return server
    }

    private let connections: Connections

    private init(channel: any Channel, port: Int, connections: Connections) {
        self.channel = channel
        self.port = port
        self.connections = connections
    }

    fileprivate func record(_ request: RecordedRequest) {
        log.withLock { $0.append(request) }
    }

    /// Every request so far, in arrival order.
    public var requests: [RecordedRequest] { log.withLock { $0 } }

    /// Stops listening and closes every connection (a client's kept-alive one too).
    public func stop() async {
        try? await channel.close()
        for connection in connections.all { try? await connection.close() }
    }
}

private final class Connections: Sendable {
    private let list = Mutex<[any Channel]>([])
    func add(_ channel: any Channel) { list.withLock { $0.append(channel) } }
    var all: [any Channel] { list.withLock { $0 } }
}

private final class ServerBox: @unchecked Sendable {
    private let lock = Mutex<FakeProviderServer?>(nil)
    var server: FakeProviderServer? {
        get { lock.withLock { $0 } }
        set { lock.withLock { $0 = newValue } }
    }
}

private final class RequestHandler: ChannelInboundHandler, @unchecked Sendable {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    let version: String
    let box: ServerBox
    let respond: @Sendable (RecordedRequest) -> FakeResponse
    var head: HTTPRequestHead?
    var body: [UInt8] = []

    init(version: String, box: ServerBox, respond: @escaping @Sendable (RecordedRequest) -> FakeResponse) {
        self.version = version
        self.box = box
        self.respond = respond
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let h):
            head = h
            body = []
        case .body(var buffer):
            body += buffer.readBytes(length: buffer.readableBytes) ?? []
        case .end:
            guard let head else { return }
            let request = RecordedRequest(method: "\(head.method.rawValue)", path: head.uri, version: version,
                                          headers: head.headers.map { ($0.name, $0.value) }, body: body)
            box.server?.record(request)
            let answer = respond(request)
            var headers = HTTPHeaders(answer.headers)
            headers.replaceOrAdd(name: "content-length", value: "\(answer.body.count)")
            let responseHead = HTTPResponseHead(version: head.version, status: HTTPResponseStatus(statusCode: answer.status), headers: headers)
            context.write(wrapOutboundOut(.head(responseHead)), promise: nil)
            if !answer.body.isEmpty {
                context.write(wrapOutboundOut(.body(.byteBuffer(ByteBuffer(bytes: answer.body)))), promise: nil)
            }
            context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
            self.head = nil
        }
    }
}
