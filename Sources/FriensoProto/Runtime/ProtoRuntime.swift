internal import FriensoProtoC
import Glibc

/// Owns the C memory that an encode borrows: strings, arrays and nested messages.
/// Everything is freed when the arena goes away, after `pack` has copied it into the output.
///
/// A bump allocator: allocations are carved from a few growing chunks (256 B, then doubling to
/// 64 KiB) and large ones get a block of their own, so encoding an envelope costs one or two
/// `malloc`s instead of one `calloc` per string, array and nested message (malloc and free were
/// the largest single items in every service's profile).
final class ProtoArena {
    /// The first block, apart from the rest: most encodes need no other, and an array holding
    /// it was one more `malloc` per message.
    private var first: UnsafeMutableRawPointer?
    private var blocks: [UnsafeMutableRawPointer] = []
    private var cursor: UnsafeMutableRawPointer?
    private var remaining = 0
    private var nextChunk = 256
    private static let alignment = 16
    private static let largestChunk = 64 << 10

    deinit {
        free(first)
        for block in blocks { free(block) }
    }

    private func keep(_ block: UnsafeMutableRawPointer) {
        if first == nil { first = block } else { blocks.append(block) }
    }

    private func raw(_ size: Int) -> UnsafeMutableRawPointer {
        let size = max(1, (size + Self.alignment - 1) & ~(Self.alignment - 1))
        if size > remaining {
            if size > Self.largestChunk / 4 {
                // Large (a payload): its own block, leaving the current chunk in use.
                guard let block = malloc(size) else { preconditionFailure("out of memory") }
                keep(block)
                return block
            }
            while nextChunk < size { nextChunk *= 2 }
            guard let chunk = malloc(nextChunk) else { preconditionFailure("out of memory") }
            keep(chunk)
            cursor = chunk
            remaining = nextChunk
            nextChunk = min(nextChunk * 2, Self.largestChunk)
        }
        let pointer = cursor!
        cursor = pointer + size
        remaining -= size
        return pointer
    }

    private func allocate<T>(_ type: T.Type, count: Int) -> UnsafeMutablePointer<T> {
        raw(MemoryLayout<T>.stride * max(1, count)).bindMemory(to: T.self, capacity: max(1, count))
    }

    func string(_ value: String) -> UnsafeMutablePointer<CChar> {
        var value = value
        return value.withUTF8 { utf8 in
            let pointer = allocate(CChar.self, count: utf8.count + 1)
            if let base = utf8.baseAddress { UnsafeMutableRawPointer(pointer).copyMemory(from: base, byteCount: utf8.count) }
            pointer[utf8.count] = 0
            return pointer
        }
    }

    func strings(_ values: [String]) -> UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>? {
        values.isEmpty ? nil : array(values.map { Optional(string($0)) })
    }

    func binary(_ value: [UInt8]) -> ProtobufCBinaryData {
        guard !value.isEmpty else { return ProtobufCBinaryData(len: 0, data: nil) }
        let pointer = allocate(UInt8.self, count: value.count)
        value.withUnsafeBufferPointer { pointer.update(from: $0.baseAddress!, count: $0.count) }
        return ProtobufCBinaryData(len: value.count, data: pointer)
    }

    func array<T>(_ values: [T]) -> UnsafeMutablePointer<T>? {
        guard !values.isEmpty else { return nil }
        let pointer = allocate(T.self, count: values.count)
        values.withUnsafeBufferPointer { pointer.initialize(from: $0.baseAddress!, count: $0.count) }
        return pointer
    }

    func message<T>(of type: T.Type, _ fill: (UnsafeMutablePointer<T>) -> Void) -> UnsafeMutablePointer<T> {
        let pointer = allocate(T.self, count: 1)
        // Zeroed first, as calloc gave: `fill` runs the message's protobuf-c initialiser over it.
        UnsafeMutableRawPointer(pointer).initializeMemory(as: UInt8.self, repeating: 0, count: MemoryLayout<T>.stride)
        fill(pointer)
        return pointer
    }
}

/// The few generic steps the generated glue shares.
enum ProtoRuntime {
    static func pack<C>(
        _ message: inout C,
        size: (UnsafePointer<C>?) -> Int,
        pack: (UnsafePointer<C>?, UnsafeMutablePointer<UInt8>?) -> Int
    ) -> [UInt8] {
        withUnsafePointer(to: &message) { pointer in
            let count = size(pointer)
            guard count > 0 else { return [] }
            return [UInt8](unsafeUninitializedCapacity: count) { buffer, initialized in
                initialized = pack(pointer, buffer.baseAddress)
            }
        }
    }

    static func pack<C>(
        _ message: inout C,
        size: (UnsafePointer<C>?) -> Int,
        pack: (UnsafePointer<C>?, UnsafeMutablePointer<UInt8>?) -> Int,
        into allocate: (Int) -> UnsafeMutableRawPointer?
    ) -> Int? {
        withUnsafePointer(to: &message) { pointer in
            let count = size(pointer)
            guard let destination = allocate(count) else { return nil }
            guard count > 0 else { return 0 }
            return pack(pointer, destination.assumingMemoryBound(to: UInt8.self))
        }
    }

    static func unpack<C, M>(
        _ bytes: [UInt8],
        _ name: String,
        unpack: (UnsafeMutablePointer<ProtobufCAllocator>?, Int, UnsafePointer<UInt8>?) -> UnsafeMutablePointer<C>?,
        free: (UnsafeMutablePointer<C>?, UnsafeMutablePointer<ProtobufCAllocator>?) -> Void,
        convert: (UnsafeMutablePointer<C>) -> M
    ) throws(ProtoDecodingError) -> M {
        let decoded: M? = bytes.withUnsafeBytes { buffer in decode(buffer, unpack: unpack, free: free, convert: convert) }
        guard let decoded else { throw ProtoDecodingError(messageName: name, byteCount: bytes.count) }
        return decoded
    }

    static func unpack<C, M>(
        _ buffer: UnsafeRawBufferPointer,
        _ name: String,
        unpack: (UnsafeMutablePointer<ProtobufCAllocator>?, Int, UnsafePointer<UInt8>?) -> UnsafeMutablePointer<C>?,
        free: (UnsafeMutablePointer<C>?, UnsafeMutablePointer<ProtobufCAllocator>?) -> Void,
        convert: (UnsafeMutablePointer<C>) -> M
    ) throws(ProtoDecodingError) -> M {
        guard let decoded = decode(buffer, unpack: unpack, free: free, convert: convert) else {
            throw ProtoDecodingError(messageName: name, byteCount: buffer.count)
        }
        return decoded
    }

    private static func decode<C, M>(
        _ buffer: UnsafeRawBufferPointer,
        unpack: (UnsafeMutablePointer<ProtobufCAllocator>?, Int, UnsafePointer<UInt8>?) -> UnsafeMutablePointer<C>?,
        free: (UnsafeMutablePointer<C>?, UnsafeMutablePointer<ProtobufCAllocator>?) -> Void,
        convert: (UnsafeMutablePointer<C>) -> M
    ) -> M? {
        // protobuf-c wants a valid pointer even for zero bytes.
        var empty: UInt8 = 0
        return withUnsafePointer(to: &empty) { fallback in
            let base = buffer.baseAddress?.assumingMemoryBound(to: UInt8.self) ?? fallback
            guard let message = unpack(nil, buffer.count, base) else { return nil }
            defer { free(message, nil) }
            return convert(message)
        }
    }

    static func string(_ pointer: UnsafeMutablePointer<CChar>?) -> String {
        guard let pointer else { return "" }
        return String(decoding: UnsafeRawBufferPointer(start: pointer, count: strlen(pointer)), as: UTF8.self)
    }

    /// Bytes lent to protobuf-c for one pack (read only; valid inside the lender's closure).
    static func lent(_ buffer: UnsafeBufferPointer<UInt8>) -> ProtobufCBinaryData {
        guard let base = buffer.baseAddress, buffer.count > 0 else { return ProtobufCBinaryData(len: 0, data: nil) }
        return ProtobufCBinaryData(len: buffer.count, data: UnsafeMutablePointer(mutating: base))
    }

    static func bytes(_ data: ProtobufCBinaryData) -> [UInt8] {
        guard data.len > 0, let base = data.data else { return [] }
        return Array(UnsafeBufferPointer(start: base, count: data.len))
    }

    static func array<T, R>(_ pointer: UnsafeMutablePointer<T>?, count: Int, _ transform: (T) -> R) -> [R] {
        guard let pointer, count > 0 else { return [] }
        return UnsafeBufferPointer(start: pointer, count: count).map(transform)
    }
}

/// Deterministic field values for the generated `sample(seed:)` (codec tests).
@_spi(Testing) public enum ProtoSample {
    public static func int32(_ seed: UInt64, _ field: Int) -> Int32 {
        switch seed % 4 {
        case 0: return .min
        case 1: return .max
        case 2: return -1
        default: return Int32(truncatingIfNeeded: seed &* 2_654_435_761 &+ UInt64(field))
        }
    }
    public static func int64(_ seed: UInt64, _ field: Int) -> Int64 {
        seed % 5 == 0 ? Int64.min : seed % 5 == 1 ? Int64.max : Int64(bitPattern: seed &* 0x9E37_79B9_7F4A_7C15 &+ UInt64(field))
    }
    public static func uint32(_ seed: UInt64, _ field: Int) -> UInt32 {
        seed % 3 == 0 ? UInt32.max : UInt32(truncatingIfNeeded: seed &* 2_654_435_761 &+ UInt64(field))
    }
    public static func uint64(_ seed: UInt64, _ field: Int) -> UInt64 {
        seed % 3 == 0 ? UInt64.max : seed &* 0x9E37_79B9_7F4A_7C15 &+ UInt64(field)
    }
    public static func string(_ seed: UInt64, _ field: String) -> String {
        seed % 4 == 0 ? "" : "\(field)-\(seed)-ünïcødé-🙂"
    }
    public static func bytes(_ seed: UInt64, _ field: Int) -> [UInt8] {
        (0..<Int((seed &+ UInt64(field)) % 7)).map { UInt8(truncatingIfNeeded: seed &+ UInt64($0 &* 37)) } + [0, 255]
    }
    public static func enumValue<E: ProtoEnum>(_ seed: UInt64, _ type: E.Type) -> E {
        seed % 7 == 6 ? E(rawValue: 999) : E.allKnownCases[Int(seed % UInt64(E.allKnownCases.count))]
    }
}
