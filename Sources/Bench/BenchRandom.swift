import Foundation
import Synchronization

/// SplitMix64 with uniform and Gaussian draws (repeatable data).
struct BenchRandom {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= Self.increment
        return Self.mix(state)
    }

    mutating func unit() -> Double { Double(next() >> 11) / Double(1 << 53) }
    mutating func gaussian() -> Double {
        let u = max(unit(), 1e-12), v = unit()
        return (-2 * log(u)).squareRoot() * cos(2 * .pi * v)
    }

    /// SplitMix64: the state moves by this, and each state is mixed into an output.
    private static let increment: UInt64 = 0x9E37_79B9_7F4A_7C15
    private static func mix(_ state: UInt64) -> UInt64 {
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    // One stream for the load loops of a scenario to share (an atomic SplitMix64 state):
    // `Int.random(in:)` reads the system generator, a `getrandom(2)` on every call, which was
    // about 4.5% of the samples of geo's in-service update run (the load generator's own cost;
    // `docs/benchmarks.md`, item 146). The state wraps (it passes 2⁶⁴ every 1.6 draws or so).

    /// A number in 0..<bound from the shared stream.
    static func shared(below bound: Int) -> Int {
        precondition(bound > 0, "a bound above 0")
        return Int(sharedNext() % UInt64(bound))
    }

    /// A number in [0, 1) from the shared stream.
    static func sharedUnit() -> Double { Double(sharedNext() >> 11) / Double(1 << 53) }

    private static func sharedNext() -> UInt64 { mix(sharedState.wrappingAdd(increment, ordering: .relaxed).newValue) }
    private static let sharedState = Atomic<UInt64>(0x5EED_0F_F1E5_0500)
}
