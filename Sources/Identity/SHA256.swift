import CSodium
import Foundation
import Wire

/// SHA-256 through libsodium: the one place the services hash (contact identifiers, session
/// tokens, stored photos).
public enum SHA256 {
    public static let byteCount = Int(crypto_hash_sha256_BYTES)

    public static func digest(_ bytes: [UInt8]) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: byteCount)
        crypto_hash_sha256(&out, bytes, UInt64(bytes.count))
        return out
    }

    public static func digest(_ text: String) -> [UInt8] { digest(Array(text.utf8)) }

    /// The digest in lower-case hexadecimal, as file names and contracts carry it.
    public static func hexDigest(_ bytes: [UInt8]) -> String {
        Hex.encode(digest(bytes))
    }

    /// A file's digest, read a megabyte at a time, and its size.
    /// - Returns: nil when the file cannot be read.
    public static func hexDigest(ofFile path: String) throws -> (bytes: Int64, hex: String)? {
        guard let handle = FileHandle(forReadingAtPath: path) else { return nil }
        defer { try? handle.close() }
        var state = crypto_hash_sha256_state()
        crypto_hash_sha256_init(&state)
        var bytes: Int64 = 0
        while let chunk = try handle.read(upToCount: 1 << 20), !chunk.isEmpty {
            bytes += Int64(chunk.count)
            chunk.withUnsafeBytes { raw in
                _ = crypto_hash_sha256_update(&state, raw.bindMemory(to: UInt8.self).baseAddress, UInt64(raw.count))
            }
        }
        var out = [UInt8](repeating: 0, count: byteCount)
        crypto_hash_sha256_final(&state, &out)
        return (bytes, Hex.encode(out))
    }
}
