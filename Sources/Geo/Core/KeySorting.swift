/// Sorting a list of large values (a response's entries) by a small key.
///
/// `sort(by:)` moves whole elements at every step of the sort; for a generated message (a
/// `GeoV1.FriendLocation` with its nested fix and strings) each move is a copy with a retain
/// and a release per reference. Sorting the keys with each element's position, then taking
/// the elements once in that order, does the same work on a few plain bytes per element
/// (issue 16, `docs/benchmarks.md` item 84).
extension Array {
    /// The first `limit` elements in increasing order of `key` (decreasing when `descending`);
    /// elements whose keys are equal keep their present order, in either direction.
    func sorted<Key: Comparable>(byKey key: (Element) -> Key, descending: Bool = false, limit: Int = .max) -> [Element] {
        guard count > 1 else { return Array(prefix(limit)) }
        var order: [SortEntry<Key>] = []
        order.reserveCapacity(count)
        for position in indices { order.append(SortEntry(key: key(self[position]), position: position)) }
        if descending { order.sort { SortEntry.descending($0, $1) } } else { order.sort { SortEntry.ascending($0, $1) } }
        var sorted: [Element] = []
        sorted.reserveCapacity(Swift.min(count, limit))
        for entry in order.prefix(limit) { sorted.append(self[entry.position]) }
        return sorted
    }
}

/// A key and where its element was.
struct SortEntry<Key: Comparable> {
    let key: Key
    let position: Int

    static func ascending(_ a: Self, _ b: Self) -> Bool { a.key < b.key || (a.key == b.key && a.position < b.position) }
    static func descending(_ a: Self, _ b: Self) -> Bool { b.key < a.key || (a.key == b.key && a.position < b.position) }
}

/// Two keys compared in turn (a tuple's order, as a `Comparable` type).
struct KeyPair<First: Comparable, Second: Comparable>: Comparable {
    let first: First
    let second: Second

    init(_ first: First, _ second: Second) {
        self.first = first
        self.second = second
    }

    static func < (a: Self, b: Self) -> Bool { a.first < b.first || (a.first == b.first && a.second < b.second) }
}
