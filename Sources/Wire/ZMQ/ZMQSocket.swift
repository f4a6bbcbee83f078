import CZeroMQ
public import FriensoProto
import Glibc
import Synchronization

/// A libzmq socket with exactly one owner: it is not `Sendable`, so the compiler keeps it on the
/// thread that made it. The raw handle never leaves this type; the socket closes in `deinit`,
/// with `LINGER 0` unless its owner raised it before letting go (a stopping host does, so its
/// last replies are not dropped).
public final class ZMQSocket {
    public enum Kind: Sendable {
        case router, dealer, pub, xpub, sub, req, rep, pair

        var raw: Int32 {
            switch self {
            case .router: ZMQ_ROUTER
            case .dealer: ZMQ_DEALER
            case .pub: ZMQ_PUB
            case .xpub: ZMQ_XPUB
            case .sub: ZMQ_SUB
            case .req: ZMQ_REQ
            case .rep: ZMQ_REP
            case .pair: ZMQ_PAIR
            }
        }
    }

    private let handle: UnsafeMutableRawPointer
    public let kind: Kind
    /// Held so the context outlives its sockets: terminating a context waits for them to close.
    private let context: ZMQContext
    /// The ZAP domain this (CurveZMQ server) socket registered, forgotten when it closes.
    private var zapDomain: String?
    /// Whether input may be waiting that the socket's `ZMQ_FD` will not announce: set by every
    /// call into libzmq that can process the socket's commands (a send or a receive may take the
    /// wake-up that said a message arrived), cleared by the reactor when it asks `ZMQ_EVENTS`.
    var mayHaveInput = true
    /// This socket, told apart from every other one the process made (an address or a descriptor
    /// number can be reused once a socket is gone): what the reactor's wait registered.
    let serial = ZMQSocket.serials.add(1, ordering: .relaxed).newValue
    private static let serials = Atomic<UInt64>(0)
    /// `ZMQ_FD`: readable when libzmq has something for this socket to look at (read once).
    private(set) lazy var signalFD: Int32 = {
        var fd: Int32 = -1
        var size = MemoryLayout<Int32>.size
        return zmq_getsockopt(handle, ZMQ_FD, &fd, &size) == 0 ? fd : -1
    }()

    /// Creates a socket with `LINGER 0`: closing never blocks on unsent messages.
    public init(_ context: ZMQContext, _ kind: Kind) throws(ZMQError) {
        guard let handle = zmq_socket(context.handle, kind.raw) else { throw ZMQError("zmq_socket") }
        self.handle = handle
        self.kind = kind
        self.context = context
        try set(ZMQ_LINGER, 0)
    }

    deinit {
        stopMonitor()
        zmq_close(handle)
        if let zapDomain, let zap = try? context.authenticator() { zap.unregister(zapDomain) }
    }

    /// Applies `security` to a socket about to bind: with CurveZMQ, the server key and a ZAP
    /// domain whose admission rule the context's ZAP handler (started here if need be) enforces.
    public func secure(_ security: ServerSecurity) throws(ZMQError) {
        guard case .curve(let secretKey, let admission) = security else { return }
        let zap = try context.authenticator()
        let domain = zap.register(admission)
        zapDomain = domain
        try CurveKeys.configureServer(self, secretKey: secretKey, zapDomain: domain)
    }

    /// Applies `security` to a socket about to connect.
    public func secure(_ security: ClientSecurity) throws(ZMQError) {
        try CurveKeys.configure(self, security)
    }

    // MARK: Options

    public func set(_ option: Int32, _ value: Int32) throws(ZMQError) {
        var v = value
        guard zmq_setsockopt(handle, option, &v, MemoryLayout<Int32>.size) == 0 else { throw ZMQError("zmq_setsockopt(\(option))") }
    }

    public func set(_ option: Int32, int64 value: Int64) throws(ZMQError) {
        var v = value
        guard zmq_setsockopt(handle, option, &v, MemoryLayout<Int64>.size) == 0 else { throw ZMQError("zmq_setsockopt(\(option))") }
    }

    public func set(_ option: Int32, bytes: [UInt8]) throws(ZMQError) {
        let rc = bytes.withUnsafeBytes { zmq_setsockopt(handle, option, $0.baseAddress, $0.count) }
        guard rc == 0 else { throw ZMQError("zmq_setsockopt(\(option))") }
    }

    /// Sets the options every Frienso socket wants: high-water marks and, on bound sockets,
    /// a message size cap so an oversized frame is refused by libzmq before it is buffered.
    public func configure(highWaterMark: Int32, maxMessageSize: Int64? = nil) throws(ZMQError) {
        try set(ZMQ_SNDHWM, highWaterMark)
        try set(ZMQ_RCVHWM, highWaterMark)
        if let maxMessageSize { try set(ZMQ_MAXMSGSIZE, int64: maxMessageSize) }
    }

    public func subscribe(_ prefix: String) throws(ZMQError) {
        try set(ZMQ_SUBSCRIBE, bytes: Array(prefix.utf8))
    }

    public func unsubscribe(_ prefix: String) throws(ZMQError) {
        try set(ZMQ_UNSUBSCRIBE, bytes: Array(prefix.utf8))
    }

    /// The endpoint actually bound, e.g. `tcp://127.0.0.1:41234` after binding `tcp://127.0.0.1:*`.
    public func lastEndpoint() throws(ZMQError) -> String {
        var buffer = [CChar](repeating: 0, count: 256)
        var size = buffer.count
        guard zmq_getsockopt(handle, ZMQ_LAST_ENDPOINT, &buffer, &size) == 0 else { throw ZMQError("ZMQ_LAST_ENDPOINT") }
        return String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    // MARK: Connections

    /// - Returns: the endpoint actually bound (ephemeral ports resolved).
    @discardableResult
    public func bind(_ endpoint: String) throws(ZMQError) -> String {
        mayHaveInput = true
        guard zmq_bind(handle, endpoint) == 0 else { throw ZMQError("zmq_bind(\(endpoint))") }
        return try lastEndpoint()
    }

    public func connect(_ endpoint: String) throws(ZMQError) {
        mayHaveInput = true
        guard zmq_connect(handle, endpoint) == 0 else { throw ZMQError("zmq_connect(\(endpoint))") }
    }

    private static let monitors = Atomic<UInt64>(0)

    /// Whether a monitor is attached (`monitor(events:)`), until `stopMonitor`.
    private var monitoring = false

    /// A PAIR socket receiving this socket's `events` (`ZMQ_EVENT_DISCONNECTED`…), as libzmq's
    /// socket monitor sends them: read them with `monitorEvent`. It lives on this socket's thread.
    /// Call `stopMonitor` before closing the PAIR socket: libzmq sends each event with a blocking
    /// send, from its I/O thread, so an event for a monitor whose reader is gone would stall
    /// every socket of the context (seen: every client of a test process silent at once).
    public func monitor(events: Int32) throws(ZMQError) -> ZMQSocket {
        let address = "inproc://frienso-monitor-\(Self.monitors.add(1, ordering: .relaxed).newValue)"
        mayHaveInput = true
        guard zmq_socket_monitor(handle, address, events) == 0 else { throw ZMQError("zmq_socket_monitor") }
        monitoring = true
        let pair = try ZMQSocket(context, .pair)
        try pair.connect(address)
        return pair
    }

    /// Detaches the monitor (no event is sent to it from now on); closing the socket does too.
    public func stopMonitor() {
        guard monitoring else { return }
        zmq_socket_monitor(handle, nil, 0)
        monitoring = false
    }

    /// The next event on a monitor socket (`monitor(events:)`), nil when none is waiting.
    public func monitorEvent() throws(ZMQError) -> Int32? {
        guard let message = try receive(dontWait: true), let first = message.frames.first, first.count >= 2 else { return nil }
        return Int32(UInt16(first[0]) | UInt16(first[1]) << 8) // host order: little-endian on every platform we build for
    }

    // MARK: Messages

    /// Sends a multipart message.
    /// - Returns: `false` when `dontWait` was set and the message could not be queued (HWM reached,
    ///   or no peer on a socket with `ZMQ_IMMEDIATE`). Nothing of the message was sent then.
    /// - Throws: `ZMQError` for any other failure.
    @discardableResult
    public func send(_ frames: [[UInt8]], dontWait: Bool = true) throws(ZMQError) -> Bool {
        for (index, frame) in frames.enumerated() {
            var flags: Int32 = dontWait ? ZMQ_DONTWAIT : 0
            if index < frames.count - 1 { flags |= ZMQ_SNDMORE }
            if let error = sendFrame(frame, flags: flags) {
                // libzmq sends a multipart message atomically: EAGAIN can only come on the first frame.
                if error.wouldBlock && index == 0 { return false }
                throw error
            }
        }
        return true
    }

    /// One frame; nil when it was queued.
    private func sendFrame(_ frame: [UInt8], flags: Int32) -> ZMQError? {
        frame.withUnsafeBytes { sendFrame($0, flags: flags) }
    }

    private func sendFrame(_ frame: UnsafeRawBufferPointer, flags: Int32) -> ZMQError? {
        var dummy: UInt8 = 0
        mayHaveInput = true
        let rc = zmq_send(handle, frame.baseAddress ?? UnsafeRawPointer(withUnsafeMutablePointer(to: &dummy) { $0 }), frame.count, flags)
        return rc < 0 ? ZMQError("zmq_send") : nil
    }

    /// Sends a two-frame message: `topic`, then a body of `bodySize` bytes that `writeBody`
    /// writes straight into the libzmq message (a PUB socket's event): no array for either frame.
    /// - Returns: `false` when `dontWait` was set and the message could not be queued.
    @discardableResult
    public func send(topic: String, bodySize: Int, dontWait: Bool = true,
                     writeBody: (UnsafeMutableRawBufferPointer) -> Void) throws(ZMQError) -> Bool {
        var last = try Self.written(bodySize, writeBody)
        var topic = topic
        let sent = topic.withUTF8 { bytes in
            Result { () throws(ZMQError) -> Bool in
                try sendLast(&last, prefixCount: 1, dontWait: dontWait) { _, flags in sendFrame(UnsafeRawBufferPointer(bytes), flags: flags) }
            }
        }
        return try sent.get()
    }

    /// Sends `prefix` frames (routing id, delimiter, topic: small) and then `message`, encoded
    /// straight into a libzmq message of its size, which libzmq then owns: no array in between,
    /// and no copy into libzmq.
    /// - Returns: `false` when `dontWait` was set and the message could not be queued.
    @discardableResult
    public func send(_ prefix: [[UInt8]], packing message: some ProtoMessage, dontWait: Bool = true) throws(ZMQError) -> Bool {
        var last = try Self.packed(message)
        return try sendLast(&last, prefixCount: prefix.count, dontWait: dontWait) { index, flags in sendFrame(prefix[index], flags: flags) }
    }

    /// Sends one frame of `bodySize` bytes, which `writeBody` writes straight into the libzmq
    /// message (a client's batch frame, `WireBatch`).
    /// - Returns: `false` when `dontWait` was set and the message could not be queued.
    @discardableResult
    public func send(bodySize: Int, dontWait: Bool = true, writeBody: (UnsafeMutableRawBufferPointer) -> Void) throws(ZMQError) -> Bool {
        var last = try Self.written(bodySize, writeBody)
        return try sendLast(&last, prefixCount: 0, dontWait: dontWait) { _, _ in nil }
    }

    /// Sends `message` to a ROUTER socket's peer: its routing id, the empty delimiter frame when
    /// the peer is a REQ socket (`delimited`), then the message as `send(_:packing:)` does. The
    /// same as `send(peer.prefix, packing:)` without an array of frames made for every message.
    @discardableResult
    public func send(routingID: [UInt8], delimited: Bool, packing message: some ProtoMessage, dontWait: Bool = true) throws(ZMQError) -> Bool {
        var last = try Self.packed(message)
        return try sendLast(&last, routingID: routingID, delimited: delimited, dontWait: dontWait)
    }

    /// Sends a message of `bodySize` bytes, which `writeBody` writes straight into the libzmq
    /// message, to a ROUTER socket's peer (its routing id, then the delimiter when `delimited`):
    /// a relayed reply (`RelayedReply`), already encoded but for its header.
    /// - Returns: `false` when `dontWait` was set and the message could not be queued.
    @discardableResult
    public func send(routingID: [UInt8], delimited: Bool, bodySize: Int, dontWait: Bool = true,
                     writeBody: (UnsafeMutableRawBufferPointer) -> Void) throws(ZMQError) -> Bool {
        var last = try Self.written(bodySize, writeBody)
        return try sendLast(&last, routingID: routingID, delimited: delimited, dontWait: dontWait)
    }

    /// A new libzmq message of `bodySize` bytes, which `writeBody` fills.
    private static func written(_ bodySize: Int, _ writeBody: (UnsafeMutableRawBufferPointer) -> Void) throws(ZMQError) -> zmq_msg_t {
        var last = zmq_msg_t()
        guard zmq_msg_init_size(&last, bodySize) == 0 else { throw ZMQError("zmq_msg_init_size") }
        writeBody(UnsafeMutableRawBufferPointer(start: zmq_msg_data(&last), count: bodySize))
        return last
    }

    /// `sendLast` to a ROUTER socket's peer: its routing id, then the empty delimiter when `delimited`.
    private func sendLast(_ last: inout zmq_msg_t, routingID: [UInt8], delimited: Bool, dontWait: Bool) throws(ZMQError) -> Bool {
        try sendLast(&last, prefixCount: delimited ? 2 : 1, dontWait: dontWait) { index, flags in
            index == 0 ? sendFrame(routingID, flags: flags) : sendFrame(UnsafeRawBufferPointer(start: nil, count: 0), flags: flags)
        }
    }

    /// `message` encoded straight into a new libzmq message of its size.
    /// An envelope (every message a host or client sends) is encoded by hand when this build
    /// encodes as protobuf-c (`Envelope.encodesByHand`; `FRIENSO_ENVELOPE_ENCODER=protobuf-c` keeps
    /// protobuf-c, for A/B runs). The cast is resolved when this is specialised for a type.
    private static func packed(_ message: some ProtoMessage) throws(ZMQError) -> zmq_msg_t {
        if let envelope = message as? Envelope, Envelope.encodesByHand {
            return try written(envelope.encodedSize) { envelope.encode(into: $0) }
        }
        var last = zmq_msg_t()
        let packed = withUnsafeMutablePointer(to: &last) { pointer in
            message.serialize { count in zmq_msg_init_size(pointer, count) == 0 ? zmq_msg_data(pointer) : nil }
        }
        guard packed != nil else { throw ZMQError("zmq_msg_init_size") } // nothing was initialised
        return last
    }

    /// Sends `prefixCount` frames with `sendPrefix` (its index, the flags), then `last` (a libzmq
    /// message of ours, which libzmq then owns; closed here when it was not sent).
    private func sendLast(_ last: inout zmq_msg_t, prefixCount: Int, dontWait: Bool,
                          sendPrefix: (Int, Int32) -> ZMQError?) throws(ZMQError) -> Bool {
        let flags: Int32 = dontWait ? ZMQ_DONTWAIT : 0
        for index in 0..<prefixCount {
            if let error = sendPrefix(index, flags | ZMQ_SNDMORE) {
                zmq_msg_close(&last)
                if error.wouldBlock && index == 0 { return false }
                throw error
            }
        }
        mayHaveInput = true
        if zmq_msg_send(&last, handle, flags) < 0 {
            let error = ZMQError("zmq_msg_send")
            zmq_msg_close(&last) // not sent: still ours
            if error.wouldBlock && prefixCount == 0 { return false }
            throw error
        }
        return true
    }

    /// Receives one multipart message: each frame before the last goes to `prefixFrame` (its
    /// index and bytes), and the last, with its properties, to `lastFrame`; all in libzmq's memory,
    /// valid during the call only. The hot paths (a host's requests, a client's replies) work
    /// on the message where it lies: no array of frames, and nothing returned to copy.
    /// - Returns: `false` when `dontWait` is set and nothing is queued.
    public func receive(dontWait: Bool = true, prefixFrame: (Int, UnsafeRawBufferPointer) -> Void = { _, _ in },
                        lastFrame: (Received) -> Void) throws(ZMQError) -> Bool {
        var count = 0
        while true {
            var message = zmq_msg_t()
            zmq_msg_init(&message)
            defer { zmq_msg_close(&message) }
            mayHaveInput = true
            let rc = zmq_msg_recv(&message, handle, dontWait && count == 0 ? ZMQ_DONTWAIT : 0)
            if rc < 0 {
                let error = ZMQError("zmq_msg_recv")
                if error.wouldBlock && count == 0 { return false }
                throw error
            }
            let size = zmq_msg_size(&message)
            let bytes = UnsafeRawBufferPointer(start: size > 0 ? zmq_msg_data(&message) : nil, count: size)
            guard zmq_msg_more(&message) == 0 else {
                prefixFrame(count, bytes)
                count += 1
                continue
            }
            withUnsafeMutablePointer(to: &message) { pointer in
                lastFrame(Received(bytes: bytes, prefixCount: count, message: pointer))
            }
            return true
        }
    }

    /// Receives one multipart message.
    /// - Parameter properties: also read the peer's address and, on a CurveZMQ server, the member
    ///   name its ZAP handler gave the peer (from the last frame: a ROUTER's routing-id frame is
    ///   made locally and carries no properties). Only hosts need them; they cost two lookups
    ///   and two strings a message.
    /// - Returns: the frames and those properties (empty when not read), or `nil` when `dontWait`
    ///   is set and nothing is queued.
    public func receive(dontWait: Bool = true, properties: Bool = false) throws(ZMQError) -> (frames: [[UInt8]], peerAddress: String, userID: String)? {
        var frames: [[UInt8]] = [], address = "", user = ""
        let received = try receive(dontWait: dontWait, prefixFrame: { _, bytes in frames.append(Array(bytes)) }) { message in
            frames.append(Array(message.bytes))
            if properties { (address, user) = (message.peerAddress, message.userID) }
        }
        return received ? (frames, address, user) : nil
    }

    /// Whether a message is waiting (`ZMQ_EVENTS`; libzmq processes the socket's commands first).
    func hasInput() -> Bool {
        mayHaveInput = false
        var events: Int32 = 0
        var size = MemoryLayout<Int32>.size
        // An error (a closed context) reads as input: the owner's receive then sees the error.
        guard zmq_getsockopt(handle, ZMQ_EVENTS, &events, &size) == 0 else { return true }
        return events & Int32(ZMQ_POLLIN) != 0
    }

    /// A poll item for this socket, valid while the socket lives.
    func pollItem() -> zmq_pollitem_t {
        zmq_pollitem_t(socket: handle, fd: -1, events: Int16(ZMQ_POLLIN), revents: 0)
    }
}

/// Waits on sockets and file descriptors.
enum ZMQPoller {
    /// - Parameter timeoutMilliseconds: -1 waits forever (never used by Frienso loops).
    /// - Returns: the number of ready items; 0 on timeout or a signal interruption.
    static func poll(_ items: inout [zmq_pollitem_t], timeoutMilliseconds: Int) throws(ZMQError) -> Int {
        let rc = zmq_poll(&items, Int32(items.count), timeoutMilliseconds)
        if rc < 0 {
            let error = ZMQError("zmq_poll")
            if error.interrupted { return 0 }
            throw error
        }
        return Int(rc)
    }
}
