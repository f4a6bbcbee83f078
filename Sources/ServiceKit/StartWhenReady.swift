public import Logging
public import ServiceLifecycle

/// Runs `service` (a member's request host) once `isReady` holds, or once `within` has passed:
/// a member whose answers read a replica (geo and media read social's graph) does not answer
/// from an empty one right after it starts. A restarted instance answered at once: its friends'
/// locations were empty and nearby refused everyone as not findable until the first snapshot
/// came, while the gateway already spread calls to it (the several-hosts test, after the kill).
/// Bounded, so a member whose peer is away still starts, and says so.
public struct StartWhenReady: Service {
    private let service: any Service
    private let isReady: @Sendable () -> Bool
    private let within: Duration
    private let what: String
    private let logger: Logger

    public init(_ service: any Service, when isReady: @escaping @Sendable () -> Bool, within: Duration = .seconds(10), what: String,
                logger: Logger) {
        self.service = service
        self.isReady = isReady
        self.within = within
        self.what = what
        self.logger = logger
    }

    public func run() async throws {
        let deadline = ContinuousClock.now.advanced(by: within), isReady = isReady
        await cancelWhenGracefulShutdown {
            while !isReady(), ContinuousClock.now < deadline, !Task.isCancelled {
                try? await Task.sleep(for: .milliseconds(20))
            }
        }
        if !isReady() { logger.warning("answering before \(what) is loaded", metadata: ["waited": "\(within)"]) }
        try await service.run()
    }
}
