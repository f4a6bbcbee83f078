import ServiceKit
public import Accounts
import Foundation
public import Logging
import NIOCore
import NIOPosix
import NIOSSL
import Synchronization

/// Email over SMTP (RFC 5321) to the operator's relay: one connection per message, STARTTLS
/// (RFC 3207) before anything else when `security` is `.startTLS` (the default: port 587),
/// TLS from the first byte with `.implicitTLS` (port 465), and `AUTH PLAIN` (RFC 4954; `LOGIN`
/// when that is all the server offers) with the configured credentials, only ever inside TLS.
///
/// Written by hand: no package in the mirror speaks SMTP, and what is needed is small (a line
/// protocol of a dozen commands over SwiftNIO and swift-nio-ssl, which do the sockets and TLS).
///
/// Replies: 2xx goes on; 4xx (a busy server, a greylist) is tried again with backoff; 5xx is
/// final (a mailbox that does not exist, a message refused), except 535 (authentication
/// failed), which is the operator's to fix: tried again, and logged as an error. Anything that
/// breaks the connection is tried again. The relay's queue id (the text of its final 250) is
/// the reference. Each message carries a `Message-ID` made from its delivery, the same on every
/// retry, so a receiver that deduplicates sees one message.
public struct SMTPEmail: EmailProvider {
    public enum Security: String, Sendable {
        case startTLS = "starttls", implicitTLS = "tls"
        /// Plain text all the way: only for a relay on this machine (`127.0.0.1`), never with credentials.
        case none
    }

    public struct Options: Sendable {
        public var host: String
        public var port: Int
        public var security: Security
        public var username: String
        public var password: String
        /// The From address, optionally with a name: `Frienso <no-reply@example.org>`.
        public var from: String
        /// What this machine calls itself in EHLO (default: the From address's domain).
        public var heloName: String
        /// A PEM file of CA certificates trusted besides the system's.
        public var caFile: String?

        public init(host: String, port: Int = 587, security: Security = .startTLS, username: String = "", password: String = "",
                    from: String, heloName: String = "", caFile: String? = nil) {
            self.host = host
            self.port = port
            self.security = security
            self.username = username
            self.password = password
            self.from = from
            self.heloName = heloName
            self.caFile = caFile
        }
    }

    public let name = "smtp"
    let options: Options
    let tls: NIOSSLContext?
    let logger: Logger
    let fromAddress: String

    public init(_ options: Options, logger: Logger) throws {
        guard !options.host.isEmpty, (1...65535).contains(options.port) else { throw ProviderConfigError("email smtp: host and port (1-65535) are required") }
        guard let address = Self.address(in: options.from) else { throw ProviderConfigError("email smtp: from must be an address (name <user@domain> or user@domain)") }
        if options.security == .none {
            guard ["127.0.0.1", "::1", "localhost"].contains(options.host) else {
                throw ProviderConfigError("email smtp: security \"none\" is only for a relay on this machine (127.0.0.1)")
            }
            guard options.username.isEmpty else { throw ProviderConfigError("email smtp: credentials are never sent without TLS") }
        }
        var configuration = TLSConfiguration.makeClientConfiguration()
        if let caFile = options.caFile { configuration.additionalTrustRoots = [.file(caFile)] }
        tls = options.security == .none ? nil : try NIOSSLContext(configuration: configuration)
        self.options = options
        self.logger = logger
        fromAddress = address
    }

    /// `user@domain` out of `Name <user@domain>` or a bare address.
    static func address(in from: String) -> String? {
        let bare = from.split(separator: "<").last.map { $0.replacingOccurrences(of: ">", with: "") } ?? from
        let trimmed = bare.trimmingCharacters(in: .whitespaces)
        return trimmed.contains("@") && !trimmed.contains(" ") ? trimmed : nil
    }

    public func send(_ message: EmailMessage) async -> EmailResult {
        do {
            return try await deliver(message)
        } catch let error as SMTPFailure {
            return error.result
        } catch {
            return .failed("smtp \(options.host):\(options.port): \(error)", retryable: true)
        }
    }

    private func deliver(_ message: EmailMessage) async throws -> EmailResult {
        let connection = try await SMTPConnection.open(host: options.host, port: options.port, tls: options.security == .implicitTLS ? tls : nil)
        defer { connection.close() }
        try await connection.expect(220, to: nil)
        let helo = options.heloName.isEmpty ? String(fromAddress.split(separator: "@").last ?? "localhost") : options.heloName
        var capabilities = try await connection.expect(250, to: "EHLO \(helo)").lines
        if options.security == .startTLS {
            guard capabilities.contains(where: { $0.uppercased().hasPrefix("STARTTLS") }) else {
                throw SMTPFailure(.failed("smtp \(options.host) does not offer STARTTLS: nothing is sent in clear text", retryable: true))
            }
            try await connection.expect(220, to: "STARTTLS")
            try await connection.startTLS(tls!, host: options.host)
            capabilities = try await connection.expect(250, to: "EHLO \(helo)").lines
        }
        if !options.username.isEmpty {
            let auth = capabilities.first { $0.uppercased().hasPrefix("AUTH") }?.uppercased().split(separator: " ") ?? []
            do {
                if auth.contains("PLAIN") || !auth.contains("LOGIN") {
                    let token = Data("\0\(options.username)\0\(options.password)".utf8).base64EncodedString()
                    try await connection.expect(235, to: "AUTH PLAIN \(token)", redacted: "AUTH PLAIN ***")
                } else {
                    try await connection.expect(334, to: "AUTH LOGIN")
                    try await connection.expect(334, to: Data(options.username.utf8).base64EncodedString(), redacted: "***")
                    try await connection.expect(235, to: Data(options.password.utf8).base64EncodedString(), redacted: "***")
                }
            } catch let failure as SMTPFailure where failure.code == 535 || failure.code == 534 {
                logger.error("the SMTP relay refused the credentials: check the email section", metadata: ["host": "\(options.host)", "code": "\(failure.code)"])
                throw SMTPFailure(.failed(failure.text, retryable: true))
            }
        }
        try await connection.expect(250, to: "MAIL FROM:<\(fromAddress)>")
        try await connection.expect([250, 251], to: "RCPT TO:<\(message.to)>")
        try await connection.expect(354, to: "DATA")
        let queued = try await connection.expect(250, to: Self.content(message, from: options.from, fromAddress: fromAddress) + ".", redacted: "<message>")
        try? await connection.send("QUIT")
        return .delivered(reference: queued.lines.joined(separator: " "))
    }

    /// The message (RFC 5322): headers, then the body in base64 (any text, any line length, no
    /// line starting with a dot), CRLF line ends.
    static func content(_ message: EmailMessage, from: String, fromAddress: String) -> String {
        let date = DateFormatter()
        date.locale = Locale(identifier: "en_US_POSIX")
        date.timeZone = TimeZone(identifier: "UTC")
        date.dateFormat = "EEE, dd MMM yyyy HH:mm:ss '+0000'"
        let domain = fromAddress.split(separator: "@").last.map(String.init) ?? "frienso.invalid"
        let body = Data(message.body.utf8).base64EncodedString(options: [.lineLength76Characters, .endLineWithCarriageReturn, .endLineWithLineFeed])
        return [
            "Date: \(date.string(from: Date()))",
            "From: \(from)",
            "To: <\(message.to)>",
            "Subject: \(encodedWord(message.subject))",
            "Message-ID: <\(message.idempotencyKey)@\(domain)>",
            "MIME-Version: 1.0",
            "Content-Type: text/plain; charset=utf-8",
            "Content-Transfer-Encoding: base64",
            "",
            body,
            "",
        ].joined(separator: "\r\n")
    }

    /// A header value as is when it is ASCII, else as an RFC 2047 encoded word.
    static func encodedWord(_ text: String) -> String {
        text.unicodeScalars.allSatisfy({ $0.isASCII && $0.value >= 32 }) ? text : "=?UTF-8?B?\(Data(text.utf8).base64EncodedString())?="
    }
}

/// A reply that ends the attempt, already classified.
struct SMTPFailure: Error {
    let result: EmailResult
    var code = 0
    var text: String {
        if case .failed(let t, _) = result { return t }
        return ""
    }

    init(_ result: EmailResult, code: Int = 0) {
        self.result = result
        self.code = code
    }
}

struct SMTPReply: Sendable {
    var code: Int
    var lines: [String]
}

/// One SMTP session: lines out, replies in (multi-line replies joined), TLS added in place.
final class SMTPConnection: Sendable {
    let channel: any Channel
    let replies: ReplyQueue

    static func open(host: String, port: Int, tls: NIOSSLContext?) async throws -> SMTPConnection {
        let replies = ReplyQueue()
        let channel = try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .connectTimeout(.seconds(10))
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    if let tls { try channel.pipeline.syncOperations.addHandler(try NIOSSLClientHandler(context: tls, serverHostname: host)) }
                    try channel.pipeline.syncOperations.addHandler(SMTPReplyDecoder(replies))
                }
            }
            .connect(host: host, port: port).get()
        return SMTPConnection(channel: channel, replies: replies)
    }

    private init(channel: any Channel, replies: ReplyQueue) {
        self.channel = channel
        self.replies = replies
    }

    func send(_ line: String) async throws {
        try await channel.writeAndFlush(ByteBuffer(string: line + "\r\n"))
    }

    /// Sends `command` (nil: only reads, as for the greeting) and waits for a reply with one of
    /// `codes`; anything else ends the attempt (4xx retryable, 5xx final).
    @discardableResult
    func expect(_ codes: Set<Int>, to command: String?, redacted: String? = nil) async throws -> SMTPReply {
        if let command { try await send(command) }
        let reply = try await replies.next(timeout: .seconds(30))
        guard codes.contains(reply.code) else {
            let verb: String? = command?.split(separator: " ").first.map { String($0) }
            let what: String = redacted ?? verb ?? "the greeting"
            let said = "smtp answered \(reply.code) \(reply.lines.joined(separator: " ")) to \(what)"
            throw SMTPFailure(.failed(said, retryable: reply.code < 500), code: reply.code)
        }
        return reply
    }

    @discardableResult
    func expect(_ code: Int, to command: String?, redacted: String? = nil) async throws -> SMTPReply {
        try await expect([code], to: command, redacted: redacted)
    }

    func startTLS(_ context: NIOSSLContext, host: String) async throws {
        // Made and added on the channel's event loop (the handler is not Sendable).
        let channel = channel
        try await channel.eventLoop.submit {
            try channel.pipeline.syncOperations.addHandler(NIOSSLClientHandler(context: context, serverHostname: host), position: .first)
        }.get()
    }

    func close() {
        channel.close(promise: nil)
    }
}

/// Replies as they complete, for one reader at a time.
final class ReplyQueue: Sendable {
    private struct State {
        var ready: [SMTPReply] = []
        var waiter: CheckedContinuation<SMTPReply, any Error>?
        var closed: (any Error)?
    }
    private let state = Mutex(State())

    func push(_ reply: SMTPReply) {
        let waiter = state.withLock { s -> CheckedContinuation<SMTPReply, any Error>? in
            if let w = s.waiter { s.waiter = nil; return w }
            s.ready.append(reply)
            return nil
        }
        waiter?.resume(returning: reply)
    }

    func fail(_ error: any Error) {
        let waiter = state.withLock { s -> CheckedContinuation<SMTPReply, any Error>? in
            if s.closed == nil { s.closed = error }
            defer { s.waiter = nil }
            return s.waiter
        }
        waiter?.resume(throwing: error)
    }

    func next(timeout: Duration) async throws -> SMTPReply {
        try await withThrowingTaskGroup(of: SMTPReply.self) { group in
            group.addTask {
                try await withCheckedThrowingContinuation { continuation in
                    let now: Result<SMTPReply, any Error>? = self.state.withLock { s in
                        if !s.ready.isEmpty { return .success(s.ready.removeFirst()) }
                        if let closed = s.closed { return .failure(closed) }
                        s.waiter = continuation
                        return nil
                    }
                    if let now { continuation.resume(with: now) }
                }
            }
            group.addTask {
                try await Task.sleep(for: timeout)
                self.fail(SMTPFailure(.failed("smtp: no reply within \(timeout)", retryable: true)))
                throw CancellationError()
            }
            defer { group.cancelAll() }
            return try await group.next()!
        }
    }
}

/// Bytes to replies: `250-…` lines continue a reply, `250 …` ends it (RFC 5321 §4.2).
final class SMTPReplyDecoder: ChannelInboundHandler, @unchecked Sendable {
    typealias InboundIn = ByteBuffer
    let replies: ReplyQueue
    var pending: [UInt8] = []
    var lines: [String] = []

    init(_ replies: ReplyQueue) { self.replies = replies }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        var buffer = unwrapInboundIn(data)
        pending += buffer.readBytes(length: buffer.readableBytes) ?? []
        while let end = pending.firstIndex(of: UInt8(ascii: "\n")) {
            var line = String(decoding: pending[..<end], as: UTF8.self)
            pending.removeSubrange(...end)
            if line.hasSuffix("\r") { line.removeLast() }
            guard line.count >= 3, let code = Int(line.prefix(3)) else {
                replies.fail(SMTPFailure(.failed("smtp: not a reply: \(line.prefix(80))", retryable: true)))
                context.close(promise: nil)
                return
            }
            let more = line.dropFirst(3).first == "-"
            lines.append(String(line.dropFirst(4)))
            if !more {
                replies.push(SMTPReply(code: code, lines: lines))
                lines = []
            }
        }
    }

    func channelInactive(context: ChannelHandlerContext) {
        replies.fail(SMTPFailure(.failed("smtp: the server closed the connection", retryable: true)))
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        replies.fail(SMTPFailure(.failed("smtp: \(error)", retryable: true)))
        context.close(promise: nil)
    }
}
