import Foundation

/// The pieces of JSON text the generated `writeJSON(into:)` writes: each value exactly as
/// `JSONValue` renders it, so a message written this way reads as its `jsonValue` does (the
/// HTTP edge's replies, without a tree of values made and freed for each; `docs/benchmarks.md`,
/// issue 16, item 131).
public enum JSONText {
    /// A number: whole below 10¹⁵ without a fraction, else Swift's shortest form; null when not finite.
    public static func number(_ n: Double, into out: inout [UInt8]) {
        if n.isFinite && n == n.rounded() && abs(n) < 1e15 {
            out.append(contentsOf: String(Int64(n)).utf8)
        } else if n.isFinite {
            out.append(contentsOf: n.description.utf8)
        } else {
            null(into: &out)
        }
    }

    public static func bool(_ value: Bool, into out: inout [UInt8]) {
        out.append(contentsOf: (value ? "true" : "false").utf8)
    }

    public static func null(into out: inout [UInt8]) {
        out.append(contentsOf: "null".utf8)
    }

    /// A 64-bit integer as proto3's JSON writes it: a string of its digits.
    public static func quoted(_ value: some BinaryInteger, into out: inout [UInt8]) {
        out.append(UInt8(ascii: "\""))
        out.append(contentsOf: String(value).utf8)
        out.append(UInt8(ascii: "\""))
    }

    /// Bytes as proto3's JSON writes them: a string of their base64.
    public static func bytes(_ bytes: [UInt8], into out: inout [UInt8]) {
        JSONValue.quote(Data(bytes).base64EncodedString(), into: &out)
    }
}
