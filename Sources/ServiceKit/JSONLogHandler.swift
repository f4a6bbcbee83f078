import Foundation
import FriensoProto
public import Logging
import Synchronization

/// How a process writes its log lines (`logFormat` in the config, `FRIENSO_LOG_FORMAT`).
public enum LogFormat: String, Sendable {
    /// swift-log's text lines (the default): for people reading a terminal.
    case text
    /// One JSON object per line, for a log collector (`JSONLogHandler`).
    case json
}

/// One JSON object per line on standard error:
///
/// ```json
/// {"ts":"2026-11-24T00:30:01.123Z","level":"info","label":"frienso","msg":"helpNow raised","source":"Alerts","request-id":"42","method":"alerts.RaiseHelpNow","alert":"7"}
/// ```
///
/// `ts` (UTC, milliseconds), `level`, `label`, `msg` and `source` first, then the metadata (the
/// logger's, its provider's: `request-id` and `method` for a line logged while serving a
/// request, and the line's own), strings as strings, lists and dictionaries as JSON. Personal
/// metadata (`user`, `user-id`, `caller`) is written only when the process logs at `debug` or
/// `trace` (`RequestScope.includesUser`): at `info` and above a line says what happened, not to
/// whom. A line is written with one `write(2)`, so lines from threads never interleave (and an
/// `O_APPEND` log file, as the launcher opens, takes them whole).
public struct JSONLogHandler: LogHandler {
    public var logLevel: Logger.Level
    public var metadata: Logger.Metadata = [:]
    public var metadataProvider: Logger.MetadataProvider?
    let label: String
    let write: @Sendable (String) -> Void

    /// Keys left out at `info` and above.
    static let personal: Set<String> = ["user", "user-id", "caller"]

    public init(label: String, level: Logger.Level, metadataProvider: Logger.MetadataProvider? = nil,
                write: @escaping @Sendable (String) -> Void = JSONLogHandler.standardError) {
        self.label = label
        logLevel = level
        self.metadataProvider = metadataProvider
        self.write = write
    }

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    /// A line for `event`; its error, if any, goes in `error` (unless the line's metadata has one).
    public func log(event: LogEvent) {
        var explicit = event.metadata
        if let error = event.error, explicit?["error"] == nil { explicit = (explicit ?? [:]).merging(["error": "\(error)"]) { $1 } }
        write(line(level: event.level, message: event.message, metadata: explicit, source: event.source))
    }

    public func log(level: Logger.Level, message: Logger.Message, metadata explicit: Logger.Metadata?, source: String,
                    file: String, function: String, line: UInt) {
        write(self.line(level: level, message: message, metadata: explicit, source: source))
    }

    private func line(level: Logger.Level, message: Logger.Message, metadata explicit: Logger.Metadata?, source: String) -> String {
        var all = metadata
        if let provided = metadataProvider?.get() { all.merge(provided) { $1 } }
        if let explicit { all.merge(explicit) { $1 } }
        let personalAllowed = logLevel <= .debug
        var out = "{\"ts\":\(Self.quoted(Self.timestamp()))"
        out += ",\"level\":\(Self.quoted(level.rawValue)),\"label\":\(Self.quoted(label)),\"msg\":\(Self.quoted(message.description))"
        out += ",\"source\":\(Self.quoted(source))"
        for key in all.keys.sorted() where personalAllowed || !Self.personal.contains(key) {
            out += ",\(Self.quoted(key)):\(Self.json(all[key]!))"
        }
        return out + "}\n"
    }

    // MARK: Encoding

    static func json(_ value: Logger.Metadata.Value) -> String {
        switch value {
        case .string(let s): return quoted(s)
        case .stringConvertible(let c): return quoted(c.description)
        case .array(let a): return "[" + a.map(json).joined(separator: ",") + "]"
        case .dictionary(let d): return "{" + d.keys.sorted().map { "\(quoted($0)):\(json(d[$0]!))" }.joined(separator: ",") + "}"
        }
    }

    /// A JSON string literal (the encoder the JSON mapping of messages uses).
    static func quoted(_ text: String) -> String {
        var out = ""
        out.reserveCapacity(text.utf8.count + 2)
        JSONValue.quote(text, into: &out)
        return out
    }

    static func timestamp() -> String {
        var spec = timespec()
        clock_gettime(CLOCK_REALTIME, &spec)
        var seconds = spec.tv_sec
        var parts = tm()
        gmtime_r(&seconds, &parts)
        return String(format: "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", parts.tm_year + 1900, parts.tm_mon + 1, parts.tm_mday,
                      parts.tm_hour, parts.tm_min, parts.tm_sec, Int(spec.tv_nsec / 1_000_000))
    }

    /// Standard error, one `write(2)` per line (retried until it is all out).
    public static let standardError: @Sendable (String) -> Void = { line in
        var bytes = Array(line.utf8)
        var offset = 0
        while offset < bytes.count {
            let n = bytes.withUnsafeMutableBytes { Foundation.write(2, $0.baseAddress! + offset, $0.count - offset) }
            if n <= 0 { if errno == EINTR { continue } else { return } }
            offset += n
        }
    }
}
