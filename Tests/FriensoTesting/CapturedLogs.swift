public import Logging
import Synchronization

/// Collects log lines in memory so a test can print them when it fails (and only then).
public final class CapturedLogs: Sendable {
    private let lines = Mutex<[String]>([])

    public init() {}

    /// A logger writing here at `level`.
    public func logger(_ label: String, level: Logger.Level = .debug) -> Logger {
        var logger = Logger(label: label) { label in CapturingHandler(label: label, sink: self) }
        logger.logLevel = level
        return logger
    }

    func append(_ line: String) {
        lines.withLock { $0.append(line) }
    }

    public var all: [String] { lines.withLock { $0 } }

    public func contains(_ text: String) -> Bool { all.contains { $0.contains(text) } }

    public func dump() -> String { all.joined(separator: "\n") }
}

struct CapturingHandler: LogHandler {
    let label: String
    let sink: CapturedLogs
    var metadata: Logger.Metadata = [:]
    var metadataProvider: Logger.MetadataProvider?
    var logLevel: Logger.Level = .debug

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        let provided = metadataProvider?.get() ?? [:]
        let all = metadata.merging(provided) { $1 }.merging(event.metadata ?? [:]) { $1 }
        let meta = all.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: " ")
        sink.append("\(event.level) [\(label)] \(event.message) \(meta)")
    }
}
