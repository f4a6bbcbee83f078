import Synchronization
import Testing
@testable import Wire

@Suite("async batcher")
struct AsyncBatcherTests {
    /// A gate the first batch waits at, opened by the test: what is added meanwhile must form
    /// the next batch (no sleep: the handler says when it is inside).
    final class Gate: Sendable {
        private let state = Mutex<(open: Bool, waiter: CheckedContinuation<Void, Never>?)>((false, nil))
        func wait() async {
            await withCheckedContinuation { c in
                let open = state.withLock { s -> Bool in
                    if s.open { return true }
                    s.waiter = c
                    return false
                }
                if open { c.resume() }
            }
        }
        func open() { state.withLock { s in s.open = true; return s.waiter.take() }?.resume() }
    }

    @Test("items added while a batch is handled form the next batch, in order; flush waits for all")
    func batchesFormWhileOneIsHandled() async {
        let batches = Mutex<[[Int]]>([])
        let gate = Gate()
        let inside = AsyncStream<Void>.makeStream()
        let batcher = AsyncBatcher<Int>(maxBatch: 3) { items in
            batches.withLock { $0.append(items) }
            if items == [1] {
                inside.continuation.yield()
                await gate.wait()
            }
        }
        batcher.add(1)
        var signals = inside.stream.makeAsyncIterator()
        _ = await signals.next() // the first batch is being handled
        for item in 2...6 { batcher.add(item) }
        gate.open()
        await batcher.flush()
        #expect(batches.withLock { $0 } == [[1], [2, 3, 4], [5, 6]])
        // Alone again: a batch of one, and flush returns with nothing pending.
        batcher.add(7)
        await batcher.flush()
        #expect(batches.withLock { $0.last } == [7])
        await batcher.flush()
    }
}
