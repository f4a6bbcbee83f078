/// The calls or requests in flight on a reactor, keyed by their 64-bit ids: `ClientLoop.pending`
/// (a client's calls, by request id) and `HostLoop.inFlight` (a host's requests, by its own key).
///
/// Hand-written rather than a `Dictionary` (issue 16, item 107): a `Dictionary` hashes every key
/// through `Hasher`, SipHash-1-3, about 100 instructions per lookup, insertion or removal, and a
/// request through the gateway made ten of them (1,700 instructions with the probing, 2% of the
/// request). No listed package has a table that takes another hash. The keys here are counters
/// (`WireClient`'s request ids, the host's keys): Fibonacci hashing (one multiplication, the top
/// bits) spreads consecutive keys, and keys that step by any odd stride, over distinct buckets,
/// so a lookup nearly always ends at its first bucket. A key the peer sends (a reply's id) only
/// looks up: it cannot place entries, whatever its value.
///
/// Open addressing with linear probing at a load of at most one half, and removal by backward
/// shift (no tombstones: a table that churns millions of ids never slows down). A value type
/// with the copy-on-write of its arrays, as a `Dictionary`: iterating over it while removing
/// from it iterates over the table as it was.
struct RequestTable<Value>: Sequence {
    /// Whether a bucket holds an entry, and its key. The values are in a parallel array
    /// (`slots`): a probe reads keys without retaining values.
    fileprivate struct Bucket {
        var key: UInt64 = 0
        var used = false
    }

    private var buckets: [Bucket]
    private var slots: [Value?]
    /// 64 − log2(the number of buckets): the hash is the product's top bits.
    private var shift: UInt64
    private(set) var count = 0

    init() {
        buckets = Array(repeating: Bucket(), count: Self.minimumBuckets)
        slots = Array(repeating: nil, count: Self.minimumBuckets)
        shift = UInt64(64 - Self.minimumBuckets.trailingZeroBitCount)
    }

    private static var minimumBuckets: Int { 16 }

    var isEmpty: Bool { count == 0 }

    /// Where `key` is, if it is in the table (valid until the table next changes).
    func index(forKey key: UInt64) -> Int? {
        let mask = buckets.count - 1
        var index = home(key)
        while buckets[index].used {
            if buckets[index].key == key { return index }
            index = (index + 1) & mask
        }
        return nil
    }

    /// The value at an index `index(forKey:)` gave.
    func value(at index: Int) -> Value {
        guard let value = slots[index] else { preconditionFailure("no entry at \(index)") }
        return value
    }

    subscript(key: UInt64) -> Value? {
        get { index(forKey: key).map { value(at: $0) } }
        set {
            if let newValue { updateValue(newValue, forKey: key) } else { removeValue(forKey: key) }
        }
    }

    /// Stores `value` for `key`; returns the value it replaced.
    @discardableResult
    mutating func updateValue(_ value: Value, forKey key: UInt64) -> Value? {
        if let index = index(forKey: key) {
            defer { slots[index] = value }
            return slots[index].take()
        }
        if (count + 1) * 2 > buckets.count { grow() }
        insertNew(value, forKey: key)
        count += 1
        return nil
    }

    @discardableResult
    mutating func removeValue(forKey key: UInt64) -> Value? {
        index(forKey: key).map { remove(at: $0) }
    }

    /// Removes the entry at an index `index(forKey:)` gave, and returns its value. The entries
    /// after it in its run of used buckets move back into the hole when their own bucket allows
    /// it, so every key stays reachable from its home bucket without a tombstone.
    @discardableResult
    mutating func remove(at index: Int) -> Value {
        guard let removed = slots[index].take() else { preconditionFailure("no entry at \(index)") }
        let mask = buckets.count - 1
        var hole = index
        var next = (index + 1) & mask
        while buckets[next].used {
            // The entry at `next` may fill the hole if the hole lies between its home bucket and
            // `next` (cyclically): it is at least as far from home as from the hole.
            let fromHome = (next &- home(buckets[next].key)) & mask
            let fromHole = (next &- hole) & mask
            if fromHome >= fromHole {
                buckets[hole] = buckets[next]
                slots[hole] = slots[next].take()
                hole = next
            }
            next = (next + 1) & mask
        }
        buckets[hole].used = false
        count -= 1
        return removed
    }

    /// Empties the table, keeping its buckets.
    mutating func removeAll() {
        for index in buckets.indices where buckets[index].used {
            buckets[index].used = false
            slots[index] = nil
        }
        count = 0
    }

    @inline(__always)
    private func home(_ key: UInt64) -> Int {
        Int(truncatingIfNeeded: (key &* 0x9E37_79B9_7F4A_7C15) &>> shift)
    }

    /// Places a key known to be absent, in a table with room for it.
    private mutating func insertNew(_ value: Value, forKey key: UInt64) {
        let mask = buckets.count - 1
        var index = home(key)
        while buckets[index].used { index = (index + 1) & mask }
        buckets[index] = Bucket(key: key, used: true)
        slots[index] = value
    }

    private mutating func grow() {
        let oldBuckets = buckets
        var oldValues = slots
        let size = buckets.count * 2
        buckets = Array(repeating: Bucket(), count: size)
        slots = Array(repeating: nil, count: size)
        shift -= 1
        for index in oldBuckets.indices where oldBuckets[index].used {
            insertNew(oldValues[index].take()!, forKey: oldBuckets[index].key)
        }
    }

    // MARK: Sequence

    struct Iterator: IteratorProtocol {
        fileprivate let buckets: [Bucket]
        fileprivate let slots: [Value?]
        fileprivate var index = 0

        mutating func next() -> (key: UInt64, value: Value)? {
            while index < buckets.count {
                defer { index += 1 }
                if buckets[index].used, let value = slots[index] { return (buckets[index].key, value) }
            }
            return nil
        }
    }

    func makeIterator() -> Iterator { Iterator(buckets: buckets, slots: slots) }

    var underestimatedCount: Int { count }

    /// The values, in no particular order.
    var values: LazyMapSequence<Self, Value> { lazy.map(\.value) }
}
