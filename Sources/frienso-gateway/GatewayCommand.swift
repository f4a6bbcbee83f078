import ArgumentParser
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
        config.keyring = try resolved.plane(logger: logger).keyring
        let gateway = Gateway(config: config, logger: logger)
        try await ServiceRunner.run([gateway], endpointFile: resolved.endpointFile, logger: logger) { try await gateway.boundEndpoint() }
    }
}
