import AsyncHTTPClient
import Foundation
public import FriensoProto
import NIOCore
import NIOHTTP1
import NIOSSL

/// A small HTTP client for tests of the edge (AsyncHTTPClient underneath): one call, the whole
/// reply in memory.
public enum HTTP {
    public struct Reply: Sendable {
        public var status: Int
        public var headers: [(String, String)]
        public var body: [UInt8]

        public func header(_ name: String) -> String? {
            headers.first { $0.0.lowercased() == name.lowercased() }?.1
        }

        public var text: String { String(decoding: body, as: UTF8.self) }

        /// The body as JSON. - Throws: when it is not.
        public func json() throws -> JSONValue { try JSONParser.parse(body) }
    }

    public static func get(_ url: String, headers: [(String, String)] = [], timeout: Duration = .seconds(30)) async throws -> Reply {
        try await send("GET", url, headers: headers, body: nil, timeout: timeout)
    }

    public static func post(_ url: String, json: String, token: String? = nil, headers: [(String, String)] = []) async throws -> Reply {
        var all = headers + [("Content-Type", "application/json")]
        if let token { all.append(("Authorization", "Bearer \(token)")) }
        return try await send("POST", url, headers: all, body: Array(json.utf8))
    }

    /// - Parameters:
    ///   - trusting: a PEM certificate to trust for `https` (a test's own), else the system's roots.
    ///   - http1Only: offer only HTTP/1.1 in the TLS handshake (ALPN), never HTTP/2.
    public static func send(_ method: String, _ url: String, headers: [(String, String)] = [], body: [UInt8]?,
                            trusting certificate: String? = nil, http1Only: Bool = false, timeout: Duration = .seconds(30)) async throws -> Reply {
        var request = HTTPClientRequest(url: url)
        request.method = HTTPMethod(rawValue: method)
        for (name, value) in headers { request.headers.add(name: name, value: value) }
        if let body { request.body = .bytes(ByteBuffer(bytes: body)) }
        var client = HTTPClient.shared
        if let certificate {
            var tls = TLSConfiguration.makeClientConfiguration()
            tls.trustRoots = .certificates(try NIOSSLCertificate.fromPEMFile(certificate))
            var configuration = HTTPClient.Configuration(tlsConfiguration: tls)
            if http1Only { configuration.httpVersion = .http1Only }
            client = HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration)
        }
        defer { if certificate != nil { Task { [client] in try? await client.shutdown() } } }
        let response = try await client.execute(request, timeout: .init(timeout))
        let collected = try await response.body.collect(upTo: 64 << 20)
        return Reply(status: Int(response.status.code), headers: response.headers.map { ($0.name, $0.value) },
                     body: Array(collected.readableBytesView))
    }
}
