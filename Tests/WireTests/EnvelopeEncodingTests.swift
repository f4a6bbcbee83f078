import FriensoProto
import FriensoTesting
import Testing
@testable import Wire

/// The envelope's hand-written encoder (`Envelope.encode(into:)`, issue 16, item 71) writes the
/// bytes protobuf-c packs for the same envelope: the sockets send those bytes, and every peer
/// decodes them with protobuf-c.
@Suite("wire: envelopes encoded by hand, byte for byte as protobuf-c")
struct EnvelopeEncodingTests {
    /// Field values drawn from a seeded `SplitMix`, so a failure names a reproducible seed.
    struct Random {
        var source: SplitMix
        mutating func next() -> UInt64 { source.next() }
        mutating func below(_ n: Int) -> Int { Int(next() % UInt64(n)) }
        /// Zero half the time (the field is left out), else a value of a random varint width.
        mutating func number() -> UInt64 {
            below(2) == 0 ? 0 : next() >> UInt64(below(64))
        }
        mutating func int32() -> Int32 {
            switch below(5) {
            case 0: 0
            case 1: -1
            case 2: Int32.min
            case 3: Int32(below(20))
            default: Int32(truncatingIfNeeded: next())
            }
        }
        mutating func string() -> String {
            let pieces = ["", "a", "accounts.Login", "ünïcödé ✓", "\u{0}", "nul\u{0}after", "🚨", " ", "\u{7F}", "é"]
            return (0..<below(4)).map { _ in pieces[below(pieces.count)] }.joined()
        }
        /// Lengths at each varint width of their own (the bytes themselves are copied as they are).
        mutating func bytes() -> [UInt8] {
            let count = [0, 0, 1, 2, 127, 128, 300, 16_384][below(8)]
            return [UInt8](repeating: UInt8(truncatingIfNeeded: next()), count: count)
        }
    }

    func randomEnvelope(_ random: inout Random) -> Envelope {
        Envelope(version: UInt32(truncatingIfNeeded: random.number()), kind: .init(rawValue: random.int32()), requestId: random.number(),
                 method: random.string(), callerUserId: random.number(), sessionToken: random.string(), idempotencyKey: random.string(),
                 deadlineMs: UInt32(truncatingIfNeeded: random.number()), status: .init(rawValue: random.int32()),
                 statusMessage: random.string(), payload: random.bytes(), sequence: random.number(), epoch: random.number(),
                 clientAddress: random.string(), sessionId: random.bytes(), notStarted: random.below(2) == 0,
                 features: random.below(2) == 0 ? 0 : UInt32(truncatingIfNeeded: random.number()))
    }

    /// Async, yielding now and then: a long loop on one of the two cooperative threads starved
    /// the tests running beside it (their hosts' handler tasks missed their deadlines).
    @Test func randomEnvelopes_encodeAsProtobufCPacksThem_andDecodeBack() async throws {
        var random = Random(source: SplitMix(seed: 71))
        for index in 0..<10_000 {
            if index.isMultiple(of: 250) { await Task.yield() }
            let envelope = randomEnvelope(&random)
            let mine = envelope.encodedBytes(), theirs = envelope.serializedBytes()
            #expect(mine.count == envelope.encodedSize)
            guard mine == theirs else {
                Issue.record("envelope \(index) (seed 71): \(mine.count) bytes by hand, \(theirs.count) by protobuf-c: \(envelope)")
                return
            }
            // protobuf-c reads them back as it reads its own (strings up to their first NUL).
            let decoded = try Envelope(serializedBytes: mine)
            #expect(decoded.requestId == envelope.requestId && decoded.payload == envelope.payload && decoded.notStarted == envelope.notStarted
                    && decoded.features == envelope.features)
        }
    }

    @Test func everyFieldAlone_andTheChecksSamples_encodeAsProtobufC() {
        var fields: [Envelope] = []
        for value: UInt64 in [1, 127, 128, 16_383, 16_384, UInt64(UInt32.max), UInt64.max] {
            fields += [Envelope(version: UInt32(truncatingIfNeeded: value)), Envelope(requestId: value), Envelope(callerUserId: value),
                       Envelope(deadlineMs: UInt32(truncatingIfNeeded: value)), Envelope(sequence: value), Envelope(epoch: value),
                       Envelope(features: UInt32(truncatingIfNeeded: value))]
        }
        for raw: Int32 in [1, 5, 127, 128, -1, Int32.min, Int32.max] {
            fields += [Envelope(kind: .init(rawValue: raw)), Envelope(status: .init(rawValue: raw))]
        }
        for text in ["x", "\u{0}", "\u{0}x", "x\u{0}y", String(repeating: "ü", count: 100)] {
            fields += [Envelope(method: text), Envelope(sessionToken: text), Envelope(idempotencyKey: text), Envelope(statusMessage: text),
                       Envelope(clientAddress: text)]
        }
        fields += [Envelope(payload: [0]), Envelope(payload: Array(repeating: 7, count: 300_000)), Envelope(sessionId: [0, 0]),
                   Envelope(notStarted: true), Envelope()]
        for envelope in fields + Envelope.samplesForTheEncodingCheck {
            #expect(envelope.encodedBytes() == envelope.serializedBytes(), "\(envelope)")
        }
        #expect(Envelope().encodedSize == 0)
        #expect(Envelope.encodesAsProtobufC, "this build encodes as protobuf-c packs")
    }
}
