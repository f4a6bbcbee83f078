import Dispatch
import Foundation
import Synchronization

/// Runs `body` and blocks the calling thread until it ends: for the synchronous paths of a store
/// that runs on PostgreSQL (geo's start-up loads and its group commit, which run on threads of
/// their own: a `Thread`, a dispatch queue). Never call it from Swift's cooperative pool: the
/// pool's thread would wait for work that may need that thread.
public func awaitBlocking<T: Sendable>(_ body: @escaping @Sendable () async throws -> T) throws -> T {
    let outcome = Mutex<Result<T, any Error>?>(nil)
    let done = DispatchSemaphore(value: 0)
    Task.detached {
        let result: Result<T, any Error>
        do { result = .success(try await body()) } catch { result = .failure(error) }
        outcome.withLock { $0 = result }
        done.signal()
    }
    done.wait()
    return try outcome.withLock { $0! }.get()
}

/// Runs synchronous, blocking `body` (which may call `awaitBlocking`) on a thread of its own and
/// awaits its result. A new thread, not a dispatch queue's: the global queue runs about one work
/// item per core at a time, so bodies that block there (several geo instances opening at once,
/// tests waiting for psql) waited for each other.
public func onOwnThread<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        let thread = Thread {
            do { continuation.resume(returning: try body()) } catch { continuation.resume(throwing: error) }
        }
        thread.stackSize = 1 << 20
        thread.start()
    }
}
