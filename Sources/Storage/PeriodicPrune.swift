public import Logging
public import ServiceLifecycle

/// Runs a prune at start and then every `interval` (an hour) for as long as its service group
/// runs: rows past their retention (geo's history, social's notices). A failure is logged and
/// the next turn tries again.
public final class PeriodicPrune: Service, Sendable {
    private let what: String
    private let interval: Duration
    private let logger: Logger
    private let prune: @Sendable () async throws -> Int

    /// - Parameters:
    ///   - what: what is pruned, for the log ("history": "history pruned").
    ///   - prune: deletes what is past its retention. - Returns: rows deleted.
    public init(_ what: String, every interval: Duration = .seconds(3_600), logger: Logger, _ prune: @escaping @Sendable () async throws -> Int) {
        self.what = what
        self.interval = interval
        self.logger = logger
        self.prune = prune
    }

    public func run() async throws {
        let what = what, interval = interval, logger = logger, prune = prune
        await cancelWhenGracefulShutdown {
            while !Task.isCancelled {
                do {
                    let pruned = try await prune()
                    if pruned > 0 { logger.info("\(what) pruned", metadata: ["rows": "\(pruned)"]) }
                } catch {
                    logger.error("\(what) pruning failed", metadata: ["error": "\(error)"])
                }
                try? await Task.sleep(for: interval)
            }
        }
    }
}
