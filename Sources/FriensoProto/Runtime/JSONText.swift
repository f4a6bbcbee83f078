import Foundation

/// The pieces of JSON text the generated `writeJSON(into:)` writes: each value exactly as
/// `JSONValue` renders it, so a message written this way reads as its `jsonValue` does (the
/// HTTP edge's replies, without a tree of values made and freed for each; `docs/benchmarks.md`,
/// issue 16, item 131).
public enum JSONText {
    /// A number: whole below 10¹⁵ without a fraction, else Swift's shortest form; null when not finite.
    public static func number(_ n: Double, into out: inout [UInt8]) {
        if n.isFinite && n == n.rounded() && abs(n) < 1e15 {
            decimal(Int64(n), into: &out)
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
    public static func quoted(_ value: Int64, into out: inout [UInt8]) {
        out.append(UInt8(ascii: "\""))
        decimal(value, into: &out)
        out.append(UInt8(ascii: "\""))
    }

    public static func quoted(_ value: UInt64, into out: inout [UInt8]) {
        out.append(UInt8(ascii: "\""))
        decimal(value, negative: false, into: &out)
        out.append(UInt8(ascii: "\""))
    }

    /// `value`'s decimal digits, as `String(value)` writes them, without the `String`.
    static func decimal(_ value: Int64, into out: inout [UInt8]) {
        decimal(value.magnitude, negative: value < 0, into: &out)
    }

    static func decimal(_ magnitude: UInt64, negative: Bool, into out: inout [UInt8]) {
        // 20 digits and a sign at the most, written from the end of a buffer on the stack.
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 21) { buffer in
            var rest = magnitude, start = buffer.count
            repeat {
                start -= 1
                buffer[start] = UInt8(ascii: "0") + UInt8(truncatingIfNeeded: rest % 10)
                rest /= 10
            } while rest > 0
            if negative {
                start -= 1
                buffer[start] = UInt8(ascii: "-")
            }
            out.append(contentsOf: UnsafeBufferPointer(rebasing: buffer[start...]))
        }
    }

    /// A repeated field: its items, each written by `write`, between brackets.
    public static func array<Item>(_ items: [Item], into out: inout [UInt8], _ write: (Item, inout [UInt8]) -> Void) {
        out.append(UInt8(ascii: "["))
        for (index, item) in items.enumerated() {
            if index > 0 { out.append(UInt8(ascii: ",")) }
            write(item, &out)
        }
        out.append(UInt8(ascii: "]"))
    }

    /// A message field: the message, or null when it is not set.
    public static func message(_ message: (some ProtoMessage)?, into out: inout [UInt8]) {
        if let message { message.writeJSON(into: &out) } else { null(into: &out) }
    }

    /// Bytes as proto3's JSON writes them: a string of their base64.
    public static func bytes(_ bytes: [UInt8], into out: inout [UInt8]) {
        JSONValue.quote(Data(bytes).base64EncodedString(), into: &out)
    }
}
