import Logging
import PostgresNIO
import Synchronization
import Wire

/// The health probe (`watch`): whether the server answers, on a connection of its own.
extension PostgresServiceDatabase {
    /// Whether the server answered the last health probe.
    public var isReachable: Bool { reachable.load(ordering: .relaxed) }

    /// Probes the server every `interval` (each probe bounded by `probeTimeout`) and keeps
    /// `reachable`. postgres-nio's pool keeps a request waiting while it cannot connect; without
    /// this, every request during an outage would wait for its caller's deadline and pile up.
    /// With it, the requests of the first seconds wait, the rest are refused at once, and service
    /// resumes with the first probe answered.
    /// A probe has a connection of its own, outside the pool: a pool whose connections are all
    /// busy is not an outage, and does not delay the probe (a probe through the pool once refused
    /// a test's logins under the full suite's load). Two unanswered probes in a row (not a single
    /// lost packet) count as an outage; one answered probe ends it.
    func watch(interval: Duration = .seconds(1), probeTimeout: Duration = .seconds(2), failuresToRefuse: Int = 2) async {
        var failures = 0
        while !Task.isCancelled {
            let (answered, error) = await probe(timeout: probeTimeout)
            failures = answered ? 0 : failures + 1
            // Answered: reachable. Unanswered: unchanged until the failures in a row reach the bound.
            let now = answered || (failures < failuresToRefuse && reachable.load(ordering: .relaxed))
            let was = reachable.exchange(now, ordering: .relaxed)
            if was != now {
                if now {
                    logger.notice("PostgreSQL answers again", metadata: ["at": "\(settings.description)"])
                } else {
                    logger.error("PostgreSQL does not answer: refusing requests until it does",
                                 metadata: ["at": "\(settings.description)", "error": "\(error.map { Self.describe($0) } ?? "no answer in \(probeTimeout)")"])
                }
            }
            try? await Task.sleep(for: interval)
        }
    }

    /// One `SELECT 1` on the probe's connection (made first when there is none), bounded by
    /// `timeout`. A probe that fails closes its connection; the next one connects again.
    /// - Returns: whether it was answered, and the error.
    func probe(timeout: Duration) async -> (Bool, (any Error)?) {
        do {
            let answered = try await withThrowingTaskGroup(of: Bool.self) { group in
                group.addTask {
                    try await self.probeConnectionOrConnect().query("SELECT 1", logger: self.logger)
                    return true
                }
                group.addTask {
                    try await Task.sleep(for: timeout)
                    return false
                }
                let first = try await group.next() ?? false
                group.cancelAll()
                return first
            }
            if answered {
                probesAnswered.add(1, ordering: .relaxed)
            } else {
                await dropProbeConnection()
            }
            return (answered, nil)
        } catch {
            await dropProbeConnection()
            return (false, error)
        }
    }

    /// How many health probes were answered (tests: the probe runs while the pool is busy).
    public var answeredProbes: Int { probesAnswered.load(ordering: .relaxed) }

    private func probeConnectionOrConnect() async throws -> PostgresConnection {
        if let open = probeConnection.withLock({ $0 }), !open.isClosed { return open }
        guard let probeConfiguration else { throw RPCError.unavailable("the probe cannot connect: its TLS configuration failed") }
        let connection = try await PostgresConnection.connect(configuration: probeConfiguration, id: 0, logger: logger)
        probeConnection.withLock { $0 = connection }
        return connection
    }

    func dropProbeConnection() async {
        try? await probeConnection.withLock { connection -> PostgresConnection? in defer { connection = nil }; return connection }?.close()
    }
}
