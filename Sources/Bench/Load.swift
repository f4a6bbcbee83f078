import Foundation
import Wire

/// Drives `operation` from `inFlight` concurrent loops until `count` operations finished.
/// Each loop measures its own calls; the results are merged. `operation` runs where its loop
/// runs (`nonisolated(nonsending)`): no hop to the generic executor a call (item 143).
func drive(
    name: String, inFlight: Int, count: Int, warmup: Int, measuring: () -> Void = {},
    _ operation: nonisolated(nonsending) @escaping @Sendable () async -> Bool
) async -> LatencyStats {
    for _ in 0..<warmup { _ = await operation() }
    measuring()
    let perLoop = max(1, count / inFlight)
    let started = ContinuousClock.now
    // Each loop keeps its latencies as plain numbers (`LatencySamples`), put into one histogram.
    var total = await withTaskGroup(of: LatencySamples.self) { group in
        for _ in 0..<inFlight {
            group.addTask {
                var samples = LatencySamples(capacity: perLoop)
                for _ in 0..<perLoop {
                    // `Moment`: one `clock_gettime`, where `ContinuousClock` adds a runtime call
                    // and a `Duration` made from parts (the load generator's own cost).
                    let t0 = Moment.now
                    let ok = await operation()
                    samples.record(nanoseconds: t0.nanoseconds(to: .now))
                    if !ok { samples.errors += 1 }
                }
                return samples
            }
        }
        var merged = LatencyStats(name: name, inFlight: inFlight)
        for await part in group { merged.merge(part) }
        return merged
    }
    total.elapsed = started.duration(to: .now)
    return total
}
