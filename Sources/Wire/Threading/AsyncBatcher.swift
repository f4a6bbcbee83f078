import Synchronization

/// Group commit for async work: items added from anywhere are handled in batches, one batch at
/// a time and in the order they were added; whatever arrives while a batch is being handled is
/// the next batch. Alone, an item is a batch of one; in a burst, many share one handling (one
/// transaction, one fsync). Nobody waits on `add`: a consumer of an event stream keeps reading
/// while the batch before is committed. `Storage.GroupCommit` is the same idea for a commit that
/// blocks (SQLite, on a dispatch queue); this one awaits (PostgreSQL's client is async).
public final class AsyncBatcher<Item: Sendable>: Sendable {
    private struct State {
        var items: [Item] = []
        /// The task handling batches, while there is one.
        var drainer: Task<Void, Never>?
    }

    private let state = Mutex(State())
    private let maxBatch: Int
    private let handle: @Sendable ([Item]) async -> Void

    /// - Parameter handle: handles one batch (in order); the next starts when it returns.
    public init(maxBatch: Int = 256, handle: @escaping @Sendable ([Item]) async -> Void) {
        self.maxBatch = max(1, maxBatch)
        self.handle = handle
    }

    public func add(_ item: Item) {
        state.withLock { s in
            s.items.append(item)
            if s.drainer == nil { s.drainer = Task { await self.drain() } }
        }
    }

    private func drain() async {
        while true {
            let batch = state.withLock { s -> [Item] in
                if s.items.isEmpty { s.drainer = nil }
                // Usually all that waits is one batch: taken whole, nothing copied or shifted.
                guard s.items.count > maxBatch else { defer { s.items = [] }; return s.items }
                defer { s.items.removeFirst(maxBatch) }
                return Array(s.items.prefix(maxBatch))
            }
            if batch.isEmpty { return }
            await handle(batch)
        }
    }

    /// Returns once every item added before the call has been handled.
    public func flush() async {
        while let drainer = state.withLock({ $0.drainer }) { await drainer.value }
    }
}
