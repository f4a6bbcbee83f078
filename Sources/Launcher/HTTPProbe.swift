import Foundation
import ServiceKit
#if canImport(Glibc)
import Glibc
#endif

/// The readiness probe of a member that speaks HTTP (the edge): `GET /v1/health` on a plain
/// socket answered `200`; over TLS, a completed TCP connect (the launcher does not carry the
/// deployment's certificate authority).
public enum HTTPProbe {
    /// - Parameter endpoint: `http://host:port`, `https://host:port` or `tcp://host:port`.
    public static func isReady(_ endpoint: String, timeout: Duration = .milliseconds(500)) -> Bool {
        health(endpoint, timeout: timeout).ready
    }

    /// The probe, and the version the health check reports (nil over TLS, or when it has none).
    public static func health(_ endpoint: String, timeout: Duration = .milliseconds(500)) -> (ready: Bool, version: String?) {
        guard let answer = answer(endpoint, timeout: timeout) else { return (false, nil) }
        guard answer.ready, let body = answer.text.range(of: "\r\n\r\n").map({ answer.text[$0.upperBound...] }),
              let object = (try? JSONSerialization.jsonObject(with: Data(body.utf8))) as? [String: Any] else { return (answer.ready, nil) }
        return (true, object["version"] as? String)
    }

    /// `GET path` over plain HTTP with `headers`; the status line's code and the body (nil: no
    /// answer, or the endpoint is https).
    public static func get(_ endpoint: String, path: String, headers: [String: String] = [:], timeout: Duration = .seconds(2),
                           maxBytes: Int = 16 << 20) -> (status: Int, body: String)? {
        guard !endpoint.hasPrefix("https://"),
              let answer = answer(endpoint, path: path, headers: headers, timeout: timeout, maxBytes: maxBytes) else { return nil }
        let status = Int(answer.text.dropFirst("HTTP/1.1 ".count).prefix(3)) ?? 0
        let body = answer.text.range(of: "\r\n\r\n").map { String(answer.text[$0.upperBound...]) } ?? ""
        return (status, body)
    }

    private static func answer(_ endpoint: String, path: String = "/v1/health", headers: [String: String] = [:], timeout: Duration,
                               maxBytes: Int = 8_192) -> (ready: Bool, text: String)? {
        guard let (host, port) = EndpointAddress.hostAndPort(endpoint) else { return nil }
        var hints = addrinfo()
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        var found: UnsafeMutablePointer<addrinfo>?
        guard getaddrinfo(host, String(port), &hints, &found) == 0, let info = found else { return nil }
        defer { freeaddrinfo(found) }
        let fd = socket(info.pointee.ai_family, info.pointee.ai_socktype, info.pointee.ai_protocol)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var limit = timeval(tv_sec: Int(timeout.components.seconds), tv_usec: Int(timeout.components.attoseconds / 1_000_000_000_000))
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &limit, socklen_t(MemoryLayout<timeval>.size))
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &limit, socklen_t(MemoryLayout<timeval>.size))
        guard connect(fd, info.pointee.ai_addr, info.pointee.ai_addrlen) == 0 else { return nil }
        if endpoint.hasPrefix("https://") { return (true, "") }
        let extra = headers.map { "\($0.key): \($0.value)\r\n" }.joined()
        let request = Array("GET \(path) HTTP/1.1\r\nHost: \(host)\r\n\(extra)Connection: close\r\n\r\n".utf8)
        guard request.withUnsafeBytes({ send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }) == request.count else { return nil }
        // The whole (small) answer: the server closes the connection after it.
        var reply: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 16_384)
        while reply.count < maxBytes {
            let got = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            guard got > 0 else { break }
            reply += chunk[..<got]
        }
        let text = String(decoding: reply, as: UTF8.self)
        return (text.hasPrefix("HTTP/1.1 200"), text)
    }
}
