import ArgumentParser
import ServiceKit
import Social
import SocialReplica
import Storage
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
        let storage = try await resolved.openStorage(for: "social", logger: logger)
        try resolved.refuseSeveralInstances(on: storage, logger: logger)
        let accounts = try plane.client("accounts", at: resolved.peer("accounts"), logger: logger)
        let publisher = plane.publisher(name: "social", endpoint: try resolved.ownEventEndpoint(), logger: logger)
        let geo = try plane.client("geo", at: resolved.peer("geo"), logger: logger)
        let profiles = ProfileReplica.profiles(accounts: accounts, eventsEndpoint: try resolved.peerEvents("accounts"),
                                               eventsSecurity: try plane.client(of: "accounts"), logger: logger)
        let service: SocialService
        do {
            service = try await SocialService.open(storage, accounts: accounts, publisher: publisher,
                                                   circleLimit: resolved.config.social?.circleLimit ?? 3, geo: geo, profiles: profiles)
        } catch {
            await storage.close()
            throw error
        }
        let host = service.makeHost(options: plane.hostOptions(name: "social", endpoint: resolved.endpoint), logger: logger)
        do {
            let notices = PeriodicPrune("notices", logger: logger) { try await service.pruneNotices() }
            try await ServiceRunner.run([publisher, profiles, host, notices], endpointFile: resolved.endpointFile, logger: logger,
                                      boundEventsEndpoint: { try await publisher.boundEndpoint() }) { try await host.boundEndpoint() }
        } catch {
            await storage.close()
            throw error
        }
        await storage.close()
    }
}
