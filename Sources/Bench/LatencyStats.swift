public import Histogram

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
        let c = duration.components
        _ = histogram.record(UInt64(max(0, c.seconds * 1_000_000_000 + c.attoseconds / 1_000_000_000)))
    }

    public mutating func merge(_ other: LatencyStats) {
        histogram.add(other.histogram)
        errors += other.errors
    }

    public var count: UInt64 { histogram.totalCount }
    public func micros(_ percentile: Double) -> Double { Double(histogram.valueAtPercentile(percentile)) / 1_000 }
    public var throughput: Double {
        let s = BenchStack.seconds(elapsed)
        return s > 0 ? Double(count) / s : 0
    }
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
