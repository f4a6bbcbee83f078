import ArgumentParser
import ServiceKit
import Social
import Wire

@main
struct SocialCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "frienso-social",
        abstract: "Frienso social graph service: friend requests, friendships, blocks.")

    @OptionGroup var options: ServiceOptions

    func run() async throws {
        let resolved = try options.resolve(service: "social")
        let logger = ServiceRunner.bootstrapLogging(level: resolved.logLevel)
        try resolved.createDataDirectory()
        let accounts = WireClient(endpoint: resolved.endpoint(of: "accounts"), logger: logger)
        let publisher = Publisher(name: "social", endpoint: resolved.eventEndpoint(of: "social"), logger: logger)
        let geo = WireClient(endpoint: resolved.endpoint(of: "geo"), logger: logger)
        let service = try SocialService(directory: resolved.dataDirectory, accounts: accounts, publisher: publisher,
                                        circleLimit: resolved.config.social?.circleLimit ?? 3, geo: geo)
        let host = service.makeHost(options: HostOptions(name: "social", endpoint: resolved.endpoint), logger: logger)
        try await ServiceRunner.run([publisher, host], endpointFile: resolved.endpointFile, logger: logger,
                                  boundEventsEndpoint: { try await publisher.boundEndpoint() }) { try await host.boundEndpoint() }
    }
}
