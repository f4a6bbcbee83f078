import Foundation

/// A JSON document with ordered object keys: what `--json` output and tools print.
public indirect enum JSONValue: Sendable, Hashable {
    case null
    case bool(Bool)
    case number(Double)
    case string(String)
    case array([JSONValue])
    case object([(String, JSONValue)])

    /// Bytes as base64, as proto3 JSON wants them.
    public static func bytes(_ bytes: [UInt8]) -> JSONValue {
        .string(Data(bytes).base64EncodedString())
    }

    public static func == (lhs: JSONValue, rhs: JSONValue) -> Bool { lhs.utf8() == rhs.utf8() }
    public func hash(into hasher: inout Hasher) { hasher.combine(utf8()) }

    /// The value as JSON text. - Parameter indent: spaces per level; 0 for one line.
    public func rendered(indent: Int = 0) -> String {
        String(decoding: utf8(indent: indent), as: UTF8.self)
    }

    /// The value as JSON text in UTF-8, what `rendered` decodes: a response body is written
    /// from these bytes without a `String` in between. Bytes appended to one array, strings
    /// copied a run at a time (`docs/benchmarks.md`, issue 16, item 131).
    /// - Parameter indent: spaces per level; 0 for one line.
    public func utf8(indent: Int = 0) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(256)
        write(to: &out, indent: indent, level: 0)
        return out
    }

    private func write(to out: inout [UInt8], indent: Int, level: Int) {
        switch self {
        case .null: JSONText.null(into: &out)
        case .bool(let b): JSONText.bool(b, into: &out)
        case .number(let n): JSONText.number(n, into: &out)
        case .string(let s): Self.quote(s, into: &out)
        case .array(let items):
            guard !items.isEmpty else { out.append(contentsOf: "[]".utf8); return }
            out.append(UInt8(ascii: "["))
            for (i, item) in items.enumerated() {
                if i > 0 { out.append(UInt8(ascii: ",")) }
                Self.lineBreak(&out, indent: indent, level: level + 1)
                item.write(to: &out, indent: indent, level: level + 1)
            }
            Self.lineBreak(&out, indent: indent, level: level)
            out.append(UInt8(ascii: "]"))
        case .object(let pairs):
            guard !pairs.isEmpty else { out.append(contentsOf: "{}".utf8); return }
            out.append(UInt8(ascii: "{"))
            for (i, (key, value)) in pairs.enumerated() {
                if i > 0 { out.append(UInt8(ascii: ",")) }
                Self.lineBreak(&out, indent: indent, level: level + 1)
                Self.quote(key, into: &out)
                out.append(UInt8(ascii: ":"))
                if indent > 0 { out.append(UInt8(ascii: " ")) }
                value.write(to: &out, indent: indent, level: level + 1)
            }
            Self.lineBreak(&out, indent: indent, level: level)
            out.append(UInt8(ascii: "}"))
        }
    }

    /// A new line indented to `level` when `indent` is not 0.
    private static func lineBreak(_ out: inout [UInt8], indent: Int, level: Int) {
        guard indent > 0 else { return }
        out.append(UInt8(ascii: "\n"))
        out.append(contentsOf: repeatElement(UInt8(ascii: " "), count: indent * level))
    }

    /// `s` as a JSON string literal (RFC 8259 §7), appended to `out` (also for log lines).
    public static func quote(_ s: String, into out: inout String) {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(s.utf8.count + 2)
        quote(s, into: &bytes)
        out += String(decoding: bytes, as: UTF8.self)
    }

    /// `s` as a JSON string literal in UTF-8, appended to `out`: the runs that need no escape
    /// copied whole. A string's UTF-8 is valid, and the bytes of a character past ASCII are all
    /// 0x80 or more, so only `"`, `\` and bytes under 0x20 are escaped, as the literal's
    /// characters would be.
    public static func quote(_ s: String, into out: inout [UInt8]) {
        out.append(UInt8(ascii: "\""))
        var s = s
        s.withUTF8 { bytes in
            var run = 0
            for i in bytes.indices {
                let byte = bytes[i]
                guard byte < 0x20 || byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") else { continue }
                out.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[run..<i]))
                run = i + 1
                out.append(UInt8(ascii: "\\"))
                switch byte {
                case UInt8(ascii: "\""), UInt8(ascii: "\\"): out.append(byte)
                case UInt8(ascii: "\n"): out.append(UInt8(ascii: "n"))
                case UInt8(ascii: "\r"): out.append(UInt8(ascii: "r"))
                case UInt8(ascii: "\t"): out.append(UInt8(ascii: "t"))
                default: // \u00XX, lower-case hex as before
                    out.append(contentsOf: [UInt8(ascii: "u"), UInt8(ascii: "0"), UInt8(ascii: "0"), hexDigit(byte >> 4), hexDigit(byte & 0xF)])
                }
            }
            out.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[run...]))
        }
        out.append(UInt8(ascii: "\""))
    }

    private static func hexDigit(_ value: UInt8) -> UInt8 {
        value < 10 ? UInt8(ascii: "0") + value : UInt8(ascii: "a") + value - 10
    }

    /// Looks up a key of an object.
    public subscript(key: String) -> JSONValue? {
        guard case .object(let pairs) = self else { return nil }
        return pairs.first { $0.0 == key }?.1
    }
}
