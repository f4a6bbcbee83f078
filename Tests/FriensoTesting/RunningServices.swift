public import Logging
public import ServiceLifecycle

/// Runs services in a `ServiceGroup` for the duration of `body`, then shuts them down
/// gracefully, also when `body` throws. No signal handlers are installed.
public func withRunningServices<T: Sendable>(
    _ services: [any Service], logger: Logger,
    _ body: @Sendable () async throws -> T
) async throws -> T {
    let group = ServiceGroup(configuration: .init(
        services: services.map { .init(service: $0) }, gracefulShutdownSignals: [], cancellationSignals: [], logger: logger))
    return try await withThrowingTaskGroup(of: Void.self) { tasks in
        tasks.addTask { try await group.run() }
        do {
            let result = try await body()
            await group.triggerGracefulShutdown()
            try await tasks.waitForAll()
            return result
        } catch {
            await group.triggerGracefulShutdown()
            try? await tasks.waitForAll()
            throw error
        }
    }
}
