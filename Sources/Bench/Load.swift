import Foundation

/// Drives `operation` from `inFlight` concurrent loops until `count` operations finished.
/// Each loop measures its own calls; the results are merged.
func drive(
    name: String, inFlight: Int, count: Int, warmup: Int,
    _ operation: @escaping @Sendable () async -> Bool
) async -> LatencyStats {
    for _ in 0..<warmup { _ = await operation() }
    let perLoop = max(1, count / inFlight)
    let started = ContinuousClock.now
    var total = await withTaskGroup(of: LatencyStats.self) { group in
        for _ in 0..<inFlight {
            group.addTask {
                var stats = LatencyStats(name: name, inFlight: inFlight)
                for _ in 0..<perLoop {
                    let t0 = ContinuousClock.now
                    let ok = await operation()
                    stats.record(t0.duration(to: .now))
                    if !ok { stats.errors += 1 }
                }
                return stats
            }
        }
        var merged = LatencyStats(name: name, inFlight: inFlight)
        for await part in group { merged.merge(part) }
        return merged
    }
    total.elapsed = started.duration(to: .now)
    return total
}
