/// The few pieces of protobuf's wire format Wire reads and writes by hand: reading some fields of
/// an encoded reply in place, and writing a message from fields already encoded (`ReplyFields`:
/// relayed replies), appending an event's sequence number to its encoded envelope
/// (`Publisher`), and the envelope's encoding and decoding (`EnvelopeEncoding.swift`,
/// `EnvelopeDecoding.swift`). Every other message goes through protobuf-c.

/// Reads protobuf's wire format: varints (at most ten bytes, the low 64 bits kept, as
/// protobuf-c reads them) and length-delimited slices.
struct WireReader {
    private let bytes: UnsafeRawBufferPointer
    private var offset = 0

    init(_ bytes: UnsafeRawBufferPointer) {
        self.bytes = bytes
    }

    var atEnd: Bool { offset >= bytes.count }

    /// A varint of at most `maxBytes` bytes (nil past them, as protobuf-c refuses it).
    mutating func varint(maxBytes: Int = 10) -> UInt64? {
        var value: UInt64 = 0
        var shift: UInt64 = 0
        let limit = UInt64(maxBytes) * 7
        while offset < bytes.count, shift < limit {
            let byte = bytes[offset]
            offset += 1
            value |= UInt64(byte & 0x7F) << shift
            if byte < 0x80 { return value }
            shift += 7
        }
        return nil // truncated, or longer than ten bytes
    }

    /// A varint, and whether any of its bits is set, past the 64 kept too: protobuf-c's bool is
    /// true then (it tests every byte), where the value kept may be 0.
    mutating func varintWithAnyBit() -> (value: UInt64, anyBit: Bool)? {
        var again = self
        guard let value = varint() else { return nil }
        return (value, value != 0 || again.anyBitSet())
    }

    private mutating func anyBitSet() -> Bool {
        var any = false
        while offset < bytes.count {
            let byte = bytes[offset]
            offset += 1
            if byte & 0x7F != 0 { any = true }
            if byte < 0x80 { break }
        }
        return any
    }

    /// A field's tag and wire type: protobuf-c reads at most five bytes of it.
    mutating func key() -> UInt64? {
        varint(maxBytes: 5)
    }

    /// A length-delimited slice: protobuf-c reads at most five bytes of its length.
    mutating func delimited() -> UnsafeRawBufferPointer? {
        guard let length = varint(maxBytes: 5), length <= UInt64(bytes.count - offset) else { return nil }
        let slice = UnsafeRawBufferPointer(rebasing: bytes[offset..<offset + Int(length)])
        offset += Int(length)
        return slice
    }

    mutating func skip(_ count: Int) -> Bool {
        guard bytes.count - offset >= count else { return false }
        offset += count
        return true
    }
}

/// The envelope's field numbers (`proto/frienso/common/v1/envelope.proto`), for the code that
/// reads and writes it by hand.
enum EnvelopeFieldNumber {
    static let version: UInt64 = 1, kind: UInt64 = 2, requestID: UInt64 = 3, method: UInt64 = 4, callerUserID: UInt64 = 5
    static let sessionToken: UInt64 = 6, idempotencyKey: UInt64 = 7, deadlineMs: UInt64 = 8, status: UInt64 = 9
    static let statusMessage: UInt64 = 10, payload: UInt64 = 11, sequence: UInt64 = 12, epoch: UInt64 = 13
    static let clientAddress: UInt64 = 14, sessionID: UInt64 = 15, notStarted: UInt64 = 16, features: UInt64 = 17
}

/// One top-level field of an encoded envelope, as protobuf-c reads it (`WireReader.envelopeField`).
enum EnvelopeFieldRead {
    /// A uint32, uint64, enum or bool field, or an unknown varint: the low 64 bits, and whether
    /// any bit is set past them too (protobuf-c's bool).
    case varint(UInt64, value: UInt64, anyBit: Bool)
    /// A string or bytes field, or an unknown one, in the buffer read.
    case delimited(UInt64, UnsafeRawBufferPointer)
    /// An unknown field of fixed width, skipped (protobuf-c keeps it aside).
    case skipped
}

extension WireReader {
    /// The envelope's fields by wire type (`proto/frienso/common/v1`): protobuf-c refuses one
    /// seen with another.
    private static func isVarintField(_ number: UInt64) -> Bool {
        switch number {
        case 1, 2, 3, 5, 8, 9, 12, 13, 16, 17: true // uint32, enum, uint64, bool
        default: false
        }
    }
    private static func isDelimitedField(_ number: UInt64) -> Bool {
        switch number {
        case 4, 6, 7, 10, 11, 14, 15: true // string, bytes
        default: false
        }
    }

    /// The next field of an encoded envelope; nil when protobuf-c might not read it as this
    /// would (malformed bytes, field 0, a known field with another wire type, a group): whoever
    /// scans then leaves the whole buffer to protobuf-c (`ReplyFields`, `Envelope.scanned`).
    @inline(__always)
    mutating func envelopeField() -> EnvelopeFieldRead? {
        guard let key = key() else { return nil }
        let number = key >> 3
        guard number > 0 else { return nil }
        switch key & 7 {
        case 0:
            guard !Self.isDelimitedField(number), let (value, anyBit) = varintWithAnyBit() else { return nil }
            return .varint(number, value: value, anyBit: anyBit)
        case 2:
            guard !Self.isVarintField(number), let slice = delimited() else { return nil }
            return .delimited(number, slice)
        case 1:
            guard !Self.isVarintField(number), !Self.isDelimitedField(number), skip(8) else { return nil }
            return .skipped
        case 5:
            guard !Self.isVarintField(number), !Self.isDelimitedField(number), skip(4) else { return nil }
            return .skipped
        default: // groups (deprecated) and invalid wire types
            return nil
        }
    }
}

/// Writes protobuf's wire format into a buffer of the exact size.
struct WireWriter {
    private let buffer: UnsafeMutableRawBufferPointer
    private(set) var offset = 0

    init(_ buffer: UnsafeMutableRawBufferPointer) {
        self.buffer = buffer
    }

    static func varintSize(_ value: UInt64) -> Int {
        // 7 bits a byte; 0 takes one.
        max(1, (64 - value.leadingZeroBitCount + 6) / 7)
    }

    mutating func varint(_ value: UInt64) {
        var value = value
        while value >= 0x80 {
            buffer[offset] = UInt8(truncatingIfNeeded: value) | 0x80
            offset += 1
            value >>= 7
        }
        buffer[offset] = UInt8(value)
        offset += 1
    }

    mutating func varintField(_ number: UInt64, _ value: UInt64) {
        varint(number << 3)
        varint(value)
    }

    mutating func delimitedField(_ number: UInt64, _ bytes: UnsafeRawBufferPointer) {
        varint(number << 3 | 2)
        varint(UInt64(bytes.count))
        raw(bytes)
    }

    mutating func byte(_ value: UInt8) {
        buffer[offset] = value
        offset += 1
    }

    /// Passes over `count` bytes written through another view of the buffer.
    mutating func skip(_ count: Int) {
        offset += count
    }

    /// Bytes already in the wire format (fields encoded elsewhere).
    mutating func raw(_ bytes: UnsafeRawBufferPointer) {
        guard let base = bytes.baseAddress, let target = buffer.baseAddress else { return }
        (target + offset).copyMemory(from: base, byteCount: bytes.count)
        offset += bytes.count
    }
}
