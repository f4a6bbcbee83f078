public import FriensoProto

/// A peer's reply as a client on the reactor hands it to code that passes it on
/// (`WireClient.relayOnReactor`: the gateway relaying a service's reply to its own client). What
/// is relayed is the status, the status message and the payload; the peer's request id, method
/// and flags belong to the hop behind and are left there.
///
/// Usually the reply is read where libzmq holds it, without a decode (`ReplyFields`), and the
/// host that answers with it copies those three fields once into the reply it sends
/// (`ReactorReply.relay`): no envelope is decoded, made or encoded on the way (issue 16, item 68
/// of `docs/benchmarks.md`). Such a value is valid during the completion it is handed to only:
/// never keep it. A reply the client had to decode, or made itself (UNAVAILABLE,
/// DEADLINE_EXCEEDED), is carried as an envelope.
public struct RelayedReply {
    enum Body {
        case envelope(Envelope)
        case wire(ReplyFields)
    }

    let body: Body

    init(_ envelope: Envelope) {
        body = .envelope(envelope)
    }

    init(_ fields: ReplyFields) {
        body = .wire(fields)
    }

    public var status: StatusCode {
        switch body {
        case .envelope(let envelope): envelope.status
        case .wire(let fields): StatusCode(rawValue: fields.status)
        }
    }

    /// The reply a host sends for it, without its request id and method (the host stamps those):
    /// the status, message and payload, as the wire form carries them.
    public var envelope: Envelope {
        switch body {
        case .envelope(let envelope):
            Envelope(version: WireProtocol.version, kind: .reply, status: envelope.status,
                     statusMessage: envelope.statusMessage, payload: envelope.payload)
        case .wire(let fields):
            Envelope(version: WireProtocol.version, kind: .reply, status: StatusCode(rawValue: fields.status),
                     statusMessage: String(decoding: fields.statusMessage, as: UTF8.self), payload: Array(fields.payload))
        }
    }
}

/// The fields of an encoded reply envelope a relay needs, read in place (`init?(scanning:)`): the
/// protobuf wire format's top-level fields, each varint read and each length-delimited field
/// kept as a slice of the buffer. Written out again by `replySize` and `writeReply`, in
/// protobuf-c's own order and form, so that the bytes are those protobuf-c would pack for the
/// same envelope.
///
/// protobuf-c has no call that reads some fields of a message without unpacking all of it, or
/// that writes a message from fields already encoded; these few lines of its wire format are
/// that (`ProtoWire.swift`; `docs/architecture.md`, "Relayed replies"). Anything the scan does
/// not fully understand (a malformed buffer, a known field with another wire type, a status
/// message that is not plain ASCII) is not scanned: the caller decodes it with protobuf-c.
struct ReplyFields {
    var version: UInt32 = 0
    var kind: Int32 = 0
    var requestID: UInt64 = 0
    var status: Int32 = 0
    var notStarted = false
    var statusMessage = UnsafeRawBufferPointer(start: nil, count: 0)
    var payload = UnsafeRawBufferPointer(start: nil, count: 0)

    private typealias Field = EnvelopeFieldNumber

    /// nil: `bytes` is not a reply this scan reads whole (see the type's note).
    ///
    /// Never inlined, so that the check of this build (`readsAsProtobufC`) runs the very code
    /// the relays run. The two slices are kept in locals and stored once at the end: stored as
    /// they were found, Swift 6.3.1's optimizer (its SILCombine pass) dropped both from the
    /// returned value in release builds while keeping every varint field; debug builds, which the
    /// tests run, were right (`docs/architecture.md`, "Relayed replies";
    /// `docs/repro/swift-6.3.1-silcombine-scan.swift`).
    @inline(never)
    init?(scanning bytes: UnsafeRawBufferPointer) {
        var reader = WireReader(bytes)
        var message = UnsafeRawBufferPointer(start: nil, count: 0), body = UnsafeRawBufferPointer(start: nil, count: 0)
        while !reader.atEnd {
            switch reader.envelopeField() {
            case nil:
                return nil
            case .varint(let number, let value, let anyBit)?:
                switch number {
                case Field.version: version = UInt32(truncatingIfNeeded: value)
                case Field.kind: kind = Int32(truncatingIfNeeded: value)
                case Field.requestID: requestID = value
                case Field.status: status = Int32(truncatingIfNeeded: value)
                case Field.notStarted: notStarted = anyBit
                default: break
                }
            case .delimited(let number, let slice)?:
                switch number {
                case Field.statusMessage:
                    // Relayed as it is only when decoding could not change it: protobuf-c's
                    // strings end at a NUL, and Swift repairs invalid UTF-8.
                    guard slice.allSatisfy({ $0 != 0 && $0 < 0x80 }) else { return nil }
                    message = slice
                case Field.payload: body = slice
                default: break
                }
            case .skipped?:
                break
            }
        }
        statusMessage = message
        payload = body
    }

    /// Whether this build reads and writes relayed replies exactly as protobuf-c packs and
    /// unpacks them, checked once on sample replies (every status, empty and non-empty messages
    /// and payloads) with the same code the relays run. A client relays in place only when it
    /// does; otherwise it decodes, as before relays, and says so in its log. The tests run debug
    /// builds and deployments release ones: this is what guards a release build against a
    /// compiler fault like the one `init?(scanning:)` works around.
    static let readsAsProtobufC: Bool = {
        let payloads: [[UInt8]] = [[], [0x0A, 0x03, 0x61, 0x62, 0x63], Array(repeating: 0xA5, count: 300)]
        for (index, status) in StatusCode.allKnownCases.enumerated() {
            let payload = payloads[index % payloads.count]
            let message = index.isMultiple(of: 2) ? "" : "refused: sample \(index)"
            let peer = Envelope(version: WireProtocol.version, kind: .reply, requestId: 7, method: "peer.Method", status: status,
                                statusMessage: message, payload: payload, notStarted: index == 3)
            let expected = Envelope(version: WireProtocol.version, kind: .reply, requestId: 1 << 40 | UInt64(index),
                                    method: "caller.Method", status: status, statusMessage: message, payload: payload)
            guard relay(peer.serializedBytes(), requestID: expected.requestId, method: expected.method) == expected.serializedBytes() else {
                return false
            }
        }
        return true
    }()

    /// The reply relayed for the encoded `reply` to the request `requestID`, `method` (nil when it
    /// does not scan): what a host sends, as bytes.
    static func relay(_ reply: [UInt8], requestID: UInt64, method: String) -> [UInt8]? {
        reply.withUnsafeBytes { bytes -> [UInt8]? in
            guard let fields = ReplyFields(scanning: bytes) else { return nil }
            var method = method
            return method.withUTF8 { name in
                let name = UnsafeRawBufferPointer(name)
                let size = fields.replySize(requestID: requestID, method: name)
                return [UInt8](unsafeUninitializedCapacity: size) { buffer, count in
                    fields.writeReply(into: UnsafeMutableRawBufferPointer(buffer), requestID: requestID, method: name)
                    count = size
                }
            }
        }
    }

    /// The size of the reply `writeReply` writes.
    func replySize(requestID: UInt64, method: UnsafeRawBufferPointer) -> Int {
        var size = 1 + WireWriter.varintSize(UInt64(WireProtocol.version)) + 1 + WireWriter.varintSize(UInt64(Envelope.replyKind))
        if requestID != 0 { size += 1 + WireWriter.varintSize(requestID) }
        if !method.isEmpty { size += 1 + WireWriter.varintSize(UInt64(method.count)) + method.count }
        if status != 0 { size += 1 + WireWriter.varintSize(UInt64(bitPattern: Int64(status))) }
        if !statusMessage.isEmpty { size += 1 + WireWriter.varintSize(UInt64(statusMessage.count)) + statusMessage.count }
        if !payload.isEmpty { size += 1 + WireWriter.varintSize(UInt64(payload.count)) + payload.count }
        return size
    }

    /// Writes the reply a host sends for this one (`replySize` bytes): version, kind REPLY,
    /// `requestID`, `method`, and this reply's status, message and payload; fields in number
    /// order, zero and empty ones left out, as protobuf-c packs a proto3 message.
    func writeReply(into buffer: UnsafeMutableRawBufferPointer, requestID: UInt64, method: UnsafeRawBufferPointer) {
        var writer = WireWriter(buffer)
        writer.varintField(Field.version, UInt64(WireProtocol.version))
        writer.varintField(Field.kind, UInt64(Envelope.replyKind))
        if requestID != 0 { writer.varintField(Field.requestID, requestID) }
        if !method.isEmpty { writer.delimitedField(Field.method, method) }
        if status != 0 { writer.varintField(Field.status, UInt64(bitPattern: Int64(status))) } // int32: sign-extended
        if !statusMessage.isEmpty { writer.delimitedField(Field.statusMessage, statusMessage) }
        if !payload.isEmpty { writer.delimitedField(Field.payload, payload) }
        assert(writer.offset == buffer.count, "writeReply wrote \(writer.offset) bytes of \(buffer.count)")
    }
}

extension Envelope {
    /// `KIND_REPLY`'s number.
    static let replyKind = CommonV1.Kind.reply.rawValue
}
