/// The deployment's operator key authorises operator methods (imports, outbox listings, resolving
/// any alert). It is a password: compared in constant time.
public enum OperatorKey {
    public static func matches(_ given: String, _ expected: String) -> Bool {
        let g = Array(given.utf8), e = Array(expected.utf8)
        var difference = UInt8(g.count == e.count ? 0 : 1)
        for (i, byte) in e.enumerated() { difference |= byte ^ (i < g.count ? g[i] : 0) }
        return difference == 0
    }
}
