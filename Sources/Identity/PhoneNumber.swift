/// Phone numbers as Frienso stores them: E.164, `+` and 8-15 digits, no leading zero.
/// Shared by accounts (registration) and social (circle invitations), so both agree on one form.
public enum PhoneNumber {
    /// Drops spaces, dashes, dots and parentheses; a leading `00` becomes `+`.
    /// - Returns: the E.164 form, or nil when the input is not a phone number.
    public static func normalize(_ raw: String) -> String? {
        var value = raw.filter { !" -.()\t".contains($0) }
        if value.hasPrefix("00") { value = "+" + value.dropFirst(2) }
        let digits = value.dropFirst()
        guard value.hasPrefix("+"), (8...15).contains(digits.count), digits.allSatisfy({ $0.isASCII && $0.isNumber }),
              digits.first != "0" else { return nil }
        return value
    }
}
