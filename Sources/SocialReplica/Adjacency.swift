/// Compact adjacency lists: for each user, the sorted ids of their neighbours as `UInt32`
/// (4 bytes a neighbour instead of a `Set<UInt64>`'s ~20). Ids above `UInt32.max` (not issued
/// by today's SQLite counters, but possible) go to an overflow table, so nothing is lost.
///
/// Membership is a binary search; insertion and removal shift the list (degrees are small).
struct Adjacency: Sendable {
    private var lists: [UInt64: [UInt32]] = [:]
    private var overflow: [UInt64: Set<UInt64>] = [:]

    /// Adds `to` to `from`'s list, keeping it sorted. - Returns: whether it was new.
    @discardableResult
    mutating func insert(_ from: UInt64, _ to: UInt64) -> Bool {
        guard let small = UInt32(exactly: to) else { return overflow[from, default: []].insert(to).inserted }
        let (found, index) = (lists[from] ?? []).sortedPosition(of: small)
        guard !found else { return false }
        lists[from, default: []].insert(small, at: index)
        return true
    }

    @discardableResult
    mutating func remove(_ from: UInt64, _ to: UInt64) -> Bool {
        guard let small = UInt32(exactly: to) else {
            let removed = overflow[from]?.remove(to) != nil
            if overflow[from]?.isEmpty == true { overflow[from] = nil }
            return removed
        }
        guard let list = lists[from] else { return false }
        let (found, index) = list.sortedPosition(of: small)
        guard found else { return false }
        if list.count == 1 { lists[from] = nil } else { lists[from]!.remove(at: index) }
        return true
    }

    func contains(_ from: UInt64, _ to: UInt64) -> Bool {
        guard let small = UInt32(exactly: to) else { return overflow[from]?.contains(to) ?? false }
        guard let list = lists[from] else { return false }
        return list.sortedPosition(of: small).found
    }

    func neighbours(of user: UInt64) -> [UInt64] {
        (lists[user] ?? []).map(UInt64.init) + (overflow[user].map { $0.sorted() } ?? [])
    }

    func degree(of user: UInt64) -> Int { (lists[user]?.count ?? 0) + (overflow[user]?.count ?? 0) }

    /// Total stored entries (a symmetric relation stores each pair twice).
    var entryCount: Int { lists.values.reduce(0) { $0 + $1.count } + overflow.values.reduce(0) { $0 + $1.count } }

    // MARK: Bulk loading

    /// Appends without keeping order: call `seal()` once every pair is in.
    mutating func append(_ from: UInt64, _ to: UInt64) {
        guard let small = UInt32(exactly: to) else { overflow[from, default: []].insert(to); return }
        lists[from, default: []].append(small)
    }

    /// Sorts and de-duplicates every list and trims it to its exact size (append doubles
    /// capacity: without this a loaded replica holds up to twice the memory it needs).
    mutating func seal() {
        for key in lists.keys {
            lists[key]!.sort()
            let sorted = lists[key]!
            var unique = 0
            lists[key] = [UInt32](unsafeUninitializedCapacity: sorted.count) { buffer, count in
                for value in sorted where unique == 0 || buffer[unique - 1] != value {
                    buffer[unique] = value
                    unique += 1
                }
                count = unique
            }
        }
    }
}

extension Array where Element: Comparable {
    /// Where `value` is in this ascending array, or would go to keep it so (a binary search).
    /// Also geo's, for its index's lists of occupied cells (`SpatialIndex`).
    @inlinable package func sortedPosition(of value: Element) -> (found: Bool, index: Int) {
        var low = 0, high = count
        while low < high {
            let mid = (low + high) / 2
            if self[mid] < value { low = mid + 1 } else { high = mid }
        }
        return (low < count && self[low] == value, low)
    }
}
