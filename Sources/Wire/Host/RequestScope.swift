public import Logging

/// The request the current task is serving, for log lines.
///
/// The host binds it once per request (a task-local: no formatting, no copying), and a
/// `Logger.MetadataProvider` turns it into `request-id` and `method` metadata only when a line is
/// actually logged. Setting metadata on the logger for every request instead cost more than
/// decoding the request (measured: swift-log's `StreamLogHandler` re-renders its metadata string
/// on every change).
public enum RequestScope {
    public struct Label: Sendable {
        public var requestID: UInt64
        public var method: String
    }

    @TaskLocal public static var current: Label?

    public static let metadataProvider = Logger.MetadataProvider {
        guard let label = current else { return [:] }
        return ["request-id": "\(label.requestID)", "method": "\(label.method)"]
    }

    /// `logger` with the request metadata provider added to whatever provider it had.
    public static func attach(to logger: Logger) -> Logger {
        var logger = logger
        logger.handler.metadataProvider = .multiplex([logger.metadataProvider, metadataProvider].compactMap { $0 })
        return logger
    }
}
