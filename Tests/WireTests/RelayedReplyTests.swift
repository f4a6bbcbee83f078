import FriensoProto
import Testing
@testable import Wire

/// `ReplyFields`: the relay's own reading and writing of an encoded reply (`RelayedReply`),
/// checked against protobuf-c's pack and unpack of the same envelopes.
@Suite("relayed replies: reading a reply in place and writing the relayed one")
struct RelayedReplyTests {
    /// What the gateway sent before relays: the reply made from the decoded one, stamped with
    /// the caller's request id and method, packed by protobuf-c.
    static func decodedPath(_ serviceReply: Envelope, requestID: UInt64, method: String) -> [UInt8] {
        var reply = Envelope(version: WireProtocol.version, kind: .reply, status: serviceReply.status,
                             statusMessage: serviceReply.statusMessage, payload: serviceReply.payload)
        reply.requestId = requestID
        reply.method = method
        return reply.serializedBytes()
    }

    /// The relayed reply's bytes, written from a scan of `serviceBytes`; nil when it does not scan.
    static func relayedPath(_ serviceBytes: [UInt8], requestID: UInt64, method: String) -> [UInt8]? {
        ReplyFields.relay(serviceBytes, requestID: requestID, method: method)
    }

    /// The build's own check passes here (a client relays in place only when it does).
    @Test func theBuildsOwnCheckPasses() {
        #expect(ReplyFields.readsAsProtobufC)
    }

    static let statuses: [StatusCode] = StatusCode.allKnownCases + [.unrecognized(-1), .unrecognized(Int32.min), .unrecognized(40_000)]

    /// Every status, request ids and payloads across varint sizes, the fields a service's reply
    /// carries that a relay leaves behind (its own request id and method, not-started, stamps):
    /// the relayed bytes are exactly those protobuf-c packs on the decoded path.
    @Test func writesTheBytesProtobufCPacks() throws {
        var generator = SystemRandomNumberGenerator()
        let payloadSizes = [0, 1, 127, 128, 16_383, 16_384, 70_000]
        let requestIDs: [UInt64] = [0, 1, 127, 128, 1 << 35, .max]
        var checked = 0
        for status in Self.statuses {
            for size in payloadSizes {
                let requestID = requestIDs[checked % requestIDs.count]
                let service = Envelope(
                    version: WireProtocol.version, kind: .reply, requestId: UInt64.random(in: 1...UInt64.max, using: &generator),
                    method: "geo.UpdateLocation", callerUserId: UInt64(checked), sessionToken: checked.isMultiple(of: 3) ? "" : "token",
                    deadlineMs: UInt32(checked), status: status, statusMessage: checked.isMultiple(of: 2) ? "" : "refused: \(checked) ~ ok",
                    payload: (0..<size).map { _ in UInt8.random(in: 0...255, using: &generator) }, sequence: UInt64(size),
                    clientAddress: "10.0.0.1", sessionId: [1, 2, 3], notStarted: checked.isMultiple(of: 4))
                let method = checked.isMultiple(of: 5) ? "" : "caller.Method\(checked)"
                let relayed = try #require(Self.relayedPath(service.serializedBytes(), requestID: requestID, method: method))
                #expect(relayed == Self.decodedPath(service, requestID: requestID, method: method),
                        "status \(status), payload \(size) bytes, request id \(requestID)")
                checked += 1
            }
        }
        #expect(checked == Self.statuses.count * payloadSizes.count)
    }

    /// The scan reads the fields the client loop needs as protobuf-c decodes them.
    @Test func readsWhatProtobufCDecodes() throws {
        let service = Envelope(version: 7, kind: .reply, requestId: 1 << 40, method: "m", status: .unrecognized(-5),
                               statusMessage: "why", payload: [9, 8, 7], notStarted: true)
        let bytes = service.serializedBytes()
        try bytes.withUnsafeBytes { raw in
            let fields = try #require(ReplyFields(scanning: raw))
            #expect(fields.version == 7 && fields.kind == CommonV1.Kind.reply.rawValue && fields.requestID == 1 << 40)
            #expect(fields.status == -5 && fields.notStarted)
            #expect(Array(fields.statusMessage) == Array("why".utf8) && Array(fields.payload) == [9, 8, 7])
            #expect(RelayedReply(fields).envelope == Envelope(version: WireProtocol.version, kind: .reply, status: .unrecognized(-5),
                                                             statusMessage: "why", payload: [9, 8, 7]))
        }
        // Unknown fields of every wire type are skipped; the last of a repeated scalar wins, as in protobuf-c.
        var extended = bytes
        extended += [0x98, 0x06, 0x05] // field 99, varint
        extended += [0x99, 0x06] + [UInt8](repeating: 1, count: 8) // field 99, 64-bit
        extended += [0x9A, 0x06, 0x02, 0xAA, 0xBB] // field 99, length-delimited
        extended += [0x9D, 0x06] + [UInt8](repeating: 2, count: 4) // field 99, 32-bit
        extended += [0x48, 0x02] // status again: INVALID_ARGUMENT
        let decoded = try Envelope(serializedBytes: extended)
        try extended.withUnsafeBytes { raw in
            let fields = try #require(ReplyFields(scanning: raw))
            #expect(StatusCode(rawValue: fields.status) == decoded.status && decoded.status == .invalidArgument)
            #expect(Array(fields.payload) == decoded.payload && fields.requestID == decoded.requestId)
        }
    }

    /// What the scan leaves to protobuf-c's decode (the relay's decoded path): malformed bytes, a
    /// known field with another wire type, and a status message decoding would change.
    @Test func leavesToTheDecoderWhatItDoesNotReadWhole() {
        func scans(_ bytes: [UInt8]) -> Bool { bytes.withUnsafeBytes { ReplyFields(scanning: $0) != nil } }
        let valid = Envelope(version: 1, kind: .reply, requestId: 300, status: .ok, statusMessage: "m", payload: [1, 2, 3]).serializedBytes()
        #expect(scans(valid) && scans([]))
        // Cut inside a field (the tag's varint, a length, the bytes it promises): not scanned.
        #expect(!scans([0x18, 0xAC])) // request_id's varint cut
        #expect(!scans([0x5A, 0x05, 1, 2])) // payload shorter than its length
        #expect(!scans([0x5A])) // a tag and no length
        #expect(!scans([0x18] + [UInt8](repeating: 0xFF, count: 10) + [0x01])) // a varint of eleven bytes
        #expect(!scans([0x00, 0x01])) // field number 0
        #expect(!scans([0x4A, 0x01, 0x01])) // status (varint) as length-delimited
        #expect(!scans([0x58, 0x01])) // payload (bytes) as a varint
        #expect(!scans([0x1D, 0, 0, 0, 0])) // request_id as 32-bit
        #expect(!scans([0x9B, 0x06])) // a group
        // protobuf-c reads at most five bytes of a tag and of a length: longer ones it refuses.
        #expect(!scans([0x98, 0x80, 0x80, 0x80, 0x80, 0x00, 0x01])) // request_id's tag in six bytes
        #expect(!scans([0x5A, 0x83, 0x80, 0x80, 0x80, 0x80, 0x00, 1, 2, 3])) // a payload's length in six bytes
        #expect(scans([0x98, 0x80, 0x80, 0x80, 0x00, 0x01]) && scans([0x5A, 0x83, 0x80, 0x80, 0x80, 0x00, 1, 2, 3])) // five: read
        for bytes: [UInt8] in [[0x98, 0x80, 0x80, 0x80, 0x80, 0x00, 0x01], [0x5A, 0x83, 0x80, 0x80, 0x80, 0x80, 0x00, 1, 2, 3]] {
            #expect((try? Envelope(serializedBytes: bytes)) == nil, "protobuf-c refuses \(bytes) too")
        }
        // not_started whose only set bit is past the 64 a varint keeps: true, as protobuf-c reads a bool.
        let pastSixtyFour: [UInt8] = [0x80, 0x01] + [UInt8](repeating: 0x80, count: 9) + [0x02]
        #expect(pastSixtyFour.withUnsafeBytes { ReplyFields(scanning: $0)?.notStarted } == true)
        #expect((try? Envelope(serializedBytes: pastSixtyFour))?.notStarted == true)
        #expect(!scans(Envelope(kind: .reply, statusMessage: "caf\u{e9}").serializedBytes()))
        #expect(!scans([0x52, 0x03, 0x61, 0x00, 0x62])) // a NUL in the status message
        #expect(!scans([0x52, 0x02, 0xC3, 0x28])) // not UTF-8
        #expect(scans(Envelope(kind: .reply, statusMessage: "plain ascii ~").serializedBytes()))
    }

    /// Random bytes never crash the scan, and whatever it reads agrees with protobuf-c's decode
    /// of the same bytes when that succeeds.
    @Test func randomBytes_agreeWithProtobufC() throws {
        var generator = SystemRandomNumberGenerator()
        let seeds = [Envelope(version: 1, kind: .reply, requestId: 99, method: "a.B", status: .notFound, statusMessage: "gone",
                              payload: [1, 2, 3, 4, 5, 6, 7, 8], notStarted: false).serializedBytes(),
                     Envelope(kind: .reply, requestId: 1 << 50, status: .ok, payload: Array(repeating: 0x5A, count: 200)).serializedBytes()]
        var agreed = 0
        for round in 0..<20_000 {
            var bytes = seeds[round % seeds.count]
            // Flip, cut or splice a few bytes.
            for _ in 0..<Int.random(in: 1...3, using: &generator) {
                switch Int.random(in: 0..<3, using: &generator) {
                case 0: bytes[Int.random(in: 0..<bytes.count, using: &generator)] = UInt8.random(in: 0...255, using: &generator)
                case 1: bytes.removeLast(Int.random(in: 0..<min(bytes.count, 8), using: &generator))
                default: bytes.insert(UInt8.random(in: 0...255, using: &generator), at: Int.random(in: 0...bytes.count, using: &generator))
                }
                if bytes.isEmpty { bytes = [0x08, 0x01] }
            }
            let fields: (UInt32, Int32, UInt64, Int32, Bool, [UInt8], [UInt8])? = bytes.withUnsafeBytes { raw in
                ReplyFields(scanning: raw).map { ($0.version, $0.kind, $0.requestID, $0.status, $0.notStarted, Array($0.statusMessage), Array($0.payload)) }
            }
            guard let fields, let decoded = try? Envelope(serializedBytes: bytes) else { continue }
            #expect(fields.0 == decoded.version && fields.1 == decoded.kind.rawValue && fields.2 == decoded.requestId,
                    "\(bytes)")
            #expect(fields.3 == decoded.status.rawValue && fields.4 == decoded.notStarted, "\(bytes)")
            #expect(fields.5 == Array(decoded.statusMessage.utf8) && fields.6 == decoded.payload, "\(bytes)")
            agreed += 1
        }
        #expect(agreed > 1_000, "enough mutated envelopes still decode to compare")
    }
}
