import Foundation
import FriensoProto
import Logging

/// The envelope read by hand, straight from the bytes libzmq holds into the Swift value: what
/// protobuf-c's unpack and the generated conversion give, without the unpack's walk over the
/// seventeen field descriptors, its arena and its C strings copied a second time into Swift's
/// (`docs/benchmarks.md`, issue 16, item 97). Every request a host takes and every reply a client
/// hears is an envelope; the encoder's counterpart is `EnvelopeEncoding.swift` (item 71).
///
/// It reads what protobuf-c reads, as protobuf-c reads it: varints of at most ten bytes (the low
/// 64 bits kept; a uint32 or enum its low 32 bits; a bool true when any bit is set), keys and
/// lengths of at most five bytes, the last of a field seen twice, unknown fields skipped by their
/// wire type, strings up to their first NUL with invalid UTF-8 repaired as `ProtoRuntime.string`
/// repairs it. Anything else (a malformed buffer, a known field with another wire type, a group)
/// is not read here: `decoded(_:)` hands it to protobuf-c, which accepts or refuses it as before.
/// `EnvelopeDecodingTests` compare the two on sample and on random and broken buffers, and
/// `decodesAsProtobufC` checks the build once before any socket uses it.
extension Envelope {
    /// Decodes `bytes` (memory the caller owns for the call): by hand when this build reads as
    /// protobuf-c does (and `FRIENSO_ENVELOPE_DECODER` is not `protobuf-c`), else, or when the
    /// scan does not read the bytes whole, with protobuf-c.
    /// - Throws: `ProtoDecodingError` when protobuf-c cannot decode them either.
    static func decoded(_ bytes: UnsafeRawBufferPointer) throws(ProtoDecodingError) -> Envelope {
        var method: KnownMethod?
        return try decoded(bytes, knownMethod: &method)
    }

    /// `decoded(_:)`, with the method found in `KnownMethod`'s index on the way (nil: a name this
    /// build does not know), for the tables a host looks it up in.
    static func decoded(_ bytes: UnsafeRawBufferPointer, knownMethod: inout KnownMethod?) throws(ProtoDecodingError) -> Envelope {
        if decodesByHand, let envelope = scanned(bytes, knownMethod: &knownMethod) { return envelope }
        let envelope = try Envelope(serializedBuffer: bytes)
        knownMethod = KnownMethod(envelope.method)
        return envelope
    }

    /// `decoded(_:)` for bytes in an array.
    static func decoded(_ bytes: [UInt8]) throws(ProtoDecodingError) -> Envelope {
        let result = bytes.withUnsafeBytes { buffer in Result { () throws(ProtoDecodingError) in try decoded(buffer) } }
        return try result.get()
    }

    /// Whether the sockets decode envelopes by hand (`FRIENSO_ENVELOPE_DECODER=protobuf-c`: no, for A/B runs).
    static let decodesByHand = ProcessInfo.processInfo.environment["FRIENSO_ENVELOPE_DECODER"] != "protobuf-c" && decodesAsProtobufC

    private typealias Field = EnvelopeFieldNumber

    /// The envelope in `bytes`, or nil when this scan does not read them whole (see the type's
    /// note): protobuf-c decides then.
    static func scanned(_ bytes: UnsafeRawBufferPointer) -> Envelope? {
        var method: KnownMethod?
        return scanned(bytes, knownMethod: &method)
    }

    /// `scanned(_:)`, with the method found in `KnownMethod`'s index: a name it knows is that
    /// name's one `String`, not a new one. Never inlined, so that the check of this build
    /// (`decodesAsProtobufC`) runs the very code the sockets run.
    @inline(never)
    static func scanned(_ bytes: UnsafeRawBufferPointer, knownMethod: inout KnownMethod?) -> Envelope? {
        // Each field in a local, the envelope made once at the end: a value made empty and then
        // changed field by field was copied whole on its way out (its strings and arrays
        // retained and released again).
        var version: UInt32 = 0, kind: Int32 = 0, requestID: UInt64 = 0, callerUserID: UInt64 = 0, deadlineMs: UInt32 = 0
        var status: Int32 = 0, sequence: UInt64 = 0, epoch: UInt64 = 0, notStarted = false, features: UInt32 = 0
        knownMethod = nil
        var method = "", sessionToken = "", idempotencyKey = "", statusMessage = "", clientAddress = ""
        var payload: [UInt8] = [], sessionID: [UInt8] = []
        var reader = WireReader(bytes)
        while !reader.atEnd {
            switch reader.envelopeField() {
            case nil:
                return nil
            case .varint(let number, let value, let anyBit)?:
                switch number {
                case Field.version: version = UInt32(truncatingIfNeeded: value)
                case Field.kind: kind = Int32(truncatingIfNeeded: value)
                case Field.requestID: requestID = value
                case Field.callerUserID: callerUserID = value
                case Field.deadlineMs: deadlineMs = UInt32(truncatingIfNeeded: value)
                case Field.status: status = Int32(truncatingIfNeeded: value)
                case Field.sequence: sequence = value
                case Field.epoch: epoch = value
                case Field.notStarted: notStarted = anyBit
                case Field.features: features = UInt32(truncatingIfNeeded: value)
                default: break // unknown: skipped, as protobuf-c keeps it aside
                }
            case .delimited(let number, let slice)?:
                switch number {
                case Field.method: method = methodField(slice, &knownMethod)
                case Field.sessionToken: sessionToken = string(slice)
                case Field.idempotencyKey: idempotencyKey = string(slice)
                case Field.statusMessage: statusMessage = string(slice)
                case Field.payload: payload = Array(slice)
                case Field.clientAddress: clientAddress = string(slice)
                case Field.sessionID: sessionID = Array(slice)
                default: break
                }
            case .skipped?:
                break
            }
        }
        return Envelope(version: version, kind: CommonV1.Kind(rawValue: kind), requestId: requestID, method: method, callerUserId: callerUserID,
                        sessionToken: sessionToken, idempotencyKey: idempotencyKey, deadlineMs: deadlineMs,
                        status: CommonV1.StatusCode(rawValue: status), statusMessage: statusMessage, payload: payload, sequence: sequence,
                        epoch: epoch, clientAddress: clientAddress, sessionId: sessionID, notStarted: notStarted,
                        features: features)
    }

    /// The method field: the index's string for a name it knows (`knownMethod` says which), else
    /// a new one as `string` makes it. Never inlined: in `scanned`, this grew it past what the
    /// compiler inlines `WireReader.envelopeField` into, and that cost more than this saves.
    @inline(never)
    private static func methodField(_ slice: UnsafeRawBufferPointer, _ knownMethod: inout KnownMethod?) -> String {
        knownMethod = KnownMethod(utf8: slice)
        return knownMethod?.name ?? string(slice)
    }

    /// A string field as the generated conversion makes it from protobuf-c's C string: its bytes
    /// up to the first NUL, invalid UTF-8 repaired (`ProtoRuntime.string`).
    private static func string(_ slice: UnsafeRawBufferPointer) -> String {
        guard let base = slice.baseAddress, !slice.isEmpty else { return "" }
        let count = memchr(base, 0, slice.count).map { base.distance(to: UnsafeRawPointer($0)) } ?? slice.count
        return String(decoding: UnsafeRawBufferPointer(start: base, count: count), as: UTF8.self)
    }

    /// Whether this build reads envelopes as protobuf-c unpacks them, checked once on the
    /// encoder's sample envelopes (every field, zero, small, large and negative values, strings
    /// with a NUL and beyond ASCII), some bytes only protobuf-c would write that way (a field
    /// twice, unknown fields, overlong varints) and some it refuses, with the same code the
    /// sockets run. Sockets decode by hand only when it does; otherwise with protobuf-c, as
    /// before, and the first to decode says so in its log. The tests run debug builds and
    /// deployments release ones: this guards a release build against a compiler fault like the
    /// one `ReplyFields` works around.
    static let decodesAsProtobufC: Bool = {
        let matches = samplesForTheDecodingCheck.allSatisfy { bytes in
            bytes.withUnsafeBytes { buffer in
                let theirs = try? Envelope(serializedBuffer: buffer)
                guard let mine = scanned(buffer) else { return true } // protobuf-c decides these
                return mine == theirs
            }
        } && samplesForTheEncodingCheck.allSatisfy { sample in
            let bytes = sample.serializedBytes()
            return bytes.withUnsafeBytes { buffer in
                guard let mine = scanned(buffer) else { return false } // protobuf-c's own bytes must be read here
                return mine == (try? Envelope(serializedBuffer: buffer))
            }
        }
        if !matches {
            Logger(label: "frienso.wire").error("envelopes are decoded with protobuf-c: this build's hand-written decoder disagrees with it")
        }
        return matches
    }()

    /// Encodings protobuf-c's own packer does not make, for `decodesAsProtobufC` and the tests.
    static var samplesForTheDecodingCheck: [[UInt8]] {
        [
            [0x08, 0x01, 0x08, 0x02],                                    // version twice: the last wins
            [0x22, 0x01, 0x61, 0x22, 0x02, 0x62, 0x63],                  // method twice
            [0x18, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x7F], // request id: ten bytes, bits past 64
            [0x08, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x01],                  // version: past 32 bits
            [0x80, 0x01, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x02], // not_started: a bit only past 64
            [0x88, 0x01, 0xFF, 0xFF, 0xFF, 0xFF, 0x1F],                  // features: past 32 bits
            [0xF8, 0x07, 0x05, 0xF9, 0x07, 1, 2, 3, 4, 5, 6, 7, 8, 0xFD, 0x07, 1, 2, 3, 4, 0xFA, 0x07, 0x01, 0x00], // unknown fields
            [0x52, 0x04, 0x61, 0x00, 0x62, 0xFF],                        // status message: a NUL, then invalid UTF-8
            [0x52, 0x03, 0x61, 0xC3, 0x28],                              // invalid UTF-8
            [0x22, 0x05, 0x61],                                          // truncated
            [0x0A, 0x01, 0x61],                                          // version as bytes: refused
            [0x21, 1, 2, 3, 4, 5, 6, 7, 8],                              // method as 64 bits: refused
            [0x0B, 0x0C],                                                // a group
            [0x00, 0x01],                                                // field 0
        ]
    }
}
