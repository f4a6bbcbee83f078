public import PostgresNIO
import NIOCore
import Wire

// Where a body that uses a leased connection runs, and the checks it makes on it.

extension PostgresConnection {
    /// Runs `body` on the event loop that reads and writes this connection's socket, then goes
    /// back to the caller's executor. A statement's reply then resumes its caller on the thread
    /// that read it: a transaction hands over between threads twice (in and out), not twice per
    /// statement (to the loop to write it, back to the caller with its rows), each hand-over a
    /// thread woken (docs/benchmarks.md, issue 16, item 129). `body` must not block its thread:
    /// every connection on that loop waits while it runs.
    public func onItsLoop<T>(isolation: isolated (any Actor)? = #isolation, _ body: () async throws -> T) async throws -> T {
        try await withTaskExecutorPreference(EventLoopTaskExecutor(eventLoop), isolation: isolation) { try await body() }
    }

    /// Throws UNAVAILABLE when the connection is closed (the server ended the session: an idle
    /// transaction's timeout, an administrator, a restart). postgres-nio 1.33 writes a query to a
    /// closed channel without failing it, so its caller would wait forever; call this before a
    /// statement that may follow a pause (`GeoTests`, a batch left open by an instance cut off).
    public func ensureOpen() throws {
        if isClosed { throw RPCError.unavailable("the database ended this connection") }
    }
}

/// A NIO event loop as a Swift task executor: a job runs as one of the loop's tasks (enqueued
/// from the loop's own thread, it needs no wake-up). swift-nio makes an event loop an actor's
/// `SerialExecutor`, not a `TaskExecutor`.
final class EventLoopTaskExecutor: TaskExecutor {
    let loop: any EventLoop

    init(_ loop: any EventLoop) { self.loop = loop }

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        loop.execute { job.runSynchronously(on: self.asUnownedTaskExecutor()) }
    }
}

/// A value handed back out of `PostgresClient.withConnection`, which asks for a result it can send
/// to another isolation domain: ours is made and used by one task, the caller's, so it never is.
struct OneTask<T>: @unchecked Sendable {
    let value: T

    init(_ value: T) { self.value = value }
}
