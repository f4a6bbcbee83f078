@testable import Geo
import FriensoTesting
import Testing

/// `sorted(byKey:descending:limit:)`, which orders friends' locations, check-ins and venues:
/// the same order as sorting the elements themselves, ties kept in place.
@Suite("geo: sorting by key")
struct KeySortingTests {
    struct Entry: Equatable {
        let rank: Int
        let id: UInt64
        let label: String // a reference, as a response's entries carry
    }

    /// The reference: a stable sort of the elements, by (key, position).
    static func reference(_ entries: [Entry], descending: Bool, limit: Int) -> [Entry] {
        let sorted = entries.enumerated().sorted { a, b in
            let (x, y) = (KeyPair(a.element.rank, a.element.id), KeyPair(b.element.rank, b.element.id))
            if x == y { return a.offset < b.offset }
            return descending ? y < x : x < y
        }
        return Array(sorted.prefix(limit).map(\.element))
    }

    @Test func matchesAStableSortOfTheElements() {
        var rng = SplitMix(seed: 84)
        var mismatches: [String] = []
        for round in 0..<300 {
            let count = [0, 1, 2, 7, 20, 21, 64, 200][round % 8]
            // Few distinct keys: many ties, which must keep their order.
            let entries = (0..<count).map { i in
                Entry(rank: Int.random(in: 0..<4, using: &rng), id: UInt64.random(in: 0..<3, using: &rng), label: "entry \(i)")
            }
            for descending in [false, true] {
                for limit in [0, 1, 5, count, Int.max] {
                    let got = entries.sorted(byKey: { KeyPair($0.rank, $0.id) }, descending: descending, limit: limit)
                    if got != Self.reference(entries, descending: descending, limit: limit) {
                        mismatches.append("\(count) entries, descending \(descending), limit \(limit)")
                    }
                }
            }
        }
        #expect(mismatches.isEmpty, "\(mismatches.prefix(5))")
    }

    @Test func pairsCompareAsTuples() {
        #expect(KeyPair(1.5, UInt64(9)) < KeyPair(2.0, UInt64(0)))
        #expect(KeyPair(2.0, UInt64(1)) < KeyPair(2.0, UInt64(2)))
        #expect(!(KeyPair(2.0, UInt64(2)) < KeyPair(2.0, UInt64(2))))
        #expect(KeyPair(2.0, UInt64(2)) == KeyPair(2.0, UInt64(2)))
    }
}
