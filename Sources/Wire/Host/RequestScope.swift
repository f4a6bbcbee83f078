public import Logging
public import Synchronization

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
        /// The signed-in caller (0: none).
        public var callerUserID: UInt64 = 0

        public init(requestID: UInt64, method: String, callerUserID: UInt64 = 0) {
            self.requestID = requestID
            self.method = method
            self.callerUserID = callerUserID
        }
    }

    @TaskLocal public static var current: Label?

    /// Whether lines name the caller (`user-id`): only when the process logs at `debug` or
    /// `trace` (set at start by `ServiceRunner.bootstrapLogging`). At `info` and above a line says
    /// what happened, not to whom.
    public static let includesUser = Atomic<Bool>(false)

    public static let metadataProvider = Logger.MetadataProvider {
        guard let label = current else { return [:] }
        var metadata: Logger.Metadata = ["request-id": "\(label.requestID)", "method": "\(label.method)"]
        if label.callerUserID != 0, includesUser.load(ordering: .relaxed) { metadata["user-id"] = "\(label.callerUserID)" }
        return metadata
    }

    /// `logger` with the request metadata provider added to whatever provider it had.
    public static func attach(to logger: Logger) -> Logger {
        var logger = logger
        logger.handler.metadataProvider = .multiplex([logger.metadataProvider, metadataProvider].compactMap { $0 })
        return logger
    }
}
