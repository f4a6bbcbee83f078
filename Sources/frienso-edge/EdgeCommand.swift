import ArgumentParser
import CoreMetrics
import Edge
import Foundation
import ServiceKit
import Wire

@main
struct EdgeCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "frienso-edge",
        abstract: "Frienso's HTTP/JSON and WebSocket edge: the gateway's rules for web and mobile clients.")

    @OptionGroup var options: ServiceOptions

    func run() async throws {
        let resolved = try options.resolve(service: "edge")
        let logger = ServiceRunner.bootstrapLogging(level: resolved.logLevel, format: resolved.logFormat)
        var config = try EdgeConfig(resolved: resolved)
        let plane = try resolved.plane(logger: logger)
        config.core.keyring = plane.keyring
        config.core.metrics = ServiceMetrics.exposition(for: "edge", plane: plane)
        let edge = EdgeServer(config: config, logger: logger)
        // Live WebSocket connections, as the gateway counts its subscriptions.
        let subscribers = Gauge(label: "frienso_event_subscribers")
        MetricsRefresh.register { [hub = edge.hub] in subscribers.record(hub.connectionCount) }
        try await ServiceRunner.run([edge], endpointFile: resolved.endpointFile, logger: logger) { try await edge.boundEndpoint() }
    }
}
