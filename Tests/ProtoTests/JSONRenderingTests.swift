import FriensoProto
import Testing

/// `JSONValue`'s text: what the edge sends, the CLI prints and the logs carry. Written as UTF-8
/// bytes (issue 16, item 131); the same text as the `String` renderer it replaced.
@Suite("JSON text (JSONValue.rendered, utf8)")
struct JSONRenderingTests {
    static let mixed = JSONValue.object([
        ("a", .array([.number(1), .number(2.5), .number(-3), .null, .bool(true), .bool(false)])),
        ("s", .string("q\"b\\n\n\t\r\u{01}\u{1F}\u{7F} é 😀")),
        ("e", .object([])),
        ("f", .array([])),
        ("k \"x\"", .number(.nan)),
        ("big", .number(1e15)),
        ("neg", .number(-1_795_444_678_658)),
    ])

    @Test("one line: escapes as RFC 8259 wants them, numbers whole when they are")
    func oneLine() {
        let expected = #"{"a":[1,2.5,-3,null,true,false],"s":"q\"b\\n\n\t\r\u0001\u001f"# + "\u{7F} é 😀" +
            #"","e":{},"f":[],"k \"x\"":null,"big":1000000000000000.0,"neg":-1795444678658}"#
        #expect(Self.mixed.rendered() == expected)
        #expect(Self.mixed.utf8() == Array(expected.utf8))
    }

    @Test("indented: a value a line, the CLI's layout")
    func indented() {
        let value = JSONValue.object([("a", .array([.number(1), .object([("b", .string("c"))])])), ("d", .object([])), ("e", .array([]))])
        #expect(value.rendered(indent: 2) == """
            {
              "a": [
                1,
                {
                  "b": "c"
                }
              ],
              "d": {},
              "e": []
            }
            """)
        #expect(JSONValue.string("x").rendered(indent: 2) == #""x""#)
        #expect(JSONValue.array([.null]).rendered(indent: 1) == "[\n null\n]")
    }

    @Test("a string quoted into a String is the bytes quoted, every control character escaped")
    func quoting() {
        var all = ""
        for value in 0..<0x80 { all.unicodeScalars.append(Unicode.Scalar(UInt8(value))) }
        all += "ß∑😀"
        var text = ""
        JSONValue.quote(all, into: &text)
        var bytes: [UInt8] = []
        JSONValue.quote(all, into: &bytes)
        #expect(Array(text.utf8) == bytes)
        #expect(text.hasPrefix(#""\u0000\u0001"#) && text.contains(##"\u001f !\"#"##) && text.contains(#"[\\]"#) && text.hasSuffix("\u{7F}ß∑😀\""))
        #expect(!text.unicodeScalars.contains { $0.value < 0x20 }, "no raw control character is left")
        #expect((try? JSONParser.parse(text)) == .string(all))
    }

    @Test("random values read back as themselves")
    func roundTrips() throws {
        var random = SystemRandomNumberGenerator()
        let pieces = ["", "a", "\"", "\\", "\n", "\u{0}", "\u{1B}", "é", "😀", "/", "\u{7F}", "\u{2028}"]
        func string() -> String { (0..<Int.random(in: 0...6, using: &random)).map { _ in pieces.randomElement(using: &random)! }.joined() }
        func value(_ depth: Int) -> JSONValue {
            switch Int.random(in: 0...(depth > 3 ? 3 : 5), using: &random) {
            case 0: return .null
            case 1: return .bool(Bool.random(using: &random))
            case 2: return .number(Bool.random(using: &random) ? Double(Int.random(in: -1_000_000...1_000_000, using: &random)) : Double.random(in: -1e6...1e6, using: &random))
            case 3: return .string(string())
            case 4: return .array((0..<Int.random(in: 0...4, using: &random)).map { _ in value(depth + 1) })
            default: return .object((0..<Int.random(in: 0...4, using: &random)).map { _ in (string(), value(depth + 1)) })
            }
        }
        for _ in 0..<500 {
            let v = value(0)
            let text = v.rendered()
            #expect(Array(text.utf8) == v.utf8())
            #expect(try JSONParser.parse(text) == v, "\(text)")
            #expect(try JSONParser.parse(v.rendered(indent: 2)) == v)
        }
    }
}

extension JSONRenderingTests {
    @Test("integers: the digits String writes, both ends of each type included; quoted as proto3 wants 64-bit values")
    func integers() {
        for value: Int64 in [0, 1, -1, 9, 10, -10, 999_999_999_999_999, -999_999_999_999_999, Int64.max, Int64.min] {
            var out: [UInt8] = []
            JSONText.quoted(value, into: &out)
            #expect(out == Array("\"\(value)\"".utf8))
            out = []
            JSONText.number(Double(value), into: &out)
            #expect(out == JSONValue.number(Double(value)).utf8(), "\(value)")
        }
        for value: UInt64 in [0, 7, 10, UInt64(Int64.max) + 1, UInt64.max] {
            var out: [UInt8] = []
            JSONText.quoted(value, into: &out)
            #expect(out == Array("\"\(value)\"".utf8))
        }
        var out: [UInt8] = []
        JSONText.number(-0.0, into: &out)
        JSONText.number(123_456_789_012_345, into: &out)
        #expect(String(decoding: out, as: UTF8.self) == "0123456789012345")
    }
}
