import Identity

/// A password reset code: 12 characters of Crockford's base32 (60 random bits), shown in groups
/// of four ("7KQ2-M9XD-4TRB"). What is stored is its SHA-256 (of the normalised form): a copy of
/// the database does not give anyone a working code, and 60 bits are far beyond guessing in the
/// 5 attempts an account gets.
public enum ResetCode {
    static let alphabet = Array("0123456789ABCDEFGHJKMNPQRSTVWXYZ")
    public static let length = 12

    /// A new code, as shown to the person.
    public static func generate(random: () -> UInt64) -> String {
        var bits = random()
        var chars: [Character] = []
        for _ in 0..<length {
            chars.append(alphabet[Int(bits & 31)])
            bits >>= 5
        }
        return stride(from: 0, to: length, by: 4).map { String(chars[$0..<$0 + 4]) }.joined(separator: "-")
    }

    /// The code as typed, in its canonical form: upper case; spaces and dashes dropped; the letters
    /// Crockford's alphabet leaves out read as the digits they look like (O → 0, I and L → 1).
    /// Nil when it cannot be a code.
    public static func normalize(_ typed: String) -> String? {
        var out = ""
        for c in typed.uppercased() where c != "-" && !c.isWhitespace {
            let mapped: Character = switch c { case "O": "0"; case "I", "L": "1"; default: c }
            guard alphabet.contains(mapped) else { return nil }
            out.append(mapped)
        }
        return out.count == length ? out : nil
    }

    /// What is stored for a code (of its normalised form).
    public static func hash(_ normalized: String) -> [UInt8] { SHA256.digest(normalized) }
}
