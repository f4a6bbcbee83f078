/// A continuation the code resuming it guarantees to resume exactly once: checked in debug builds
/// (the tests), which catch a second resume or none; unchecked in release builds, where a
/// checked continuation allocates and frees a canary object each time (issue 16). The client's
/// calls (`ClientLoop.Pending`) and a host's parked handler tasks (`HandlerTasks`) wait on one.
#if DEBUG
typealias ResumedOnce<T> = CheckedContinuation<T, Never>
#else
typealias ResumedOnce<T> = UnsafeContinuation<T, Never>
#endif

/// Suspends the caller until the continuation `body` is given is resumed (see `ResumedOnce`).
@inline(__always)
nonisolated(nonsending) func withResumedOnce<T>(_ body: (ResumedOnce<T>) -> Void) async -> T {
    #if DEBUG
    await withCheckedContinuation(body)
    #else
    await withUnsafeContinuation(body)
    #endif
}
