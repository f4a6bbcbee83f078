import ServiceKit
import Alerts
import AsyncHTTPClient
import Foundation
import Logging
import NIOCore
import NIOHTTP1
import NIOSSL
import Synchronization

/// The one HTTP client every provider shares: HTTP/1.1 or HTTP/2 as the server offers (ALPN;
/// APNs requires HTTP/2), TLS with the system's trust roots plus, when configured, an extra CA
/// file (a test CA, a corporate proxy's). Whatever the provider answers, or a transport failure,
/// comes back as a `ProviderAnswer`: nothing here throws at the caller.
public final class ProviderHTTP: Sendable {
    private let configuration: HTTPClient.Configuration
    /// Made at the first request: a deployment whose provider configuration fails its checks
    /// at start never opens one.
    private let made = Mutex<(client: HTTPClient?, closed: Bool)>((nil, false))
    let timeout: TimeAmount
    /// Bytes of a provider's answer kept (its errors are short; a huge answer is not read whole).
    static let maxAnswer = 64 << 10

    /// - Parameters:
    ///   - caFile: a PEM file of certificates trusted besides the system's (nil: the system's only).
    ///   - timeout: for a whole request (connect, send, answer).
    public init(caFile: String? = nil, timeout: Duration = .seconds(15)) throws {
        var tls = TLSConfiguration.makeClientConfiguration()
        if let caFile {
            guard FileManager.default.isReadableFile(atPath: caFile) else { throw ProviderConfigError("providerCAFile: cannot read \(caFile)") }
            // The system's roots stay trusted; the file's are added to them.
            tls.additionalTrustRoots = [.file(caFile)]
        }
        var configuration = HTTPClient.Configuration(tlsConfiguration: tls)
        configuration.httpVersion = .automatic
        configuration.redirectConfiguration = .disallow // a provider that redirects is misconfigured
        configuration.timeout = .init(connect: .seconds(5), read: .seconds(Int64(timeout.components.seconds)))
        self.configuration = configuration
        self.timeout = .seconds(Int64(timeout.components.seconds))
    }

    private var client: HTTPClient? {
        made.withLock { m in
            guard !m.closed else { return nil }
            if m.client == nil { m.client = HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration) }
            return m.client
        }
    }

    /// Closes the connections; requests after this are answered `.unreachable`.
    public func shutdown() async {
        let client = made.withLock { m -> HTTPClient? in
            m.closed = true
            defer { m.client = nil }
            return m.client
        }
        try? await client?.shutdown()
    }

    /// One request. - Returns: the provider's answer, or `.unreachable` with why.
    func send(_ method: HTTPMethod, _ url: String, headers: [(String, String)], body: [UInt8]) async -> ProviderAnswer {
        var request = HTTPClientRequest(url: url)
        request.method = method
        for (name, value) in headers { request.headers.add(name: name, value: value) }
        if !body.isEmpty { request.body = .bytes(body) }
        guard let client else { return .unreachable("the provider client is closed (alerts is stopping)") }
        do {
            let response = try await client.execute(request, timeout: timeout)
            var bytes = try await response.body.collect(upTo: Self.maxAnswer + 1)
            let kept = bytes.readBytes(length: min(bytes.readableBytes, Self.maxAnswer)) ?? []
            return .answered(status: Int(response.status.code), headers: response.headers, body: kept)
        } catch {
            return .unreachable(Self.describe(error))
        }
    }

    /// A transport error in a line an operator can act on (never with a credential in it: the
    /// request's headers are not part of any of these errors).
    static func describe(_ error: any Error) -> String {
        switch error {
        case let e as HTTPClientError where e == .deadlineExceeded || e == .readTimeout || e == .connectTimeout:
            "timed out (\(e))"
        case let e as NIOSSLError:
            "TLS: \(e)"
        default:
            "\(error)"
        }
    }
}

/// What a provider said, or that it could not be reached.
enum ProviderAnswer: Sendable {
    case answered(status: Int, headers: HTTPHeaders, body: [UInt8])
    case unreachable(String)

    /// The answer's JSON object, when it is one.
    var json: [String: Any]? {
        guard case .answered(_, _, let body) = self, !body.isEmpty else { return nil }
        return (try? JSONSerialization.jsonObject(with: Data(body))) as? [String: Any]
    }

    /// `Retry-After`, in seconds or as an HTTP date (RFC 9110 §10.2.3); nil when absent or unreadable.
    func retryAfter(now: Date = Date()) -> Duration? {
        guard case .answered(_, let headers, _) = self, let value = headers.first(name: "retry-after")?.trimmingCharacters(in: .whitespaces),
              !value.isEmpty else { return nil }
        if let seconds = Int(value), seconds >= 0 { return .seconds(seconds) }
        let format = DateFormatter()
        format.locale = Locale(identifier: "en_US_POSIX")
        format.timeZone = TimeZone(identifier: "GMT")
        format.dateFormat = "EEE, dd MMM yyyy HH:mm:ss 'GMT'"
        guard let date = format.date(from: value) else { return nil }
        return .milliseconds(max(0, Int64(date.timeIntervalSince(now) * 1_000)))
    }

    /// The answer's body as text for an error message: short, on one line.
    var excerpt: String {
        guard case .answered(_, _, let body) = self else { return "" }
        let text = String(decoding: body.prefix(300), as: UTF8.self).split(whereSeparator: \.isNewline).joined(separator: " ")
        return body.count > 300 ? text + "…" : text
    }
}

/// The classification every HTTP provider shares for answers its own rules do not cover:
/// a rate limit or a server error is tried again (at the provider's `Retry-After` when it gives
/// one), a timeout or an unreachable host too, anything else the provider refused is final.
enum HTTPOutcome {
    static func generic(_ answer: ProviderAnswer, provider: String, detail: String? = nil) -> DeliveryResult {
        switch answer {
        case .unreachable(let why):
            return (.failed("\(provider) unreachable: \(why)", retryable: true))
        case .answered(let status, _, _):
            let what = "\(provider) answered \(status)" + (detail.map { ": \($0)" } ?? (answer.excerpt.isEmpty ? "" : ": \(answer.excerpt)"))
            switch status {
            case 408, 425, 429, 500...599:
                if let after = answer.retryAfter() { return (.retryAfter(what, after)) }
                return (.failed(what, retryable: true))
            default:
                return (.failed(what, retryable: false))
            }
        }
    }
}

/// Percent-encoding for `application/x-www-form-urlencoded` bodies (WHATWG URL §5.2: every byte
/// but the unreserved ones is escaped, so `+` in a phone number arrives as `+`).
enum FormEncoding {
    static func encode(_ fields: [(String, String)]) -> [UInt8] {
        Array(fields.map { "\(escape($0.0))=\(escape($0.1))" }.joined(separator: "&").utf8)
    }

    static func escape(_ text: String) -> String {
        var out = ""
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
                 UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "*"):
                out.unicodeScalars.append(UnicodeScalar(byte))
            default:
                out += String(format: "%%%02X", byte)
            }
        }
        return out
    }
}

/// Runs `body` for every element with at most `width` at once; results in input order.
func concurrently<T: Sendable, R: Sendable>(_ items: [T], width: Int, _ body: @escaping @Sendable (T) async -> R) async -> [R] {
    await withTaskGroup(of: (Int, R).self) { group in
        var results = [R?](repeating: nil, count: items.count)
        var next = 0
        for _ in 0..<min(width, items.count) {
            let i = next, item = items[i]
            group.addTask { (i, await body(item)) }
            next += 1
        }
        for await (i, r) in group {
            results[i] = r
            if next < items.count {
                let j = next, item = items[j]
                group.addTask { (j, await body(item)) }
                next += 1
            }
        }
        return results.map { $0! }
    }
}
