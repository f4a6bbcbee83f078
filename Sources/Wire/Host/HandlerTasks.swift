import Foundation
import Synchronization

/// The handler tasks a `ServiceHost` keeps between requests. A task made for every request (its
/// `AsyncTask` allocated, its task-local storage linked, attached to the host's task group, its
/// first frames on a new slab from `malloc`, all of it freed again when the handler returned) cost
/// about as much as the rest of the request's path through the host (`docs/benchmarks.md`, issue
/// 16, item 114). A task whose handler has returned parks here instead, its allocator's slabs
/// kept, and the next request is handed to it by resuming it; a new task is started only when
/// none is parked, so as many requests run at once as before, one task each.
///
/// At most `keepParked` tasks wait here: past that, a task whose handler returns ends, so a burst
/// does not leave its tasks (and their slabs) behind for good. `close()` ends the parked ones and
/// any that would park later, for the host's dispatch to finish.
final class HandlerTasks: Sendable {
    /// A parked task: resumed once, with its next request or nil to end.
    typealias Parked = ResumedOnce<IncomingRequest?>

    private struct State {
        /// Last parked, first resumed: its slabs are the likeliest to be in the cache.
        var parked: [Parked] = []
        var closed = false
    }

    private let state = Mutex(State())
    /// How many tasks may wait for a request at once.
    let keepParked: Int

    /// Whether hosts keep their handler tasks (`FRIENSO_HANDLER_TASKS=each`: a task per request, as
    /// before item 114, for A/B runs).
    static let kept = ProcessInfo.processInfo.environment["FRIENSO_HANDLER_TASKS"] != "each"

    init(keepParked: Int) {
        self.keepParked = max(0, keepParked)
    }

    /// A parked task to hand the next request to (resume it with the request), or nil when none
    /// waits: the caller starts a task.
    func takeParked() -> Parked? {
        state.withLock { $0.parked.popLast() }
    }

    /// Waits, in the task whose handler has just returned, for the next request; nil when the
    /// task should end instead: enough tasks wait already, the host is closing them, or this task
    /// was cancelled (the host's drain ran out of time).
    nonisolated(nonsending) func next() async -> IncomingRequest? {
        if Task.isCancelled { return nil }
        return await withResumedOnce { (continuation: Parked) in
            let parked = state.withLock { state -> Bool in
                guard !state.closed, state.parked.count < keepParked else { return false }
                state.parked.append(continuation)
                return true
            }
            if !parked { continuation.resume(returning: nil) }
        }
    }

    /// Ends every parked task (each `next()` returns nil) and every one that would park later.
    func close() {
        let parked = state.withLock { state in
            state.closed = true
            defer { state.parked = [] }
            return state.parked
        }
        for continuation in parked { continuation.resume(returning: nil) }
    }

    /// How many tasks wait for a request now (for tests).
    var parkedCount: Int { state.withLock { $0.parked.count } }
}
