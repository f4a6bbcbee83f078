import Synchronization

/// Wakes one waiting loop: a `ring` before `wait` is remembered, so no wake-up is lost (alerts'
/// delivery, maintenance and notice loops ring theirs when there is work).
public final class Doorbell: Sendable {
    private struct State {
        var rung = false
        var nextID: UInt64 = 0
        var waiter: (id: UInt64, continuation: CheckedContinuation<Void, Never>)?
    }
    private let state = Mutex(State())

    public init() {}

    public func ring() {
        let waiter = state.withLock { s -> CheckedContinuation<Void, Never>? in
            guard let w = s.waiter else { s.rung = true; return nil }
            s.waiter = nil
            return w.continuation
        }
        waiter?.resume()
    }

    /// Resumes the wait `id` if it is still waiting (timeout, cancellation).
    private func release(_ id: UInt64) {
        let waiter = state.withLock { s -> CheckedContinuation<Void, Never>? in
            guard let w = s.waiter, w.id == id else { return nil }
            s.waiter = nil
            return w.continuation
        }
        waiter?.resume()
    }

    /// Returns when rung, after `timeout`, or soon after the task is cancelled (at most `timeout`).
    public func wait(timeout: Duration) async {
        let id = state.withLock { s -> UInt64 in s.nextID += 1; return s.nextID }
        await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                let immediate = state.withLock { s -> Bool in
                    if s.rung { s.rung = false; return true }
                    s.waiter = (id, continuation)
                    return false
                }
                if immediate { continuation.resume(); return }
                Task { [weak self] in
                    try? await Task.sleep(for: timeout)
                    self?.release(id)
                }
            }
        } onCancel: {
            release(id)
        }
    }
}
