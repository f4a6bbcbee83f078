import Synchronization

/// Lets one task at a time through per key (nil: one key of its own), in arrival order.
final class KeyedSerialGate: Sendable {
    private struct Queue {
        var waiters: [CheckedContinuation<Void, Never>] = []
    }

    /// A key present is held; its queue holds who waits for it.
    private let state = Mutex<[UInt64?: Queue]>([:])

    func acquire(_ key: UInt64?) async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let ready = state.withLock { held -> Bool in
                if held[key] != nil {
                    held[key]!.waiters.append(continuation)
                    return false
                }
                held[key] = Queue()
                return true
            }
            if ready { continuation.resume() }
        }
    }

    func release(_ key: UInt64?) {
        let next = state.withLock { held -> CheckedContinuation<Void, Never>? in
            guard var queue = held[key], !queue.waiters.isEmpty else {
                held[key] = nil
                return nil
            }
            let first = queue.waiters.removeFirst()
            held[key] = queue
            return first
        }
        next?.resume()
    }
}
