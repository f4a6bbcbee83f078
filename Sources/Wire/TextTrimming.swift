extension StringProtocol {
    /// The text without white space at either end: exactly what Foundation's
    /// `trimmingCharacters(in: .whitespacesAndNewlines)` returns (its set is Unicode's White_Space,
    /// U+0009–U+000D, U+0085 and the Z* categories, plus the zero-width space U+200B, which
    /// CoreFoundation counts; `TextTrimmingTests` checks the two sets agree scalar by scalar),
    /// without its trip through NSString, which cost 2% of geo's CPU on a check-in
    /// (`docs/benchmarks.md`, issue 16, item 51). For the request fields services check (a place's
    /// name, a status, a label).
    public func trimmingWhitespace() -> String {
        let text = Substring(self)
        let scalars = text.unicodeScalars
        guard let first = scalars.firstIndex(where: { !isTrimmed($0) }), let last = scalars.lastIndex(where: { !isTrimmed($0) }) else { return "" }
        return String(scalars[first...last])
    }
}

private func isTrimmed(_ scalar: Unicode.Scalar) -> Bool {
    scalar.properties.isWhitespace || scalar == "\u{200B}"
}
