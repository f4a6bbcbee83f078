@_spi(Testing) import FriensoProto
import Foundation
import Testing

@Suite("proto3 JSON mapping (generated init(json:), JSONParser)")
struct JSONMappingTests {
    @Test("every message type in proto/ round-trips through JSON text")
    func everyMessageRoundTrips() throws {
        for type in ProtoIndex.messageTypes {
            try roundTrip(type)
        }
    }

    private func roundTrip<M: ProtoMessage>(_ type: M.Type) throws {
        for seed in UInt64(0)..<40 {
            let value = M.sample(seed: seed, depth: 0)
            let text = value.jsonValue.rendered()
            let decoded = try M(json: JSONParser.parse(text))
            #expect(decoded == value, "\(M.protoName) seed \(seed): \(text)")
        }
    }

    @Test("every message type writes jsonValue's text without the tree (what the HTTP edge sends)")
    func writtenAsItsJSONValue() {
        func check<M: ProtoMessage>(_ type: M.Type) {
            for seed in UInt64(0)..<40 {
                let value = M.sample(seed: seed, depth: 0)
                var written: [UInt8] = []
                value.writeJSON(into: &written)
                #expect(written == value.jsonValue.utf8(), "\(M.protoName) seed \(seed)")
            }
        }
        for type in ProtoIndex.messageTypes { check(type) }
        // What the samples do not hold: escapes, fractions, values that are not numbers.
        var odd = GeoV1.NavigateResponse(distanceM: 12.345678, bearingDeg: .nan,
                                         theirFix: GeoV1.Fix(latitude: -33.8, longitude: .infinity, accuracyM: 1e20, deviceTimeMs: -1),
                                         yourFix: nil)
        var written: [UInt8] = []
        odd.writeJSON(into: &written)
        #expect(String(decoding: written, as: UTF8.self) == odd.jsonValue.rendered())
        #expect(String(decoding: written, as: UTF8.self).contains(#""bearingDeg":null"#))
        odd.yourFix = GeoV1.Fix()
        var status = GeoV1.UpdateLocationRequest()
        status.status = "a \"quoted\"\n\u{1}\\ ünï 🙂"
        for message in [odd as any ProtoMessage, status] {
            var text: [UInt8] = []
            message.writeJSON(into: &text)
            #expect(text == message.jsonValue.utf8())
        }
    }

    @Test("fields by their proto names too; null is the default; 64-bit values from strings and exact numbers")
    func acceptedForms() throws {
        let fix = try GeoV1.Fix(json: JSONParser.parse(#"{"latitude": 33.78, "accuracy_m": null, "device_time_ms": "1795444678658", "receivedAtMs": 12}"#))
        #expect(fix.latitude == 33.78 && fix.accuracyM == 0 && fix.deviceTimeMs == 1_795_444_678_658 && fix.receivedAtMs == 12)
        let big = try AccountsV1.GetProfileRequest(json: JSONParser.parse(#"{"userId": "18446744073709551615"}"#))
        #expect(big.userId == UInt64.max)
        let item = try MediaV1.MediaItem(json: JSONParser.parse(#"{"purpose": "PURPOSE_VENUE", "type": 2}"#))
        #expect(item.purpose == .venue && item.type == .png)
        let chunk = try MediaV1.UploadChunkRequest(json: JSONParser.parse(#"{"data": "_-8"}"#)) // base64url, unpadded
        #expect(chunk.data == [0xFF, 0xEF])
        #expect(try AccountsV1.GetProfileRequest(json: .null) == AccountsV1.GetProfileRequest())
    }

    @Test("what does not map is refused with the field's path")
    func refusals() throws {
        func error<M: ProtoMessage>(_ type: M.Type, _ text: String) -> String? {
            do {
                _ = try M(json: JSONParser.parse(text))
                return nil
            } catch {
                return error.description
            }
        }
        #expect(error(GeoV1.Fix.self, #"{"latitud": 1}"#) == "latitud: no such field")
        #expect(error(GeoV1.Fix.self, #"{"latitude": "north"}"#) == "latitude: expected a number")
        #expect(error(GeoV1.Fix.self, #"{"latitude": 1, "latitude": 2}"#) == "latitude: given twice")
        #expect(error(GeoV1.Fix.self, #"[1]"#)?.hasPrefix("expected an object") == true)
        #expect(error(AccountsV1.GetProfileRequest.self, #"{"userId": 9007199254740993}"#)?.hasPrefix("userId: expected an integer") == true)
        #expect(error(AccountsV1.GetProfileRequest.self, #"{"userId": -1}"#) == "userId: out of range for UInt64")
        #expect(error(AccountsV1.GetProfileRequest.self, #"{"userId": 1.5}"#)?.hasPrefix("userId: expected an integer") == true)
        #expect(error(MediaV1.MediaItem.self, #"{"purpose": "PURPOSE_NONE"}"#)?.hasPrefix("purpose: unknown value \"PURPOSE_NONE\"") == true)
        #expect(error(MediaV1.UploadChunkRequest.self, #"{"data": "not base64!"}"#) == "data: expected base64")
        #expect(error(GeoV1.NearbyResponse.self, #"{"users": [{}, {"distanceM": "far"}]}"#) == "users[1].distanceM: expected a number")
    }

    @Test("the parser is strict JSON: one value, escapes and surrogates, bounded nesting")
    func parser() throws {
        #expect(try JSONParser.parse(#" {"a": [1, -2.5e3, true, false, null, "\u00e9\ud83d\ude00\n"]} "#)
            == .object([("a", .array([.number(1), .number(-2500), .bool(true), .bool(false), .null, .string("é😀\n")]))]))
        let bad = [#"{"a": 1,}"#, "[1 2]", "01", "1.", "\"\u{01}\"", #""\x""#, #""\ud800""#, "nul", "{} {}", "", "[", #"{"a"}"#]
        for text in bad {
            #expect(throws: JSONMappingError.self, "\(text.debugDescription)") { try JSONParser.parse(text) }
        }
        let invalidUTF8: [UInt8] = [0x22, 0xC3, 0x28, 0x22]
        #expect(throws: JSONMappingError.self) { try JSONParser.parse(invalidUTF8) }
        let deep = String(repeating: "[", count: JSONParser.maxDepth + 1) + String(repeating: "]", count: JSONParser.maxDepth + 1)
        #expect(throws: JSONMappingError.self) { try JSONParser.parse(deep) }
        let fine = String(repeating: "[", count: JSONParser.maxDepth) + String(repeating: "]", count: JSONParser.maxDepth)
        _ = try JSONParser.parse(fine)
    }

    @Test("random bytes never crash the parser or the mapping")
    func randomInput() {
        var state: UInt64 = 0x9E37_79B9_7F4A_7C15
        let alphabet = Array(#"{}[]":,. -+eE0123456789tfnul\"abcxyz_"#.utf8)
        for _ in 0..<5_000 {
            state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            let count = Int(state >> 58)
            var bytes: [UInt8] = []
            for i in 0..<count {
                let r = (state >> UInt64(i % 50)) &+ UInt64(i) &* 31
                bytes.append(alphabet[Int(r % UInt64(alphabet.count))])
            }
            if let json = try? JSONParser.parse(bytes) {
                _ = try? GeoV1.NearbyResponse(json: json)
                _ = try? AccountsV1.RegisterRequest(json: json)
            }
        }
    }

    @Test("every client rpc has a JSON codec; internal ones are listed too, for the allow-list to refuse")
    func codecs() {
        for method in ProtoIndex.methods {
            #expect(ProtoIndex.jsonCodecs[method.fullName]?.method == method)
        }
    }
}
