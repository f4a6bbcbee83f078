/// The few pieces of protobuf's wire format Wire reads and writes by hand: reading some fields of
/// an encoded reply in place, and writing a message from fields already encoded (`ReplyFields`:
/// relayed replies), appending an event's sequence number to its encoded envelope
/// (`Publisher`), and the envelope's encoding (`EnvelopeEncoding.swift`).
/// Every other message goes through protobuf-c.

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

    /// Bytes already in the wire format (fields encoded elsewhere).
    mutating func raw(_ bytes: UnsafeRawBufferPointer) {
        guard let base = bytes.baseAddress, let target = buffer.baseAddress else { return }
        (target + offset).copyMemory(from: base, byteCount: bytes.count)
        offset += bytes.count
    }
}
