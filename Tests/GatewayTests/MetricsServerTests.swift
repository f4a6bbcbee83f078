import Foundation
import FriensoTesting
import Launcher
import Logging
import Testing

/// The launcher's metrics port: when it cannot be bound (node_exporter holds 9100 on many hosts)
/// the deployment goes on without it, and status.json says why; a listen address that is not
/// host:port is refused.
@Suite struct MetricsServerTests {
    @Test func aTakenPortIsReported_notFatal() async throws {
        let run = NSTemporaryDirectory() + "frienso-metrics-\(UUID().uuidString)"
        defer { try? FileManager.default.removeItem(atPath: run) }
        try FileManager.default.createDirectory(atPath: run, withIntermediateDirectories: true)
        let held = try DeadPort() // a listening socket nobody answers: the port is taken
        let listen = held.endpoint.replacingOccurrences(of: "tcp://", with: "")
        let supervisor = Supervisor(children: [], runDirectory: run, logger: Logger(label: "test"))
        let server = MetricsServer(listen: listen, supervisor: supervisor, logger: Logger(label: "test"))
        let running = Task { try await server.run() }
        await #expect(throws: SupervisorError.self) { try await server.boundEndpoint() }
        let status = supervisor.currentStatus
        #expect(status.metricsEndpoint == nil && status.metricsError?.contains("cannot serve metrics on \(listen)") == true,
                "\(String(describing: status.metricsError))")
        running.cancel()
        _ = await running.result

        let wrong = MetricsServer(listen: "nine-thousand", supervisor: supervisor, logger: Logger(label: "test"))
        await #expect(throws: SupervisorError.self) { try await wrong.run() }
    }
}
