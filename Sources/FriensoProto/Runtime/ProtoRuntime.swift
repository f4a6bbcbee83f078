internal import FriensoProtoC
import Glibc

/// A bump allocator for the C memory of one encode or decode: allocations are carved from a
/// buffer on the caller's stack (at most 1 KiB, the size Swift places on the stack without
/// asking the runtime how much is left), then from `malloc`'d chunks doubling from 2 KiB to
/// 64 KiB; anything over 16 KiB (a payload) gets a block of its own. Chunks are chained through
/// their first 16 bytes and freed together by `release()`. One `malloc` per string, array and
/// nested message was the largest single item in every service's profile; with this, a typical
/// envelope needs none.
struct BumpAllocator {
    static let stackBytes = 1024
    static let alignment = 16
    private static let firstChunk = 2048
    private static let largestChunk = 64 << 10
    /// Room at the front of each chunk for the link to the one before (alignment kept).
    private static let header = 16

    private var cursor: UnsafeMutableRawPointer?
    private var remaining: Int
    private var chunks: UnsafeMutableRawPointer?
    private var nextChunk = BumpAllocator.firstChunk

    /// `stack` is the caller's and outlives this allocator; it is never freed here.
    init(stack: UnsafeMutableRawBufferPointer) {
        cursor = stack.baseAddress
        remaining = stack.count
    }

    /// nil only when `malloc` fails.
    mutating func allocate(_ size: Int) -> UnsafeMutableRawPointer? {
        let size = max(1, (size + Self.alignment - 1) & ~(Self.alignment - 1))
        if size > remaining {
            if size > Self.largestChunk / 4 {
                // Large: a block of its own, leaving the current chunk in use.
                return chain(Self.header + size).map { $0 + Self.header }
            }
            while nextChunk < Self.header + size { nextChunk *= 2 }
            guard let chunk = chain(nextChunk) else { return nil }
            cursor = chunk + Self.header
            remaining = nextChunk - Self.header
            nextChunk = min(nextChunk * 2, Self.largestChunk)
        }
        let pointer = cursor!
        cursor = pointer + size
        remaining -= size
        return pointer
    }

    private mutating func chain(_ bytes: Int) -> UnsafeMutableRawPointer? {
        guard let chunk = malloc(bytes) else { return nil }
        chunk.storeBytes(of: chunks, as: UnsafeMutableRawPointer?.self)
        chunks = chunk
        return chunk
    }

    /// Frees every chunk from `malloc`; the stack buffer goes with its scope.
    mutating func release() {
        while let chunk = chunks {
            chunks = chunk.load(as: UnsafeMutableRawPointer?.self)
            free(chunk)
        }
    }
}

/// Owns the C memory that an encode borrows: strings, arrays and nested messages, freed when
/// the arena goes away, after `pack` has copied them into the output. The generated encoders
/// create it over a stack buffer (`withUnsafeTemporaryAllocation`); it never escapes them, so
/// Swift places the object itself on the stack too.
final class ProtoArena {
    static let stackBytes = BumpAllocator.stackBytes
    static let alignment = BumpAllocator.alignment
    /// Unchecked: one encode uses the arena, on one thread, and nothing re-enters `raw`. The
    /// dynamic exclusivity check on every allocation cost about 900 instructions a Wire request
    /// (48,053 against 47,154, item 61 of `docs/benchmarks.md`).
    @exclusivity(unchecked) private var memory: BumpAllocator

    init(stack: UnsafeMutableRawBufferPointer) {
        memory = BumpAllocator(stack: stack)
    }

    deinit {
        memory.release()
    }

    private func raw(_ size: Int) -> UnsafeMutableRawPointer {
        guard let pointer = memory.allocate(size) else { preconditionFailure("out of memory") }
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
        convert: (UnsafeMutablePointer<C>) -> M
    ) throws(ProtoDecodingError) -> M {
        let decoded: M? = bytes.withUnsafeBytes { buffer in decode(buffer, unpack: unpack, convert: convert) }
        guard let decoded else { throw ProtoDecodingError(messageName: name, byteCount: bytes.count) }
        return decoded
    }

    static func unpack<C, M>(
        _ buffer: UnsafeRawBufferPointer,
        _ name: String,
        unpack: (UnsafeMutablePointer<ProtobufCAllocator>?, Int, UnsafePointer<UInt8>?) -> UnsafeMutablePointer<C>?,
        convert: (UnsafeMutablePointer<C>) -> M
    ) throws(ProtoDecodingError) -> M {
        guard let decoded = decode(buffer, unpack: unpack, convert: convert) else {
            throw ProtoDecodingError(messageName: name, byteCount: buffer.count)
        }
        return decoded
    }

    private static func decode<C, M>(
        _ buffer: UnsafeRawBufferPointer,
        unpack: (UnsafeMutablePointer<ProtobufCAllocator>?, Int, UnsafePointer<UInt8>?) -> UnsafeMutablePointer<C>?,
        convert: (UnsafeMutablePointer<C>) -> M
    ) -> M? {
        // protobuf-c wants a valid pointer even for zero bytes.
        var empty: UInt8 = 0
        return withUnsafePointer(to: &empty) { fallback in
            let base = buffer.baseAddress?.assumingMemoryBound(to: UInt8.self) ?? fallback
            // Everything protobuf-c allocates for this message (the struct, its strings, bytes,
            // arrays and nested messages, its scratch slabs) comes from an arena that starts on
            // the stack and is dropped whole once `convert` has copied the fields out: no
            // `malloc` for a typical envelope and no `free_unpacked` walk over the fields.
            return withUnsafeTemporaryAllocation(byteCount: BumpAllocator.stackBytes, alignment: BumpAllocator.alignment) { stack -> M? in
                var arena = BumpAllocator(stack: stack)
                defer { arena.release() }
                return withUnsafeMutablePointer(to: &arena) { arenaPointer -> M? in
                    var allocator = ProtobufCAllocator(alloc: decodeArenaAlloc, free: decodeArenaFree, allocator_data: arenaPointer)
                    guard let message = unpack(&allocator, buffer.count, base) else { return nil }
                    return convert(message)
                }
            }
        }
    }

    static func string(_ pointer: UnsafeMutablePointer<CChar>?) -> String {
        // Most of an envelope's strings are empty (protobuf-c points them at its own ""): no
        // `strlen` and no UTF-8 check for those, which were about 1,500 instructions of a Wire
        // request's 44,000 (issue 16, item 62).
        guard let pointer, pointer.pointee != 0 else { return "" }
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

/// protobuf-c's allocator for one decode: `allocator_data` points to a `BumpAllocator`; `free`
/// does nothing, and everything goes at once when the decode releases the allocator. protobuf-c
/// keeps no pointer to the allocator after `unpack` returns, and on a malformed message it frees
/// what it built through `free` (a no-op here; the release reclaims it).
private let decodeArenaAlloc: @convention(c) (UnsafeMutableRawPointer?, Int) -> UnsafeMutableRawPointer? = { data, size in
    data?.assumingMemoryBound(to: BumpAllocator.self).pointee.allocate(size)
}

private let decodeArenaFree: @convention(c) (UnsafeMutableRawPointer?, UnsafeMutableRawPointer?) -> Void = { _, _ in }

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
