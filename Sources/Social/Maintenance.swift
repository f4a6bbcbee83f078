public import Logging
public import ServiceLifecycle

/// Social's periodic work, beside its host: once an hour, the notices past their retention
/// (`SocialService.pruneNotices`), the first time at start.
public final class SocialMaintenance: Service, Sendable {
    private let service: SocialService
    private let interval: Duration
    private let logger: Logger

    public init(service: SocialService, interval: Duration = .seconds(3_600), logger: Logger) {
        self.service = service
        self.interval = interval
        self.logger = logger
    }

    public func run() async throws {
        let service = service, interval = interval, logger = logger
        await cancelWhenGracefulShutdown {
            while !Task.isCancelled {
                do {
                    let pruned = try await service.pruneNotices()
                    if pruned > 0 { logger.info("old notices deleted", metadata: ["rows": "\(pruned)"]) }
                } catch {
                    logger.error("cannot prune the notices", metadata: ["error": "\(error)"])
                }
                try? await Task.sleep(for: interval)
            }
        }
    }
}
