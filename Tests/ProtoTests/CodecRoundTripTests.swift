@_spi(Testing) import FriensoProto
import FriensoTesting
import Foundation
import Testing

@Suite("protobuf-c codec")
struct CodecRoundTripTests {
    @Test("every message type in proto/ round-trips, with nested, repeated, bytes and enum fields set")
    func everyMessageRoundTrips() throws {
        #expect(ProtoIndex.messageTypes.count >= 25)
        for type in ProtoIndex.messageTypes {
            try roundTrip(type)
        }
    }

    private func roundTrip<M: ProtoMessage>(_ type: M.Type) throws {
        for seed in UInt64(0)..<40 {
            let value = M.sample(seed: seed, depth: 0)
            let bytes = value.serializedBytes()
            let decoded = try M(serializedBytes: bytes)
            #expect(decoded == value, "\(M.protoName) seed \(seed)")
            // The paths Wire uses with libzmq's memory: encode into a buffer of the exact size,
            // decode from a buffer; the same bytes and the same value.
            var buffer: UnsafeMutableRawBufferPointer?
            let written = value.serialize { count in
                buffer = .allocate(byteCount: max(count, 1), alignment: 1)
                return buffer?.baseAddress
            }
            let direct = buffer.map { Array($0.prefix(written ?? 0)) } ?? []
            buffer?.deallocate()
            #expect(written == bytes.count && direct == bytes, "\(M.protoName) seed \(seed): serialize(into:)")
            #expect(try bytes.withUnsafeBytes { try M(serializedBuffer: $0) } == value, "\(M.protoName) seed \(seed): init(serializedBuffer:)")
        }
        #expect(value(of: M.self, serializedInto: nil) == nil, "\(M.protoName): no buffer, nothing written")
        #expect(try M(serializedBytes: []) == M(), "\(M.protoName): empty bytes decode to the default value")
    }

    private func value<M: ProtoMessage>(of type: M.Type, serializedInto buffer: UnsafeMutableRawPointer?) -> Int? {
        M.sample(seed: 3, depth: 0).serialize { _ in buffer }
    }

    @Test("samples really set fields: a seeded value differs from the default")
    func samplesAreNotDefaults() {
        #expect(CommonV1.Envelope.sample(seed: 5, depth: 0) != CommonV1.Envelope())
        let envelope = CommonV1.Envelope.sample(seed: 5, depth: 0)
        #expect(!envelope.payload.isEmpty)
        #expect(!envelope.method.isEmpty)
    }

    @Test("unknown enum numbers survive a round trip (proto3 open enums)")
    func unknownEnumSurvives() throws {
        let envelope = CommonV1.Envelope(kind: .init(rawValue: 77), status: .init(rawValue: 1234))
        let decoded = try CommonV1.Envelope(serializedBytes: envelope.serializedBytes())
        #expect(decoded.kind == .unrecognized(77))
        #expect(decoded.status.rawValue == 1234)
    }

    @Test("random and truncated bytes either decode or throw; they never crash")
    func garbageNeverCrashes() {
        var generator = SystemRandomNumberGenerator()
        var rejected = 0
        for length in 0..<400 {
            let bytes = (0..<(length % 64)).map { _ in UInt8.random(in: 0...255, using: &generator) }
            if (try? CommonV1.Envelope(serializedBytes: bytes)) == nil { rejected += 1 }
            if (try? AccountsV1.RegisterResponse(serializedBytes: bytes)) == nil { rejected += 1 }
        }
        let valid = CommonV1.Envelope.sample(seed: 9, depth: 0).serializedBytes()
        for cut in 1..<valid.count {
            _ = try? CommonV1.Envelope(serializedBytes: Array(valid.prefix(cut)))
        }
        #expect(rejected > 0)
    }

    @Test("messages past the arenas' stack chunks round-trip: a payload in a block of its own, strings over chained chunks, a long repeated list")
    func largeMessagesRoundTrip() throws {
        // Encode and decode start their arenas in 1 KiB on the stack; past it they chain blocks
        // from malloc (doubling to 64 KiB), and anything over 16 KiB gets a block of its own.
        let payload = (0..<300_000).map { UInt8(truncatingIfNeeded: $0 &* 31) }
        let envelope = CommonV1.Envelope(
            method: String(repeating: "m", count: 900), sessionToken: String(repeating: "t", count: 700),
            idempotencyKey: String(repeating: "k", count: 5_000), statusMessage: "ünïcødé " + String(repeating: "s", count: 20_000),
            payload: payload, clientAddress: "198.51.100.7", sessionId: Array(repeating: 7, count: 17_000))
        let bytes = envelope.serializedBytes()
        #expect(try CommonV1.Envelope(serializedBytes: bytes) == envelope)
        #expect(try bytes.withUnsafeBytes { try CommonV1.Envelope(serializedBuffer: $0) } == envelope)

        let friends = (0..<3_000).map { i in
            SocialV1.Friend(user: SocialV1.UserRef(userId: UInt64(i), username: "user-\(i)-" + String(repeating: "u", count: i % 40),
                                                   firstName: "First \(i)", lastName: "Last", profilePictureMediaId: "media-\(i)"),
                            sinceMs: Int64(i) * 1_000)
        }
        let list = SocialV1.ListFriendsResponse(friends: friends)
        let decoded = try SocialV1.ListFriendsResponse(serializedBytes: list.serializedBytes())
        #expect(decoded == list)
        #expect(decoded.friends.count == 3_000 && decoded.friends.last?.user?.username.hasPrefix("user-2999-") == true)

        // Malformed past the stack chunk: protobuf-c gives up mid-message, and what it built is the arena's.
        #expect(throws: ProtoDecodingError.self) { try SocialV1.ListFriendsResponse(serializedBytes: Array(list.serializedBytes().dropLast(3))) }
    }

    @Test("a truncated message is rejected, not half-decoded")
    func truncatedIsRejected() {
        let bytes = CommonV1.Envelope(method: "accounts.Login", payload: [1, 2, 3, 4]).serializedBytes()
        #expect(throws: ProtoDecodingError.self) { try CommonV1.Envelope(serializedBytes: Array(bytes.dropLast(2))) }
    }
}

@Suite("wire compatibility with Google's protobuf")
struct ReferenceEncoderTests {
    static let protoc = Repository.which("protoc-c")

    @Test("our bytes equal the reference encoder's for every message type",
          .enabled(if: protoc != nil, "protoc-c is not installed: apt-get install protobuf-c-compiler"))
    func matchesReferenceEncoder() async throws {
        // Each seed's samples of every type go to protoc-c at once, as the fields of one message of
        // a wrapper type (`Every`, a field per type): two runs a seed instead of two a type and seed
        // (about 1,700 short runs, 90 s of a test run on two cores). A seed whose bytes differ is
        // checked again type by type, to name the types.
        let mismatches = await ProcessHarness.offPool {
            var found: [String] = []
            do {
                let scratch = try TemporaryDirectory("frienso-reference")
                defer { scratch.remove() }
                let wrapper = "\(scratch.path)/every.proto"
                try Self.wrapperProto().write(toFile: wrapper, atomically: true, encoding: .utf8)
                for seed: UInt64 in [1, 2, 6] {
                    var ours: [UInt8] = []
                    for (index, type) in ProtoIndex.messageTypes.enumerated() {
                        Self.appendField(index + 1, Self.sampleBytes(type, seed: seed), to: &ours)
                    }
                    let text = try Self.protocC(["-I", scratch.path, "--decode=frienso.reference.Every", wrapper], input: Data(ours))
                    let reference = try Self.protocC(["-I", scratch.path, "--encode=frienso.reference.Every", wrapper], input: text)
                    guard Array(reference) != ours else { continue }
                    let before = found.count
                    for type in ProtoIndex.messageTypes {
                        if let problem = Self.check(type, seed: seed) { found.append(problem) }
                    }
                    if found.count == before { found.append("seed \(seed): the wrapper's bytes differ from the reference encoder's, though no type's alone do") }
                }
            } catch {
                found.append("\(error)")
            }
            return found
        }
        #expect(mismatches.isEmpty, "\(mismatches.joined(separator: "\n"))")
    }

    /// A proto file with one message, `frienso.reference.Every`: field n is the n-th type of
    /// `ProtoIndex.messageTypes`.
    static func wrapperProto() -> String {
        var fields: [String] = []
        var files: Set<String> = []
        for (index, type) in ProtoIndex.messageTypes.enumerated() {
            let name = protoName(type)
            files.insert(protoFile(for: name))
            fields.append("  .\(name) m\(index + 1) = \(index + 1);")
        }
        let imports = files.sorted().map { "import \"\($0)\";" }
        return (["syntax = \"proto3\";", "package frienso.reference;"] + imports + ["message Every {"] + fields + ["}", ""])
            .joined(separator: "\n")
    }

    private static func protoName<M: ProtoMessage>(_ type: M.Type) -> String { M.protoName }

    private static func sampleBytes<M: ProtoMessage>(_ type: M.Type, seed: UInt64) -> [UInt8] {
        M.sample(seed: seed, depth: 0).serializedBytes()
    }

    /// Appends field `number` (wire type 2, length-delimited) holding `bytes`.
    private static func appendField(_ number: Int, _ bytes: [UInt8], to out: inout [UInt8]) {
        appendVarint(UInt64(number << 3 | 2), to: &out)
        appendVarint(UInt64(bytes.count), to: &out)
        out += bytes
    }

    private static func appendVarint(_ value: UInt64, to out: inout [UInt8]) {
        var rest = value
        while rest >= 0x80 {
            out.append(UInt8(rest & 0x7F) | 0x80)
            rest >>= 7
        }
        out.append(UInt8(rest))
    }

    /// - Returns: a description of the mismatch, or nil when the bytes agree.
    private static func check<M: ProtoMessage>(_ type: M.Type, seed: UInt64) -> String? {
        let ours = sampleBytes(type, seed: seed)
        let file = protoFile(for: M.protoName)
        // Decode our bytes to text with the reference implementation, then encode that text again.
        do {
            let text = try protocC(["--decode=\(M.protoName)", file], input: Data(ours))
            let reference = try protocC(["--encode=\(M.protoName)", file], input: text)
            return Array(reference) == ours ? nil : "\(M.protoName) seed \(seed): bytes differ from the reference encoder"
        } catch {
            return "\(M.protoName) seed \(seed): \(error)"
        }
    }

    private static func protoFile(for name: String) -> String {
        // frienso.accounts.v1.LoginRequest -> frienso/accounts/v1/accounts.proto
        let parts = name.split(separator: ".")
        let dir = parts.dropLast().joined(separator: "/")
        let domain = parts[1]
        return domain == "common" ? "\(dir)/envelope.proto" : "\(dir)/\(domain).proto"
    }

    static func protocC(_ arguments: [String], input: Data) throws -> Data {
        let (status, data) = try ProcessHarness.runCapturing([protoc!, "-I", Repository.root.appendingPathComponent("proto").path] + arguments,
                                                             input: input, errorsToOutput: false)
        guard status == 0 else { throw TimedOut(description: "protoc-c \(arguments) failed") }
        return data
    }
}
