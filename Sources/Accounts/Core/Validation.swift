import Identity
public import Wire

/// The rules for what an account may hold. Each check returns the normalised value or throws
/// INVALID_ARGUMENT naming the field, so a client can show the message next to it.
public enum Validation {
    public static func username(_ raw: String) throws(RPCError) -> String {
        let value = raw.trimmingWhitespace().lowercased()
        let allowed = value.unicodeScalars.allSatisfy { ("a"..."z").contains($0) || ("0"..."9").contains($0) || $0 == "_" || $0 == "." }
        guard (3...30).contains(value.count), allowed, let first = value.unicodeScalars.first, ("a"..."z").contains(first) else {
            throw .invalidArgument("username: use 3-30 characters of a-z, 0-9, '.' and '_', starting with a letter")
        }
        return value
    }

    public static func email(_ raw: String) throws(RPCError) -> String {
        let value = raw.trimmingWhitespace().lowercased()
        let parts = value.split(separator: "@", omittingEmptySubsequences: false)
        guard value.count <= 254, parts.count == 2, (1...64).contains(parts[0].count),
              parts[1].contains("."), !parts[1].hasPrefix("."), !parts[1].hasSuffix("."), !parts[1].contains(".."),
              value.unicodeScalars.allSatisfy({ $0.value > 32 && $0.value < 127 && $0 != "," && $0 != ";" })
        else {
            throw .invalidArgument("email: not a valid address (name@example.org)")
        }
        return value
    }

    /// Phone numbers are kept in E.164: `+` and 8-15 digits. Spaces, dashes, dots and parentheses
    /// are dropped; a leading `00` becomes `+`.
    public static func phone(_ raw: String) throws(RPCError) -> String {
        guard let value = PhoneNumber.normalize(raw) else {
            throw .invalidArgument("phone: use international format, e.g. +15625551234")
        }
        return value
    }

    public static func password(_ raw: String, field: String = "password") throws(RPCError) -> String {
        guard (8...128).contains(raw.count) else { throw .invalidArgument("\(field): use 8-128 characters") }
        guard raw.unicodeScalars.allSatisfy({ $0.value >= 32 && $0.value != 127 }) else {
            throw .invalidArgument("\(field): control characters are not allowed")
        }
        return raw
    }

    public static func name(_ raw: String, field: String) throws(RPCError) -> String {
        let value = raw.trimmingWhitespace()
        guard (1...50).contains(value.count) else { throw .invalidArgument("\(field): use 1-50 characters") }
        guard value.unicodeScalars.allSatisfy({ $0.properties.generalCategory != .control && $0.properties.generalCategory != .format }) else {
            throw .invalidArgument("\(field): control characters are not allowed")
        }
        return value
    }

    /// Media ids are what the media service hands out: up to 64 of [A-Za-z0-9_-]. Empty clears it.
    public static func mediaID(_ raw: String) throws(RPCError) -> String {
        guard raw.count <= 64, raw.unicodeScalars.allSatisfy({ $0.isASCII && ($0.properties.isAlphabetic || ("0"..."9").contains($0) || $0 == "_" || $0 == "-") }) else {
            throw .invalidArgument("profile_picture_media_id: not a media id")
        }
        return raw
    }

    /// What a login string names.
    public enum LoginName: Hashable, Sendable {
        case username(String), email(String), phone(String)
    }

    public static func login(_ raw: String) throws(RPCError) -> LoginName {
        let value = raw.trimmingWhitespace()
        guard !value.isEmpty, value.count <= 254 else { throw .invalidArgument("login: give a username, email or phone number") }
        if value.contains("@") { return .email(value.lowercased()) }
        if value.hasPrefix("+") || value.first?.isNumber == true, let phone = try? phone(value) { return .phone(phone) }
        return .username(value.lowercased())
    }
}

extension String {
    func trimmingWhitespace() -> String {
        let scalars = unicodeScalars
        guard let start = scalars.firstIndex(where: { !$0.properties.isWhitespace }),
              let end = scalars.lastIndex(where: { !$0.properties.isWhitespace }) else { return "" }
        return String(scalars[start...end])
    }
}
