import CSodium

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
        let digits = Array("0123456789abcdef".utf8)
        var out = [UInt8]()
        out.reserveCapacity(byteCount * 2)
        for b in digest(bytes) {
            out.append(digits[Int(b >> 4)])
            out.append(digits[Int(b & 0x0F)])
        }
        return String(decoding: out, as: UTF8.self)
    }
}
