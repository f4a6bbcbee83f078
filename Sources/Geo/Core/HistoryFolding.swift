import Synchronization

/// Write-behind for geo's two random-access structures: the `latest` table (one row per user) and
/// the `history_by_user` index. A location update's transaction appends its `history` row and
/// nothing else, so its commit dirties a page or two at the end of the file whatever the user;
/// keeping `latest` and a per-user index current on every update dirtied about two random pages
/// per update, and that page I/O was most of the cost of a durable update (docs/benchmarks.md).
///
/// Instead, the rows committed during one period are folded in a *sweep*: sorted by user and
/// written a slice per commit, paced to finish one period after it started, so each page of
/// `latest` and of the index is written about once per sweep however many of its users moved.
/// When a sweep completes, every history row up to the id it started at (`foldedThrough`) is in
/// `latest` and indexed; rows past it are replayed at start (`SQLiteGeoStore.loadLatest`) and found
/// per user by a scan of the tail. Acknowledged updates are durable the moment their history row
/// commits: folding is about cost, never about durability.
///
/// Pure: the store writes what `next` plans and reports back with `advance` and `committed`.
struct HistoryFolding: Sendable {
    struct Pair: Sendable, Hashable, Comparable {
        var user: UInt64
        var id: Int64
        static func < (a: Pair, b: Pair) -> Bool { (a.user, a.id) < (b.user, b.id) }
    }

    /// One slice of a sweep to write in the next commit.
    struct Chunk: Sendable, Equatable {
        /// Whose latest fix to write (sorted, unique).
        var users: [UInt64]
        /// History rows to index (sorted by user, then id).
        var pairs: [Pair]
        /// Set on the sweep's last slice: the new `foldedThrough` once it commits.
        var completesThrough: Int64?
        fileprivate var end: Int
    }

    private struct Sweep: Sendable {
        var pairs: [Pair]
        var position = 0
        var startMs: Int64
        /// The last history id committed when the sweep started.
        var through: Int64
    }

    let periodMs: Int64
    let maxChunk: Int
    /// Every history row with an id up to this is in `latest` and in `history_by_user`.
    private(set) var foldedThrough: Int64
    /// The last history id committed.
    private(set) var lastID: Int64
    /// Rows committed since the sweep in progress started (the next sweep's).
    private var pending: [Pair] = []
    private var sweep: Sweep?
    /// Users whose history was deleted, to drop from the plan at the next `next` (never while a
    /// planned chunk is being written: its positions must stay valid until `advance`).
    private var forgotten: Set<UInt64> = []

    init(foldedThrough: Int64, lastID: Int64, periodMs: Int64 = 10_000, maxChunk: Int = 4_096) {
        self.foldedThrough = foldedThrough
        self.lastID = max(lastID, foldedThrough)
        self.periodMs = max(1, periodMs)
        self.maxChunk = max(1, maxChunk)
    }

    /// Rows waiting to be folded (pending and the sweep's remainder).
    var backlog: Int { pending.count + (sweep.map { $0.pairs.count - $0.position } ?? 0) }

    /// History rows that committed (ids ascending).
    /// - Parameter through: several instances: the id through which this instance has applied
    ///   every row, its own and the others' (a sweep completes through no further); nil: one
    ///   instance, the rows' own ids.
    mutating func committed(_ pairs: [Pair], through: Int64? = nil) {
        pending += pairs
        if let through { lastID = max(lastID, through) } else if let last = pairs.last?.id { lastID = max(lastID, last) }
    }

    /// The slice to write with the next commit, or nil when the sweep is ahead of its pace.
    /// Starts a sweep when none runs and rows are waiting.
    mutating func next(nowMs: Int64) -> Chunk? {
        dropForgotten()
        if sweep == nil {
            guard !pending.isEmpty else { return nil }
            sweep = Sweep(pairs: Self.sortedByUser(pending), startMs: nowMs, through: lastID)
            pending = []
        }
        guard let s = sweep else { return nil }
        let count = s.pairs.count
        if s.position == count { // emptied by `forget`: nothing to write, but the watermark moves
            return Chunk(users: [], pairs: [], completesThrough: s.through, end: count)
        }
        let elapsed = max(0, nowMs - s.startMs)
        let target = elapsed >= periodMs ? count : Int(Double(count) * Double(elapsed) / Double(periodMs))
        var end = min(target, s.position + maxChunk)
        // Keep a user's rows in one slice (their latest is written once).
        while end > s.position && end < count && s.pairs[end].user == s.pairs[end - 1].user { end += 1 }
        guard end > s.position else { return nil }
        let slice = s.pairs[s.position..<end]
        var users: [UInt64] = []
        users.reserveCapacity(slice.count)
        for pair in slice where users.last != pair.user { users.append(pair.user) }
        return Chunk(users: users, pairs: Array(slice), completesThrough: end == count ? s.through : nil, end: end)
    }

    /// The chunk `next` returned has committed.
    mutating func advance(past chunk: Chunk) {
        guard var s = sweep else { return }
        s.position = min(chunk.end, s.pairs.count)
        if let through = chunk.completesThrough, s.position == s.pairs.count {
            foldedThrough = max(foldedThrough, through)
            sweep = nil
        } else {
            sweep = s
        }
    }

    /// Everything waiting, as one chunk (start-up replay, graceful stop). `advance` as usual.
    mutating func all() -> Chunk? {
        dropForgotten()
        var rest = pending
        if let s = sweep { rest += s.pairs[s.position...] }
        guard !rest.isEmpty else { return nil }
        rest = Self.sortedByUser(rest)
        sweep = Sweep(pairs: rest, startMs: 0, through: lastID)
        pending = []
        var users: [UInt64] = []
        for pair in rest where users.last != pair.user { users.append(pair.user) }
        return Chunk(users: users, pairs: rest, completesThrough: lastID, end: rest.count)
    }

    /// `user`'s history is gone (DeleteHistory): their waiting rows are not indexed. Takes effect
    /// at the next `next` or `all`.
    mutating func forget(_ user: UInt64) {
        forgotten.insert(user)
    }

    private mutating func dropForgotten() {
        guard !forgotten.isEmpty else { return }
        let gone = forgotten
        forgotten = []
        pending.removeAll { gone.contains($0.user) }
        guard var s = sweep else { return }
        let before = s.pairs[..<s.position].count { gone.contains($0.user) }
        s.pairs.removeAll { gone.contains($0.user) }
        s.position -= before
        sweep = s
    }
}

/// The plan, shared by the location writer and DeleteHistory.
final class SharedFolding: Sendable {
    let mutex: Mutex<HistoryFolding>
    init(_ plan: HistoryFolding) { mutex = Mutex(plan) }
}

extension HistoryFolding {
    /// `pairs` sorted by user, then id: what `sorted()` returns, in time linear in the count. A
    /// sweep sorts every row committed in a fold period, and the comparison sort (a merge sort
    /// on a tuple's order) was 3.6% of geo's samples under durable updates (`docs/benchmarks.md`,
    /// issue 16, item 147). Sorted by user with a least-significant-byte radix sort (stable: a
    /// pass for each byte the largest user id has, a pass skipped when every row has the same
    /// byte), rows that arrived in id order, as one instance commits them, are then in id order
    /// within each user too; any other order goes to `sorted()`.
    ///
    /// Hand-written: the standard library sorts by comparison only, and no listed package sorts.
    static func sortedByUser(_ pairs: [Pair]) -> [Pair] {
        guard pairs.count > 64 else { return pairs.sorted() }
        let largest = pairs.reduce(UInt64(0)) { max($0, $1.user) }
        var from = pairs
        var to = pairs
        var shift: UInt64 = 0
        var counts = [Int](repeating: 0, count: 256)
        while shift < 64, largest >> shift != 0 {
            for index in counts.indices { counts[index] = 0 }
            for pair in from { counts[Int(truncatingIfNeeded: pair.user >> shift) & 0xFF] += 1 }
            if !counts.contains(from.count) {
                var start = 0
                for index in counts.indices { (counts[index], start) = (start, start + counts[index]) }
                for pair in from {
                    let byte = Int(truncatingIfNeeded: pair.user >> shift) & 0xFF
                    to[counts[byte]] = pair
                    counts[byte] += 1
                }
                swap(&from, &to)
            }
            shift += 8
        }
        for index in from.indices.dropFirst() where from[index].user == from[index - 1].user && from[index].id < from[index - 1].id {
            return pairs.sorted()
        }
        return from
    }
}
