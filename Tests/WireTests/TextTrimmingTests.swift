import Foundation
import Testing
import Wire

@Suite("text trimming")
struct TextTrimmingTests {
    /// Every scalar Foundation counts in `.whitespacesAndNewlines`, and some it does not.
    static let whiteSpace: [Unicode.Scalar] = [
        "\u{09}", "\u{0A}", "\u{0B}", "\u{0C}", "\u{0D}", "\u{20}", "\u{85}", "\u{A0}", "\u{1680}", "\u{2000}", "\u{2005}", "\u{200A}",
        "\u{2028}", "\u{2029}", "\u{202F}", "\u{205F}", "\u{3000}", "\u{200B}", // the zero-width space: CoreFoundation counts it
    ]
    static let notWhiteSpace: [Unicode.Scalar] = ["\u{FEFF}", "\u{180E}", "\u{00}", "\u{1F}", "x", "é", "\u{301}", "🙂"]

    static let cases: [String] = {
        var cases = ["", " ", "Library", "  Library  ", "\tCampus café\n", "\n\n", "a b", " \u{301}x ", "x\u{301} ", "🙂 ", " 👩‍👩‍👧 "]
        for w in whiteSpace {
            for o in notWhiteSpace {
                cases.append("\(w)\(o)\(w)")
                cases.append("\(w)\(w)\(o) \(o)")
                cases.append("\(o)\(w)")
            }
            cases.append("\(w)")
        }
        return cases
    }()

    @Test func trimsWhatFoundationTrims() {
        for text in Self.cases {
            let expected = text.trimmingCharacters(in: .whitespacesAndNewlines)
            #expect(text.trimmingWhitespace() == expected, "\(text.unicodeScalars.map { String($0.value, radix: 16) })")
            #expect(text.trimmingWhitespace().unicodeScalars.elementsEqual(expected.unicodeScalars), "scalar for scalar")
            #expect(text[...].trimmingWhitespace() == expected, "a substring too")
        }
    }

    /// The set agrees scalar by scalar across the planes that hold white space.
    @Test func theWhiteSpaceSetIsFoundations() {
        for value in UInt32(0)...0x3100 {
            guard let scalar = Unicode.Scalar(value) else { continue }
            let trimmed = "x\(scalar)".trimmingWhitespace() == "x"
            #expect(trimmed == CharacterSet.whitespacesAndNewlines.contains(scalar), "U+\(String(value, radix: 16))")
        }
    }
}
