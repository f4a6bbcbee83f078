import FriensoProto
import FriensoTesting
import Testing
@testable import Wire

/// `KnownMethod`, the numbered index of the method names this build knows, and `MethodTable`,
/// the tables found by it (item 110).
@Suite("the index of known method names")
struct KnownMethodTests {
    /// Every contract method, every member's Ping and Metrics and the gateway's own are in it,
    /// once, and each is found by its name's string and its bytes at its own ordinal.
    @Test func everyKnownName_isFound_atItsOrdinal() {
        let names = KnownMethod.names
        #expect(Set(names).count == names.count)
        #expect(Set(names) == MethodLabels.known)
        for method in ProtoIndex.methods { #expect(names.contains(method.fullName)) }
        for service in GatewayConfigNames.services + ["gateway", "edge"] {
            #expect(names.contains("\(service).Ping"))
            #expect(names.contains("\(service).Metrics"))
        }
        #expect(names.contains(CommonMethods.subscribe.fullName))
        #expect(names.contains(CommonMethods.unsubscribe.fullName))
        for (ordinal, name) in names.enumerated() {
            #expect(KnownMethod(name)?.ordinal == ordinal)
            #expect(Array(name.utf8).withUnsafeBytes { KnownMethod(utf8: $0) }?.ordinal == ordinal)
            #expect(KnownMethod(name)?.name == name)
        }
    }

    /// Names next to the known ones are not found: a byte changed anywhere, one added or taken
    /// at either end, a NUL after, other case, the empty name, and random bytes (the lookup
    /// confirms byte for byte whatever the hash says).
    @Test func namesNextToKnownOnes_areNotFound() {
        #expect(KnownMethod("") == nil)
        let known = Set(KnownMethod.names)
        var near: [String] = []
        for name in KnownMethod.names {
            near += [name + "x", "x" + name, String(name.dropLast()), String(name.dropFirst()), name + "\0", name.uppercased(), name.lowercased()]
            let bytes = Array(name.utf8)
            for index in bytes.indices {
                var changed = bytes
                changed[index] ^= 0x01
                near.append(String(decoding: changed, as: UTF8.self))
            }
        }
        var random = SplitMix(seed: 110)
        for _ in 0..<2_000 {
            let count = Int(random.next() % 40)
            near.append(String((0..<count).map { _ in Character(Unicode.Scalar(UInt8(97 + random.next() % 26))) }))
        }
        for name in near where !known.contains(name) {
            #expect(KnownMethod(name) == nil, "\(name)")
            #expect(Array(name.utf8).withUnsafeBytes { KnownMethod(utf8: $0) } == nil, "\(name)")
        }
    }

    /// A decoded envelope's known method is the index's one string (no new one: for a name past
    /// fifteen bytes, the same storage), and decoding says which it is; an unknown name decodes
    /// as before, with none.
    @Test func decoding_givesTheIndexsString_andItsOrdinal() throws {
        let long = GeoV1.GeoService.updateLocation.fullName
        #expect(long.utf8.count > 15)
        for name in [long, "geo.Ping", "no.such/Method", ""] {
            let bytes = Envelope(version: WireProtocol.version, kind: .request, requestId: 7, method: name).serializedBytes()
            var known: KnownMethod?
            let envelope = try bytes.withUnsafeBytes { buffer throws(ProtoDecodingError) in try Envelope.decoded(buffer, knownMethod: &known) }
            #expect(envelope.method == name)
            #expect(known == KnownMethod(name))
            if let known, name.utf8.count > 15 {
                #expect(Self.storage(of: envelope.method) == Self.storage(of: known.name))
            }
        }
        // The method's field twice: the last one read is the method, and its ordinal.
        let twice: [UInt8] = [0x22, 0x08] + Array("geo.Ping".utf8) + [0x22, 0x01, 0x78]
        var known: KnownMethod? = KnownMethod("geo.Ping")
        let envelope = twice.withUnsafeBytes { Envelope.scanned($0, knownMethod: &known) }
        #expect(envelope?.method == "x")
        #expect(known == nil)
    }

    /// Where a string's UTF-8 bytes are (for a large string, its storage; a small one, held
    /// inline, is copied somewhere for the call).
    private static func storage(of string: String) -> UnsafeRawPointer? {
        string.utf8.withContiguousStorageIfAvailable { UnsafeRawPointer($0.baseAddress) } ?? nil
    }

    /// A `MethodTable` answers as a dictionary by name does, over random settings, replacements
    /// and removals of known and unknown names, by name and by ordinal.
    @Test func methodTable_agreesWithADictionary() {
        var random = SplitMix(seed: 1_110)
        let names = KnownMethod.names + (0..<40).map { "test.Method\($0)" }
        var table = MethodTable<Int>()
        var model: [String: Int] = [:]
        for step in 0..<20_000 {
            let name = names[Int(random.next() % UInt64(names.count))]
            switch random.next() % 4 {
            case 0, 1:
                table[name] = step
                model[name] = step
            case 2:
                table[name] = nil
                model[name] = nil
            default:
                #expect(table[name] == model[name])
                #expect(table[KnownMethod(name), name] == model[name])
            }
            if step % 1_000 == 0 {
                #expect(table.count == model.count)
                #expect(table.isEmpty == model.isEmpty)
                #expect(Set(table.names) == Set(model.keys))
            }
        }
        for name in names { #expect(table[name] == model[name]) }
    }
}

/// The services the gateway routes to (`GatewayConfig.serviceNames`, not importable here).
private enum GatewayConfigNames {
    static let services = ["accounts", "social", "geo", "alerts", "media"]
}
