import ServiceKit
import Foundation
import Glibc
import Synchronization

/// The Redis baseline: a `redis-server` started for the run (when Debian's package is installed)
/// and a minimal blocking RESP client, one connection per load thread. Hand-written: no listed
/// Swift package speaks RESP without SwiftNIO, and the baseline must not pay for a heavier stack
/// than the commands themselves.
final class RedisServer: @unchecked Sendable {
    let port: Int
    private let pid: pid_t

    /// Starts `redis-server` on a free port with persistence off; nil when it is not installed.
    static func start() -> RedisServer? {
        let candidates = ["/usr/bin/redis-server", "/usr/local/bin/redis-server"]
        guard let path = candidates.first(where: { FileManager.default.isExecutableFile(atPath: $0) }),
              let port = Spawn.freePort(),
              let pid = Spawn.start([path, "--port", "\(port)", "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
                                     "--daemonize", "no", "--logfile", "/dev/null"]) else { return nil }
        let server = RedisServer(port: port, pid: pid)
        for _ in 0..<200 {
            if let client = RedisClient(port: port), (try? client.command(["PING"])) != nil { return server }
            usleep(20_000)
        }
        server.stop()
        return nil
    }

    private init(port: Int, pid: pid_t) {
        self.port = port
        self.pid = pid
    }

    /// SIGKILL: nothing to save (persistence is off).
    func stop() {
        Spawn.stop(pid, signal: SIGKILL)
    }
}

enum RedisReply {
    case simple(String), error(String), integer(Int), bulk([UInt8]?), array([RedisReply]?)
}

struct RedisError: Error { var message: String }

/// One connection per load thread, opened on the thread's first use (for `threadLoad`).
final class RedisConnections: Sendable {
    private let port: Int
    private let open = Mutex<[Int: RedisClient]>([:])

    init(port: Int) { self.port = port }

    /// Thread `t`'s connection. - Precondition: the server accepts connections.
    func callAsFunction(_ t: Int) -> RedisClient {
        if let client = open.withLock({ $0[t] }) { return client }
        let client = RedisClient(port: port)!
        open.withLock { $0[t] = client }
        return client
    }
}

final class RedisClient: @unchecked Sendable {  // one thread uses each
    private let fd: Int32
    private var buffer: [UInt8] = []
    private var position = 0

    init?(port: Int) {
        fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { return nil }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = UInt16(port).bigEndian
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0 }
        }
        guard connected else { close(fd); return nil }
        var one: Int32 = 1
        setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
    }

    deinit { close(fd) }

    /// Sends commands back to back, then reads as many replies.
    func pipeline(_ commands: [[String]]) throws -> [RedisReply] {
        var out: [UInt8] = []
        for command in commands {
            out += Array("*\(command.count)\r\n".utf8)
            for part in command {
                let bytes = Array(part.utf8)
                out += Array("$\(bytes.count)\r\n".utf8) + bytes + [13, 10]
            }
        }
        var sent = 0
        while sent < out.count {
            let n = out[sent...].withUnsafeBytes { send(fd, $0.baseAddress, $0.count, 0) }
            guard n > 0 else { throw RedisError(message: "send failed") }
            sent += n
        }
        return try commands.map { _ in try read() }
    }

    func command(_ parts: [String]) throws -> RedisReply { try pipeline([parts])[0] }

    private func byte() throws -> UInt8 {
        if position == buffer.count {
            var chunk = [UInt8](repeating: 0, count: 65_536)
            let n = recv(fd, &chunk, chunk.count, 0)
            guard n > 0 else { throw RedisError(message: "connection closed") }
            buffer = Array(chunk[0..<n])
            position = 0
        }
        defer { position += 1 }
        return buffer[position]
    }

    private func line() throws -> String {
        var bytes: [UInt8] = []
        while true {
            let b = try byte()
            if b == 13 { _ = try byte(); return String(decoding: bytes, as: UTF8.self) }
            bytes.append(b)
        }
    }

    private func read() throws -> RedisReply {
        let kind = try byte()
        let text = try line()
        switch kind {
        case UInt8(ascii: "+"): return .simple(text)
        case UInt8(ascii: "-"): return .error(text)
        case UInt8(ascii: ":"): return .integer(Int(text) ?? 0)
        case UInt8(ascii: "$"):
            let n = Int(text) ?? -1
            guard n >= 0 else { return .bulk(nil) }
            var bytes: [UInt8] = []
            bytes.reserveCapacity(n)
            for _ in 0..<n { bytes.append(try byte()) }
            _ = try byte(); _ = try byte()
            return .bulk(bytes)
        case UInt8(ascii: "*"):
            let n = Int(text) ?? -1
            guard n >= 0 else { return .array(nil) }
            return .array(try (0..<n).map { _ in try read() })
        default: throw RedisError(message: "unexpected reply byte \(kind)")
        }
    }
}
