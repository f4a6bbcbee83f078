import Accounts
import ArgumentParser
import ServiceKit
import Wire

@main
struct AccountsCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "frienso-accounts",
        abstract: "Frienso accounts service: users, credentials, sessions, profiles.")

    @OptionGroup var options: ServiceOptions

    func run() async throws {
        let resolved = try options.resolve(service: "accounts")
        let logger = ServiceRunner.bootstrapLogging(level: resolved.logLevel)
        let plane = try resolved.plane(logger: logger)
        try resolved.createDataDirectory()
        let service = try AccountsService(directory: resolved.dataDirectory, config: AccountsConfig(resolved: resolved))
        let host = service.makeHost(options: plane.hostOptions(name: "accounts", endpoint: resolved.endpoint), logger: logger)
        try await ServiceRunner.run([host], endpointFile: resolved.endpointFile, logger: logger) { try await host.boundEndpoint() }
    }
}
