// A release-only miscompile seen with Swift 6.3.1 (swift-6.3.1-RELEASE, x86_64 Linux), kept to
// report upstream and to check future toolchains (issue 16, item 68 of docs/benchmarks.md).
//
//   swiftc -O swift-6.3.1-silcombine-scan.swift -o scan && ./scan        # prints 0 (wrong)
//   swiftc -Onone swift-6.3.1-silcombine-scan.swift -o scan && ./scan    # prints 3
//   swiftc -O -Xllvm -sil-disable-pass=sil-combine swift-6.3.1-silcombine-scan.swift -o scan && ./scan   # 3
//
// `ReplyFields(scanning:)` finds the payload (a print inside the loop shows it set), but the value
// it returns has both buffer-pointer fields empty while every varint field is right; adding a
// print at the end of the initialiser hides it, and storing the slices from locals at the end
// (what Sources/Wire/Envelope/RelayedReply.swift does) avoids it. It is this file's first version
// of that code, whole: smaller reductions tried did not reproduce.

/// The few pieces of protobuf's wire format Wire reads and writes by hand, where protobuf-c has
/// no call for the job: reading some fields of an encoded reply in place, and writing a message
/// from fields already encoded (`ReplyFields`: relayed replies), and appending an event's sequence
/// number to its encoded envelope (`Publisher`). Everything else goes through protobuf-c.

/// Reads protobuf's wire format: varints (at most ten bytes, the low 64 bits kept, as
/// protobuf-c reads them) and length-delimited slices.
struct WireReader {
    private let bytes: UnsafeRawBufferPointer
    private var offset = 0

    init(_ bytes: UnsafeRawBufferPointer) {
        self.bytes = bytes
    }

    var atEnd: Bool { offset >= bytes.count }

    mutating func varint() -> UInt64? {
        var value: UInt64 = 0
        var shift: UInt64 = 0
        while offset < bytes.count, shift < 70 {
            let byte = bytes[offset]
            offset += 1
            value |= UInt64(byte & 0x7F) << shift
            if byte < 0x80 { return value }
            shift += 7
        }
        return nil // truncated, or longer than ten bytes
    }

    mutating func delimited() -> UnsafeRawBufferPointer? {
        guard let length = varint(), length <= UInt64(bytes.count - offset) else { return nil }
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

struct ReplyFields {
    var version: UInt32 = 0
    var kind: Int32 = 0
    var requestID: UInt64 = 0
    var status: Int32 = 0
    var notStarted = false
    var statusMessage = UnsafeRawBufferPointer(start: nil, count: 0)
    var payload = UnsafeRawBufferPointer(start: nil, count: 0)

    /// The envelope's field numbers this scan reads or must see with their own wire type.
    private enum Field {
        static let version: UInt64 = 1, kind: UInt64 = 2, requestID: UInt64 = 3, method: UInt64 = 4
        static let status: UInt64 = 9, statusMessage: UInt64 = 10, payload: UInt64 = 11
        static let notStarted: UInt64 = 16
        /// Envelope fields of varint type (uint32, uint64, enum, bool), and of length-delimited
        /// type (string, bytes): a field seen with another wire type is not scanned.
        static func isVarint(_ number: UInt64) -> Bool {
            switch number {
            case 1, 2, 3, 5, 8, 9, 12, 13, 16: true
            default: false
            }
        }
        static func isDelimited(_ number: UInt64) -> Bool {
            switch number {
            case 4, 6, 7, 10, 11, 14, 15: true
            default: false
            }
        }
    }

    /// nil: `bytes` is not a reply this scan reads whole (see the type's note).
    init?(scanning bytes: UnsafeRawBufferPointer) {
        var reader = WireReader(bytes)
        while !reader.atEnd {
            guard let key = reader.varint() else { return nil }
            let number = key >> 3
            guard number > 0 else { return nil }
            switch key & 7 {
            case 0: // varint
                guard !Field.isDelimited(number), let value = reader.varint() else { return nil }
                switch number {
                case Field.version: version = UInt32(truncatingIfNeeded: value)
                case Field.kind: kind = Int32(truncatingIfNeeded: value)
                case Field.requestID: requestID = value
                case Field.status: status = Int32(truncatingIfNeeded: value)
                case Field.notStarted: notStarted = value != 0
                default: break
                }
            case 2: // length-delimited
                guard !Field.isVarint(number), let slice = reader.delimited() else { return nil }
                if number == Field.statusMessage {
                    // Relayed as it is only when decoding could not change it: protobuf-c's
                    // strings end at a NUL, and Swift repairs invalid UTF-8.
                    guard slice.allSatisfy({ $0 != 0 && $0 < 0x80 }) else { return nil }
                    statusMessage = slice
                } else if number == Field.payload {
                    payload = slice
                }
            case 1: // 64-bit
                guard !Field.isVarint(number), !Field.isDelimited(number), reader.skip(8) else { return nil }
            case 5: // 32-bit
                guard !Field.isVarint(number), !Field.isDelimited(number), reader.skip(4) else { return nil }
            default: // groups (deprecated) and invalid wire types
                return nil
            }
        }
    }

}

@inline(never) func scan(_ b: [UInt8]) -> Int {
    b.withUnsafeBytes { raw in ReplyFields(scanning: raw).map { $0.payload.count } ?? -1 }
}
print(scan([0x48, 0x01, 0x5A, 0x03, 1, 2, 3]))
