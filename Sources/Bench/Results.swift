import Foundation
import Synchronization

/// Every table a run prints, kept as data too: `frienso-bench` writes them as JSON beside the
/// text (`--results-dir`), and `frienso-bench report` draws them.
public final class Results: Sendable {
    public static let shared = Results()

    public struct Row: Codable, Sendable {
        public var name: String
        public var inFlight: Int
        public var requests: UInt64
        public var p50Us: Double
        public var p99Us: Double
        public var p999Us: Double
        public var perSecond: Double
        public var errors: Int
    }

    public struct Table: Codable, Sendable {
        /// What the table measured (empty: the scenario's rows in print order).
        public var section: String
        public var rows: [Row]
        /// Figures beside the rows (ops/s of a whole run, CPU µs per operation, …).
        public var metrics: [String: Double]
    }

    public struct File: Codable, Sendable {
        public var scenario: String
        /// The command line that produced it.
        public var command: String
        /// A label for before/after comparisons (`--label`), else the time of the run.
        public var label: String
        public var startedAt: String
        public var tables: [Table]
    }

    private let tables = Mutex<[Table]>([])

    public func record(section: String = "", rows: [LatencyStats], metrics: [String: Double] = [:]) {
        let converted = rows.map { r in
            Row(name: r.name, inFlight: r.inFlight, requests: r.count, p50Us: r.micros(50), p99Us: r.micros(99),
                p999Us: r.micros(99.9), perSecond: r.throughput, errors: r.errors)
        }
        tables.withLock { $0.append(Table(section: section, rows: converted, metrics: metrics)) }
    }

    /// Writes `<directory>/<scenario>-<time>.json`. - Returns: its path.
    public func write(scenario: String, label: String?, to directory: String) throws -> String {
        let stamp = ISO8601DateFormatter().string(from: Date())
        let file = File(scenario: scenario, command: CommandLine.arguments.map { ($0 as NSString).lastPathComponent == "frienso-bench" ? "frienso-bench" : $0 }.joined(separator: " "),
                        label: label ?? stamp, startedAt: stamp, tables: tables.withLock { $0 })
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let path = "\(directory)/\(scenario)-\(stamp.replacingOccurrences(of: ":", with: "")).json"
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        try encoder.encode(file).write(to: URL(fileURLWithPath: path))
        return path
    }
}
