import Foundation
import FriensoProto

/// A method name this build knows, by its number: every contract method, every member's `Ping`
/// and `Metrics`, and the gateway's own (`KnownMethod.names`; `MethodLabels.known` is the same
/// set). Decoding an envelope finds its method here from the bytes (`init(utf8:)`) and gives it
/// the one `String` made for that name, and the tables a request goes through on its way
/// (`MethodTable`: a host's routes and metrics, the gateway's routes) find it by this number.
///
/// Each method name used to be a new `String` at every decode (validated as UTF-8, allocated past
/// 15 bytes) and hashed with SipHash at every lookup: on the gateway path four strings and five
/// lookups a request, about 2,600 instructions (issue 16, item 110 of `docs/benchmarks.md`).
/// The names are looked up with a multiplicative hash of their length and first and last eight
/// bytes in a table kept at most an eighth full, and always confirmed byte for byte (those
/// sixteen bytes and the length, then any middle): a name that is not one of these is not
/// found, whatever its hash. Hand-written for the reason `RequestTable` is: no listed package
/// has a table that takes another hash.
public struct KnownMethod: Hashable, Sendable {
    /// Its place in `names`.
    public let ordinal: Int

    /// The method named `name`, if this build knows it.
    public init?(_ name: String) {
        var name = name
        guard let ordinal = name.withUTF8({ Self.index.ordinal(of: UnsafeRawBufferPointer($0)) }) else { return nil }
        self.ordinal = ordinal
    }

    /// The method whose name is these UTF-8 bytes exactly, if this build knows it.
    init?(utf8 bytes: UnsafeRawBufferPointer) {
        guard let ordinal = Self.index.ordinal(of: bytes) else { return nil }
        self.ordinal = ordinal
    }

    /// Its name: the same `String` every time (decoding a request for it makes none).
    public var name: String { Self.index.names[ordinal] }

    /// Every name this build knows, in the order of their ordinals: the contracts' methods as
    /// `ProtoIndex.methods` lists them, then each member's `Ping` and `Metrics` (members in
    /// alphabetical order), then the gateway's `Subscribe` and `Unsubscribe`.
    public static var names: [String] { index.names }

    /// How many there are: the ordinals are `0..<count`.
    public static var count: Int { index.names.count }

    private static let index = Index(names: {
        var names = ProtoIndex.methods.map(\.fullName)
        for member in Set(ProtoIndex.methods.map(\.service)).union(["gateway", "edge"]).sorted() {
            names.append(CommonMethods.ping(member).fullName)
            names.append(CommonMethods.metrics(member).fullName)
        }
        names.append(CommonMethods.subscribe.fullName)
        names.append(CommonMethods.unsubscribe.fullName)
        return names
    }())

    /// The names, and an open-addressing table of them (linear probing) whose slots hold what
    /// tells a name apart: its length and its first and last eight bytes, which are all of it
    /// up to 16 bytes; a longer name's middle is compared with its bytes in `bytes`.
    private final class Index: Sendable {
        let names: [String]
        private let slots: [Slot]
        private let shift: UInt64
        /// The names' bytes end to end, and where each starts (one more entry for the end).
        private let bytes: [UInt8], starts: [Int]

        private struct Slot {
            var head: UInt64 = 0, tail: UInt64 = 0
            var count = 0
            /// -1: empty.
            var ordinal = -1
        }

        init(names: [String]) {
            precondition(Set(names).count == names.count, "a method name is listed twice")
            self.names = names
            var bytes: [UInt8] = [], starts: [Int] = []
            for name in names {
                starts.append(bytes.count)
                bytes.append(contentsOf: name.utf8)
            }
            starts.append(bytes.count)
            self.bytes = bytes
            self.starts = starts
            var bits = 4
            while 1 << bits < names.count * 8 { bits += 1 }
            shift = UInt64(64 - bits)
            var slots = [Slot](repeating: Slot(), count: 1 << bits)
            for (ordinal, name) in names.enumerated() {
                var name = name
                let (head, tail) = name.withUTF8 { Self.ends(UnsafeRawBufferPointer($0)) }
                let count = name.utf8.count
                var slot = Self.slot(head, tail, count, shift: shift)
                while slots[slot].ordinal >= 0 { slot = (slot + 1) & (slots.count - 1) }
                slots[slot] = Slot(head: head, tail: tail, count: count, ordinal: ordinal)
            }
            self.slots = slots
        }

        func ordinal(of name: UnsafeRawBufferPointer) -> Int? {
            let (head, tail) = Self.ends(name)
            let count = name.count
            var slot = Self.slot(head, tail, count, shift: shift)
            return slots.withUnsafeBufferPointer { slots in
                while true {
                    let candidate = slots[slot]
                    if candidate.ordinal < 0 { return nil }
                    if candidate.head == head, candidate.tail == tail, candidate.count == count,
                       count <= 16 || middleMatches(candidate.ordinal, name) {
                        return candidate.ordinal
                    }
                    slot = (slot + 1) & (slots.count - 1)
                }
            }
        }

        /// Whether the bytes between the first and the last eight of a name longer than 16 are
        /// those of the name at `ordinal` (of the same length).
        private func middleMatches(_ ordinal: Int, _ name: UnsafeRawBufferPointer) -> Bool {
            let start = starts[ordinal]
            return bytes.withUnsafeBytes { memcmp($0.baseAddress! + start + 8, name.baseAddress! + 8, name.count - 16) == 0 }
        }

        /// The first eight bytes and the last eight (overlapping in a name shorter than 16); a
        /// name shorter than eight is all in the first, zero-filled, and the last is zero.
        @inline(__always)
        private static func ends(_ name: UnsafeRawBufferPointer) -> (UInt64, UInt64) {
            let count = name.count
            if count >= 8 {
                return (name.loadUnaligned(as: UInt64.self), name.loadUnaligned(fromByteOffset: count - 8, as: UInt64.self))
            }
            var head: UInt64 = 0
            if count > 0 { withUnsafeMutableBytes(of: &head) { $0.copyMemory(from: name) } }
            return (head, 0)
        }

        /// The slot to look in first: the ends and the length multiplied by odd constants, and
        /// the top bits kept.
        @inline(__always)
        private static func slot(_ head: UInt64, _ tail: UInt64, _ count: Int, shift: UInt64) -> Int {
            let mixed = (head &* 0x9E37_79B9_7F4A_7C15) ^ (tail &* 0xC2B2_AE3D_27D4_EB4F) ^ (UInt64(count) &* 0x1656_67B1_9E37_79F9)
            return Int(truncatingIfNeeded: ((mixed ^ (mixed >> 31)) &* 0x9E37_79B9_7F4A_7C15) >> shift)
        }
    }
}

/// One method's name, made once with its place in `KnownMethod`'s index (a host's own `Ping` and
/// `Metrics`), to compare a request's method with: by number when the index has it, else by name.
struct OwnMethod: Sendable {
    let name: String
    let known: KnownMethod?

    init(_ name: String) {
        self.name = name
        known = KnownMethod(name)
    }

    /// Whether a request's method (`known` in the index, `name`) is this one.
    func matches(_ known: KnownMethod?, _ name: String) -> Bool {
        if let mine = self.known { return known == mine }
        return name == self.name
    }
}

/// Values by method name, for the tables every request looks in (a host's routes and metrics,
/// the gateway's routes): a method this build knows is found by its ordinal (`KnownMethod`),
/// without hashing its name; any other name (a test's method, a client's unknown one) in a
/// dictionary beside.
public struct MethodTable<Value> {
    private var known: [Value?]
    private var others: [String: Value] = [:]

    public init() {
        known = Array(repeating: nil, count: KnownMethod.count)
    }

    /// How many names have a value.
    public private(set) var count = 0

    /// By name: finds the method's ordinal first (registration, and the rarer lookups).
    public subscript(_ name: String) -> Value? {
        get { self[KnownMethod(name), name] }
        set {
            let had: Bool
            if let method = KnownMethod(name) {
                had = known[method.ordinal] != nil
                known[method.ordinal] = newValue
            } else {
                had = (newValue.map { others.updateValue($0, forKey: name) } ?? others.removeValue(forKey: name)) != nil
            }
            count += (newValue == nil ? 0 : 1) - (had ? 1 : 0)
        }
    }

    /// By the method `name` names, found already (`IncomingRequest.knownMethod`): nil only for a
    /// name this build does not know.
    public subscript(_ method: KnownMethod?, _ name: String) -> Value? {
        assert(method == KnownMethod(name), "\(name) looked up with another method's ordinal")
        if let method { return known[method.ordinal] }
        return others.isEmpty ? nil : others[name]
    }

    /// The request's method's value.
    public subscript(request request: IncomingRequest) -> Value? {
        self[request.knownMethod, request.envelope.method]
    }

    /// The names that have a value, in no particular order.
    public var names: [String] {
        known.indices.compactMap { known[$0] == nil ? nil : KnownMethod.names[$0] } + others.keys
    }

    public var isEmpty: Bool { count == 0 }
}

extension MethodTable: Sendable where Value: Sendable {}
