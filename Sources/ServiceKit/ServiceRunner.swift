import Foundation
public import Logging
public import ServiceLifecycle
import Wire

/// What every service executable does after building its services.
public enum ServiceRunner {
    /// Chooses the log handler (executables only): lines on stderr with metadata.
    /// - Parameter format: text lines (default) or one JSON object per line (`JSONLogHandler`).
    public static func bootstrapLogging(level: Logger.Level, format: LogFormat = .text) -> Logger {
        RequestScope.includesUser.store(level <= .debug, ordering: .relaxed)
        LoggingSystem.bootstrap { label in
            switch format {
            case .text:
                var handler = StreamLogHandler.standardError(label: label)
                handler.logLevel = level
                return handler
            case .json:
                return JSONLogHandler(label: label, level: level)
            }
        }
        var logger = Logger(label: "frienso")
        logger.logLevel = level
        return logger
    }

    /// Runs `services` until SIGTERM or SIGINT, then shuts them down gracefully in reverse order.
    /// When `endpointFile` is set, writes the bound endpoint there once it listens, and the
    /// event (PUB) endpoint, if `boundEventsEndpoint` is given, to `<endpointFile>.events` (so tests
    /// and tools can bind port 0 and still find both).
    public static func run(
        _ services: [any Service], endpointFile: String?, logger: Logger,
        boundEventsEndpoint: (@Sendable () async throws -> String)? = nil,
        boundEndpoint: @escaping @Sendable () async throws -> String
    ) async throws {
        MemoryTuning.keepLargeBuffers()
        let group = ServiceGroup(configuration: .init(
            services: services.map { .init(service: $0) },
            gracefulShutdownSignals: [.sigterm, .sigint],
            logger: logger))
        try await withThrowingTaskGroup(of: Void.self) { tasks in
            tasks.addTask { try await group.run() }
            if let endpointFile {
                if let boundEventsEndpoint {
                    let events = try await boundEventsEndpoint()
                    try Data((events + "\n").utf8).write(to: URL(fileURLWithPath: endpointFile + ".events"), options: .atomic)
                }
                let endpoint = try await boundEndpoint()
                try Data((endpoint + "\n").utf8).write(to: URL(fileURLWithPath: endpointFile), options: .atomic)
            }
            try await tasks.waitForAll()
        }
    }
}
