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
        guard let (host, port) = EndpointAddress.hostAndPort(endpoint) else { return false }
        var hints = addrinfo()
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        var found: UnsafeMutablePointer<addrinfo>?
        guard getaddrinfo(host, String(port), &hints, &found) == 0, let info = found else { return false }
        defer { freeaddrinfo(found) }
        let fd = socket(info.pointee.ai_family, info.pointee.ai_socktype, info.pointee.ai_protocol)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        var limit = timeval(tv_sec: Int(timeout.components.seconds), tv_usec: Int(timeout.components.attoseconds / 1_000_000_000_000))
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &limit, socklen_t(MemoryLayout<timeval>.size))
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &limit, socklen_t(MemoryLayout<timeval>.size))
        guard connect(fd, info.pointee.ai_addr, info.pointee.ai_addrlen) == 0 else { return false }
        if endpoint.hasPrefix("https://") { return true }
        let request = Array("GET /v1/health HTTP/1.1\r\nHost: \(host)\r\nConnection: close\r\n\r\n".utf8)
        guard request.withUnsafeBytes({ send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }) == request.count else { return false }
        var reply = [UInt8](repeating: 0, count: 64)
        let got = reply.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
        guard got > 0 else { return false }
        return String(decoding: reply[..<got], as: UTF8.self).hasPrefix("HTTP/1.1 200")
    }
}
