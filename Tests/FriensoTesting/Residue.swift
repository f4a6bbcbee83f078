import Foundation

/// Looks for traces of a person in a deployment's files (every byte of every file under a
/// folder: databases, their WAL and shared-memory files, photos): what an erasure must leave none of.
public enum Residue {
    /// A trace to look for, and how to name it in a failure.
    public struct Needle: Sendable {
        public var label: String
        public var bytes: [UInt8]
        public init(_ label: String, _ bytes: [UInt8]) { self.label = label; self.bytes = bytes }

        /// Text as stored (UTF-8).
        public static func text(_ value: String) -> Needle { Needle("\"\(value)\"", Array(value.utf8)) }

        /// A coordinate as SQLite stores a REAL (8 bytes, big-endian) and as text with 4 decimals.
        public static func coordinate(_ value: Double) -> [Needle] {
            [Needle("\(value) as a REAL", withUnsafeBytes(of: value.bitPattern.bigEndian, Array.init)),
             Needle("\(value) as a little-endian double", withUnsafeBytes(of: value.bitPattern.littleEndian, Array.init)),
             .text(String(format: "%.4f", value))]
        }

        /// Raw bytes (a photo's content).
        public static func bytes(_ label: String, _ value: [UInt8]) -> Needle { Needle(label, value) }
    }

    /// "<file> holds <needle>" for every needle found in every regular file under `folder`.
    public static func find(_ needles: [Needle], under folder: String) -> [String] {
        var found: [String] = []
        guard let walker = FileManager.default.enumerator(atPath: folder) else { return ["cannot read \(folder)"] }
        while let relative = walker.nextObject() as? String {
            let path = "\(folder)/\(relative)"
            var isDirectory: ObjCBool = false
            guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory), !isDirectory.boolValue,
                  let data = FileManager.default.contents(atPath: path) else { continue }
            for needle in needles where !needle.bytes.isEmpty && data.range(of: Data(needle.bytes)) != nil {
                found.append("\(relative) holds \(needle.label)")
            }
        }
        return found
    }
}
