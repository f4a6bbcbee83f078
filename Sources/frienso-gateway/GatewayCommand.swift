import ArgumentParser
import CoreMetrics
import Foundation
import Gateway
import ServiceKit
import Wire

@main
struct GatewayCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "frienso-gateway",
        abstract: "Frienso gateway: the one endpoint clients reach.")

    @OptionGroup var options: ServiceOptions

    func run() async throws {
        let resolved = try options.resolve(service: "gateway")
        let logger = ServiceRunner.bootstrapLogging(level: resolved.logLevel, format: resolved.logFormat)
        var config = try GatewayConfig(resolved: resolved)
        let plane = try resolved.plane(logger: logger)
        config.keyring = plane.keyring
        config.metrics = ServiceMetrics.exposition(for: "gateway", plane: plane)
        let gateway = Gateway(config: config, logger: logger)
        let subscribers = Gauge(label: "frienso_event_subscribers")
        MetricsRefresh.register { [core = gateway.core] in subscribers.record(core.subscriptionCount) }
        try await ServiceRunner.run([gateway], endpointFile: resolved.endpointFile, logger: logger) { try await gateway.boundEndpoint() }
    }
}
