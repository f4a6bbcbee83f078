public import Histogram
import Wire

/// Latencies of one measured run, in nanoseconds, and how long the run took.
public struct LatencyStats: Sendable {
    public var name: String
    public var inFlight: Int
    public var histogram: Histogram<UInt64>
    public var elapsed: Duration
    public var errors: Int

    public init(name: String, inFlight: Int) {
        self.name = name
        self.inFlight = inFlight
        histogram = Histogram(highestTrackableValue: 60_000_000_000, numberOfSignificantValueDigits: .three)
        elapsed = .zero
        errors = 0
    }

    public mutating func record(_ duration: Duration) {
        record(nanoseconds: Self.nanoseconds(duration))
    }

    public mutating func record(nanoseconds: UInt64) {
        _ = histogram.record(nanoseconds)
    }

    /// Whole nanoseconds (`Duration.wholeNanoseconds`), a negative duration as 0.
    static func nanoseconds(_ duration: Duration) -> UInt64 {
        UInt64(max(0, duration.wholeNanoseconds))
    }

    public mutating func merge(_ other: LatencyStats) {
        histogram.add(other.histogram)
        errors += other.errors
    }

    mutating func merge(_ samples: LatencySamples) {
        for n in samples.nanos { record(nanoseconds: n) }
        errors += samples.errors
    }

    public var count: UInt64 { histogram.totalCount }
    public func micros(_ percentile: Double) -> Double { Double(histogram.valueAtPercentile(percentile)) / 1_000 }
    public var throughput: Double {
        let s = BenchStack.seconds(elapsed)
        return s > 0 ? Double(count) / s : 0
    }
}

/// What one loop of a load measured, as plain numbers: put into a `LatencyStats` once the loop
/// ends. A histogram per loop (about 220 KB for the range and precision `LatencyStats` keeps, zeroed
/// when made, merged whole) cost more than the calls it measured at thousands of loops: `wire`
/// at 4,096 in flight did 77–79k req/s with p99 567–586 ms that way, 205–224k with p99 27–36 ms
/// this way (docs/benchmarks.md, item 38). Every load loop (`drive`, `threadLoad`, `stack`'s
/// workers) keeps these.
struct LatencySamples: Sendable {
    var nanos: [UInt64] = []
    var errors = 0

    init(capacity: Int = 0) { nanos.reserveCapacity(capacity) }

    mutating func record(_ duration: Duration) { nanos.append(LatencyStats.nanoseconds(duration)) }

    /// A latency in nanoseconds (a negative one, from a clock that stepped, as 0).
    mutating func record(nanoseconds: Int64) { nanos.append(UInt64(max(0, nanoseconds))) }
}

/// Prints results as a Markdown table (pasted as is into docs/benchmarks.md).
public enum Report {
    /// The rows as a Markdown table; they are kept for the run's JSON too (`Results`).
    public static func table(_ rows: [LatencyStats], record: Bool = true) -> String {
        if record { Results.shared.record(rows: rows) }
        var lines = ["| path | in flight | requests | p50 µs | p99 µs | p99.9 µs | req/s | errors |",
                     "|---|---:|---:|---:|---:|---:|---:|---:|"]
        for r in rows {
            lines.append("| \(r.name) | \(r.inFlight) | \(r.count) | \(f(r.micros(50))) | \(f(r.micros(99))) | \(f(r.micros(99.9))) | \(Int(r.throughput)) | \(r.errors) |")
        }
        return lines.joined(separator: "\n")
    }

    public static func f(_ value: Double) -> String {
        value >= 100 ? String(Int(value.rounded())) : String(format: "%.1f", value)
    }
}
