import Foundation
public import Wire

/// Contact identifiers as recommendations match them: normalised, then hashed with SHA-256, so
/// a phone can upload hashes instead of raw contacts and accounts stores only hashes to match.
/// Accounts (what it stores) and social (what it receives raw) hash through this one type.
public enum ContactIdentifier {
    /// SHA-256 digest length.
    public static let hashLength = SHA256.byteCount

    /// The normalised form of an email for matching: trimmed and lower-cased; nil when it has no
    /// single `@` with text on both sides.
    public static func normalizeEmail(_ raw: String) -> String? {
        let value = raw.trimmingCharacters(in: .whitespacesAndNewlines).lowercased()
        let parts = value.split(separator: "@", omittingEmptySubsequences: false)
        guard parts.count == 2, !parts[0].isEmpty, parts[1].contains("."), value.utf8.count <= 254 else { return nil }
        return value
    }

    /// SHA-256 of the UTF-8 bytes of an already normalised identifier.
    public static func hash(_ normalized: String) -> [UInt8] { SHA256.digest(normalized) }
}

extension ContactIdentifier {
    /// Validates a linked external account: provider 1-32 of `a-z 0-9 _ . -` (lower-cased), id
    /// 1-128 printable characters (trimmed).
    /// - Returns: the normalised (provider, id).
    public static func externalID(provider rawProvider: String, id rawID: String) throws(RPCError) -> (provider: String, id: String) {
        let provider = rawProvider.trimmingCharacters(in: .whitespaces).lowercased()
        let id = rawID.trimmingCharacters(in: .whitespaces)
        guard (1...32).contains(provider.count),
              provider.unicodeScalars.allSatisfy({ ("a"..."z").contains($0) || ("0"..."9").contains($0) || "_.-".unicodeScalars.contains($0) })
        else { throw .invalidArgument("external_id.provider: 1-32 characters of a-z, 0-9, '_', '.', '-'") }
        guard (1...128).contains(id.count), id.unicodeScalars.allSatisfy({ $0.value >= 32 && $0.value != 127 }) else {
            throw .invalidArgument("external_id.external_id: 1-128 printable characters")
        }
        return (provider, id)
    }
}
