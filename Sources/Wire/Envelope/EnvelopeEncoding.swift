import Foundation
import FriensoProto
import Glibc
import Logging

/// The envelope written by hand, in protobuf's wire format, straight into the buffer it goes out
/// in: the bytes protobuf-c packs for it, without copying it into protobuf-c's struct first
/// (its strings into an arena) and without protobuf-c's two walks over its seventeen field
/// descriptors (the size, then the pack). Every message a host or a client sends is an envelope:
/// protobuf-c's size and pack were about 1,950 instructions of each, with the copy (`docs/
/// benchmarks.md`, issue 16, item 71).
///
/// protobuf-c has no call that packs from the caller's own values; this is the envelope only
/// (seventeen scalar, string and bytes fields, no repeated or nested ones: `proto/frienso/common/v1`),
/// and every other message goes through protobuf-c. Its form is protobuf-c's: fields in number
/// order; a proto3 zero, false, empty string or empty bytes left out; enums as int32, a negative
/// one sign-extended to ten bytes; strings as C strings, so up to their first NUL (one that starts
/// with a NUL is left out). `EnvelopeEncodingTests` compare the bytes with protobuf-c's, and
/// `encodesAsProtobufC` checks the build once before any socket uses it.
extension Envelope {
    private typealias Field = EnvelopeFieldNumber

    /// Calls `varint`, `string` and `bytes` for every field, in number order (zero and empty
    /// ones too: each leaves out what protobuf-c leaves out).
    @inline(__always)
    private func visitFields(varint: (UInt64, UInt64) -> Void, string: (UInt64, String) -> Void, bytes: (UInt64, [UInt8]) -> Void) {
        varint(Field.version, UInt64(version))
        varint(Field.kind, Self.int32(kind.rawValue))
        varint(Field.requestID, requestId)
        string(Field.method, method)
        varint(Field.callerUserID, callerUserId)
        string(Field.sessionToken, sessionToken)
        string(Field.idempotencyKey, idempotencyKey)
        varint(Field.deadlineMs, UInt64(deadlineMs))
        varint(Field.status, Self.int32(status.rawValue))
        string(Field.statusMessage, statusMessage)
        bytes(Field.payload, payload)
        varint(Field.sequence, sequence)
        varint(Field.epoch, epoch)
        string(Field.clientAddress, clientAddress)
        bytes(Field.sessionID, sessionId)
        varint(Field.notStarted, notStarted ? 1 : 0)
        varint(Field.features, UInt64(features))
    }

    /// The size `encode(into:)` writes. Added up field by field, without `visitFields`: a local
    /// that its closures add to is boxed, and every addition was a dynamic exclusivity check
    /// (`swift_beginAccess`): some 800 instructions of each Wire request, more than the sum
    /// itself (`docs/benchmarks.md`, issue 16, item 98). `encode(into:)` checks that it wrote
    /// exactly this many bytes.
    var encodedSize: Int {
        var size = Self.varintSize(Field.version, UInt64(version)) + Self.varintSize(Field.kind, Self.int32(kind.rawValue))
        size += Self.varintSize(Field.requestID, requestId) + Self.delimitedSize(Self.cStringLength(method))
        size += Self.varintSize(Field.callerUserID, callerUserId) + Self.delimitedSize(Self.cStringLength(sessionToken))
        size += Self.delimitedSize(Self.cStringLength(idempotencyKey)) + Self.varintSize(Field.deadlineMs, UInt64(deadlineMs))
        size += Self.varintSize(Field.status, Self.int32(status.rawValue)) + Self.delimitedSize(Self.cStringLength(statusMessage))
        size += Self.delimitedSize(payload.count) + Self.varintSize(Field.sequence, sequence) + Self.varintSize(Field.epoch, epoch)
        size += Self.delimitedSize(Self.cStringLength(clientAddress)) + Self.delimitedSize(sessionId.count)
        return size + Self.varintSize(Field.notStarted, notStarted ? 1 : 0) + Self.varintSize(Field.features, UInt64(features))
    }

    /// A varint field's size: nothing for zero, as protobuf-c leaves a proto3 zero out.
    @inline(__always)
    private static func varintSize(_ number: UInt64, _ value: UInt64) -> Int {
        value == 0 ? 0 : WireWriter.varintSize(number << 3) + WireWriter.varintSize(value)
    }

    /// A length-delimited field's size (fields 1–15: a one-byte key); nothing when empty.
    @inline(__always)
    private static func delimitedSize(_ count: Int) -> Int {
        count == 0 ? 0 : 1 + WireWriter.varintSize(UInt64(count)) + count
    }

    /// Writes the envelope into `buffer`, which is `encodedSize` bytes.
    func encode(into buffer: UnsafeMutableRawBufferPointer) {
        var writer = WireWriter(buffer)
        visitFields(
            varint: { number, value in if value != 0 { writer.varintField(number, value) } },
            string: { number, value in
                guard !value.isEmpty else { return }
                Self.withCString(value) { bytes in if !bytes.isEmpty { writer.delimitedField(number, bytes) } }
            },
            bytes: { number, value in if !value.isEmpty { value.withUnsafeBytes { writer.delimitedField(number, $0) } } })
        precondition(writer.offset == buffer.count, "the envelope encoded to \(writer.offset) bytes of \(buffer.count)")
    }

    /// The envelope's bytes, encoded by hand (what `serializedBytes()` gives, through protobuf-c).
    func encodedBytes() -> [UInt8] {
        let size = encodedSize
        return [UInt8](unsafeUninitializedCapacity: size) { buffer, count in
            encode(into: UnsafeMutableRawBufferPointer(buffer))
            count = size
        }
    }

    /// The envelope's bytes as the sockets send them: encoded by hand when this build encodes as
    /// protobuf-c (and `FRIENSO_ENVELOPE_ENCODER` is not `protobuf-c`), else by protobuf-c.
    var wireBytes: [UInt8] {
        Self.encodesByHand ? encodedBytes() : serializedBytes()
    }

    /// Whether the sockets encode envelopes by hand (`FRIENSO_ENVELOPE_ENCODER=protobuf-c`: no, for A/B runs).
    static let encodesByHand = ProcessInfo.processInfo.environment["FRIENSO_ENVELOPE_ENCODER"] != "protobuf-c" && encodesAsProtobufC

    /// An int32 (an enum) as protobuf encodes it: a negative one sign-extended to 64 bits.
    private static func int32(_ value: Int32) -> UInt64 {
        UInt64(bitPattern: Int64(value))
    }

    /// How many bytes protobuf-c packs of a string: up to its first NUL (it reads a C string).
    private static func cStringLength(_ value: String) -> Int {
        guard !value.isEmpty else { return 0 }
        return withCString(value) { $0.count }
    }

    /// `body` with the bytes protobuf-c packs of `value`: its UTF-8 up to the first NUL.
    private static func withCString<T>(_ value: String, _ body: (UnsafeRawBufferPointer) -> T) -> T {
        if let result = value.utf8.withContiguousStorageIfAvailable({ utf8 in body(prefixBeforeNUL(UnsafeRawBufferPointer(utf8))) }) {
            return result
        }
        var value = value // a bridged string: made contiguous
        return value.withUTF8 { body(prefixBeforeNUL(UnsafeRawBufferPointer($0))) }
    }

    private static func prefixBeforeNUL(_ bytes: UnsafeRawBufferPointer) -> UnsafeRawBufferPointer {
        guard let base = bytes.baseAddress, let nul = memchr(base, 0, bytes.count) else { return bytes }
        return UnsafeRawBufferPointer(start: base, count: base.distance(to: UnsafeRawPointer(nul)))
    }

    /// Whether this build encodes envelopes as protobuf-c packs them, checked once on sample
    /// envelopes (every field alone and all together, zero, small, large and negative values,
    /// strings with a NUL and beyond ASCII) with the same code the sockets run. Sockets encode by
    /// hand only when it does; otherwise they pack with protobuf-c, as before, and the first to
    /// send says so in its log. The tests run debug builds and deployments release ones: this
    /// guards a release build against a compiler fault like the one `ReplyFields` works around.
    static let encodesAsProtobufC: Bool = {
        let matches = samplesForTheEncodingCheck.allSatisfy { $0.encodedBytes() == $0.serializedBytes() }
        if !matches {
            Logger(label: "frienso.wire").error("envelopes are packed with protobuf-c: this build's hand-written encoder disagrees with it")
        }
        return matches
    }()

    /// Sample envelopes for `encodesAsProtobufC` and the tests.
    static var samplesForTheEncodingCheck: [Envelope] {
        let strings = ["", "a", "accounts.Login", "ünïcödé ✓", "nul\u{0}after", "\u{0}leading", String(repeating: "x", count: 200)]
        var samples = [Envelope(), Envelope(version: 1, kind: .reply, requestId: UInt64.max, method: "geo.UpdateLocation", callerUserId: 1 << 40,
                                           sessionToken: "token", idempotencyKey: "key-1", deadlineMs: UInt32.max, status: .unrecognized(-1),
                                           statusMessage: "refused", payload: Array(repeating: 0xA5, count: 300), sequence: 1 << 63,
                                           epoch: 12_345, clientAddress: "10.0.0.1", sessionId: [1, 2, 3], notStarted: true,
                                           features: UInt32.max)]
        for (index, text) in strings.enumerated() {
            let number = UInt64(1) << (index * 9)
            samples.append(Envelope(version: UInt32(truncatingIfNeeded: number), kind: .init(rawValue: Int32(index) - 2), requestId: number,
                                    method: text, sessionToken: text, idempotencyKey: text, status: .init(rawValue: Int32(index)),
                                    statusMessage: text, payload: Array(text.utf8), clientAddress: text, sessionId: Array(text.utf8.reversed())))
        }
        return samples
    }
}
