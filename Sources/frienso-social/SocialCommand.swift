import ArgumentParser
import ServiceKit
import Social
import SocialReplica
import Wire

@main
struct SocialCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "frienso-social",
        abstract: "Frienso social graph service: friend requests, friendships, blocks.")

    @OptionGroup var options: ServiceOptions

    func run() async throws {
        let resolved = try options.resolve(service: "social")
        let logger = ServiceRunner.bootstrapLogging(level: resolved.logLevel, format: resolved.logFormat)
        let plane = try resolved.plane(logger: logger)
        // PostgreSQL is accounts' only so far (issue 21): a configuration asking it of social is refused.
        _ = try resolved.storageChoice(for: "social", postgres: false, logger: logger)
        try resolved.createDataDirectory()
        let accounts = try plane.client("accounts", at: resolved.peer("accounts"), logger: logger)
        let publisher = plane.publisher(name: "social", endpoint: resolved.deploymentEventEndpoint(of: "social"), logger: logger)
        let geo = try plane.client("geo", at: resolved.peer("geo"), logger: logger)
        let profiles = ProfileReplica.profiles(accounts: accounts, eventsEndpoint: try resolved.peerEvents("accounts"),
                                               eventsSecurity: try plane.client(of: "accounts"), logger: logger)
        let service = try SocialService(directory: resolved.dataDirectory, accounts: accounts, publisher: publisher,
                                        circleLimit: resolved.config.social?.circleLimit ?? 3, geo: geo, profiles: profiles)
        let host = service.makeHost(options: plane.hostOptions(name: "social", endpoint: resolved.endpoint), logger: logger)
        try await ServiceRunner.run([publisher, profiles, host], endpointFile: resolved.endpointFile, logger: logger,
                                  boundEventsEndpoint: { try await publisher.boundEndpoint() }) { try await host.boundEndpoint() }
    }
}
