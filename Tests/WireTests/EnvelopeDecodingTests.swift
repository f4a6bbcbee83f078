import FriensoProto
import FriensoTesting
import Testing
@testable import Wire

/// The envelope's hand-written decoder (`Envelope.scanned`, issue 16, item 97) gives what
/// protobuf-c's unpack gives for the same bytes, or leaves them to protobuf-c: hosts and clients
/// decode every envelope they receive with it, so a difference would be a request read otherwise
/// than its sender wrote it, or a malformed one accepted.
@Suite("wire: envelopes decoded by hand, as protobuf-c unpacks them")
struct EnvelopeDecodingTests {
    /// protobuf-c's answer for `bytes`, and the scan's; and `decoded`'s, which must be protobuf-c's.
    func compare(_ bytes: [UInt8], _ what: @autoclosure () -> String) {
        bytes.withUnsafeBytes { buffer in
            let theirs = try? Envelope(serializedBuffer: buffer)
            if let mine = Envelope.scanned(buffer) {
                #expect(theirs == mine, "\(what()): the scan read \(mine), protobuf-c \(theirs.map { "\($0)" } ?? "refused it")")
            }
            #expect((try? Envelope.decoded(buffer)) == theirs, "\(what()): decoded(_:) differs from protobuf-c")
        }
    }

    @Test func randomEnvelopes_decodeByHand_asProtobufCUnpacksThem() async {
        var random = EnvelopeEncodingTests.Random(source: SplitMix(seed: 97))
        let make = EnvelopeEncodingTests()
        for index in 0..<5_000 {
            if index.isMultiple(of: 250) { await Task.yield() }
            let bytes = make.randomEnvelope(&random).serializedBytes()
            let scanned = bytes.withUnsafeBytes { Envelope.scanned($0) }
            #expect(scanned != nil, "envelope \(index) (seed 97): protobuf-c's own bytes were not read by hand")
            compare(bytes, "envelope \(index) (seed 97)")
        }
    }

    /// Every prefix of an envelope, bytes flipped in it, and bytes that are no envelope at all:
    /// the scan reads what protobuf-c reads, and leaves the rest to it.
    @Test func brokenAndRandomBytes_areReadAsProtobufCReadsThem_orLeftToIt() async {
        var random = EnvelopeEncodingTests.Random(source: SplitMix(seed: 970))
        let make = EnvelopeEncodingTests()
        let whole = Envelope.samplesForTheEncodingCheck.map { $0.serializedBytes() }.filter { $0.count < 2_000 }
        for (index, bytes) in whole.enumerated() {
            await Task.yield()
            for end in 0...bytes.count { compare(Array(bytes[..<end]), "sample \(index) cut at \(end) of \(bytes.count) bytes") }
        }
        for index in 0..<5_000 {
            if index.isMultiple(of: 250) { await Task.yield() }
            var bytes = make.randomEnvelope(&random).serializedBytes()
            guard !bytes.isEmpty, bytes.count < 4_000 else { continue }
            for _ in 0...random.below(3) {
                bytes[random.below(bytes.count)] = UInt8(truncatingIfNeeded: random.next())
            }
            compare(bytes, "flipped envelope \(index) (seed 970)")
        }
        for index in 0..<5_000 {
            if index.isMultiple(of: 250) { await Task.yield() }
            let bytes = (0..<random.below(40)).map { _ in UInt8(truncatingIfNeeded: random.next()) }
            compare(bytes, "random bytes \(index) (seed 970): \(bytes)")
        }
    }

    @Test func whatOnlyAnotherPacker_writes_isReadAsProtobufCReadsIt() throws {
        for (index, bytes) in Envelope.samplesForTheDecodingCheck.enumerated() {
            compare(bytes, "decoding sample \(index)")
        }
        func scanned(_ bytes: [UInt8]) -> Envelope? { bytes.withUnsafeBytes { Envelope.scanned($0) } }
        // The last of a field seen twice; bits past a field's width dropped, or (a bool) counted.
        #expect(scanned([0x08, 0x01, 0x08, 0x02])?.version == 2)
        #expect(scanned([0x22, 0x01, 0x61, 0x22, 0x02, 0x62, 0x63])?.method == "bc")
        #expect(scanned([0x08, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x01])?.version == UInt32.max)
        #expect(scanned([0x80, 0x01, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x02])?.notStarted == true)
        #expect(scanned([0x88, 0x01, 0xFF, 0xFF, 0xFF, 0xFF, 0x1F])?.features == UInt32.max)
        // A string up to its first NUL, as protobuf-c's C string ends there.
        #expect(scanned([0x52, 0x04, 0x61, 0x00, 0x62, 0xFF])?.statusMessage == "a")
        // Malformed, or a known field with another wire type, or a group: protobuf-c decides (and refuses).
        for refused: [UInt8] in [[0x22, 0x05, 0x61], [0x0A, 0x01, 0x61], [0x21, 1, 2, 3, 4, 5, 6, 7, 8], [0x0B, 0x0C], [0x00, 0x01], [0x18]] {
            #expect(scanned(refused) == nil, "\(refused)")
            #expect(throws: ProtoDecodingError.self) { try Envelope.decoded(refused) }
        }
        #expect(try Envelope.decoded([UInt8]()) == Envelope())
        #expect(Envelope.decodesAsProtobufC, "this build decodes as protobuf-c unpacks")
    }
}
