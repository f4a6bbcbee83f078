import Foundation
import Synchronization

/// Drives `operation` from `threads` OS threads (not Swift tasks): for blocking clients (the
/// Redis baseline) and for in-process calls measured per core.
func threadLoad(name: String, threads: Int, count: Int, warmup: Int = 0,
                _ operation: @escaping @Sendable (_ thread: Int, _ i: Int) -> Bool) -> LatencyStats {
    let perThread = max(1, count / threads)
    let results = Mutex<[LatencySamples]>([])
    let done = DispatchGroup()
    let started = ContinuousClock.now
    for t in 0..<threads {
        done.enter()
        Thread {
            var stats = LatencySamples(capacity: perThread)
            for i in 0..<warmup { _ = operation(t, i) }
            for i in 0..<perThread {
                let t0 = ContinuousClock.now
                let ok = operation(t, i + warmup)
                stats.record(t0.duration(to: .now))
                if !ok { stats.errors += 1 }
            }
            results.withLock { $0.append(stats) }
            done.leave()
        }.start()
    }
    done.wait()
    var total = LatencyStats(name: name, inFlight: threads)
    for part in results.withLock({ $0 }) { total.merge(part) }
    total.elapsed = started.duration(to: .now)
    return total
}

/// Runs blocking work on a thread of its own, not on one of the cooperative pool's two threads.
func offPool<T: Sendable>(_ work: @escaping @Sendable () -> T) async -> T {
    await withCheckedContinuation { continuation in
        Thread { continuation.resume(returning: work()) }.start()
    }
}
