import Accounts
import Deliveries
import ArgumentParser
import ServiceKit
import ServiceLifecycle
import SocialReplica
import Storage
import Wire

@main
struct AccountsCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "frienso-accounts",
        abstract: "Frienso accounts service: users, credentials, sessions, profiles.")

    @OptionGroup var options: ServiceOptions

    func run() async throws {
        let resolved = try options.resolve(service: "accounts")
        let logger = ServiceRunner.bootstrapLogging(level: resolved.logLevel, format: resolved.logFormat)
        let plane = try resolved.plane(logger: logger)
        let storage = try await resolved.openStorage(for: "accounts", logger: logger)
        try resolved.refuseSeveralInstances(on: storage, logger: logger)
        let publisher = plane.publisher(name: "accounts", endpoint: try resolved.ownEventEndpoint(), logger: logger)
        // Blocks hide a blocker's profile from the blocked user: accounts follows social's graph
        // when the deployment has social (a deployment without it has no blocks).
        var replica: SocialGraphReplica?
        if let social = resolved.configuredPeer("social") {
            replica = SocialGraphReplica(social: try plane.client("social", at: social, logger: logger),
                                         eventsEndpoint: try resolved.peerEvents("social"), eventsSecurity: try plane.client(of: "social"),
                                         logger: logger)
        }
        var blocks: AccountsService.BlockCheck?
        if let replica {
            blocks = { @Sendable (a: UInt64, b: UInt64) -> Bool? in replica.status.snapshots > 0 ? replica.blocked(a, b) : nil }
        }
        // A deleted account is erased by every service of the deployment that holds data about
        // people (the ones configured here; a deployment without one has nothing there to erase).
        func client(_ member: String) throws -> WireClient? {
            try resolved.configuredPeer(member).map { try plane.client(member, at: $0, logger: logger) }
        }
        let erasers = AccountsService.remoteErasers(social: try client("social"), geo: try client("geo"),
                                                    alerts: try client("alerts"), media: try client("media"))
        var config = AccountsConfig(resolved: resolved)
        config.erasureTargets = erasers.keys.sorted()
        let emails = try EmailProviders(resolved: resolved, logger: logger)
        config.email = emails.email
        logger.info("deleted accounts are erased by", metadata: ["services": "\(config.erasureTargets.joined(separator: ","))"])
        let service = try await AccountsService.open(storage, config: config, events: publisher, blocks: blocks)
        let host = service.makeHost(options: plane.hostOptions(name: "accounts", endpoint: resolved.endpoint), logger: logger)
        let worker = AccountsWorker(service: service, erasers: erasers, logger: logger)
        let emailPrune = PeriodicPrune("emails", logger: logger) { try await service.pruneEmails() }
        // The webhook's HTTP client closes after the worker stopped sending.
        let clients: [any Service] = emails.http.map { [ProviderClientLifecycle($0)] } ?? []
        let services: [any Service] = clients + (replica.map { [$0] } ?? []) + [publisher, worker, emailPrune, host]
        do {
            try await ServiceRunner.run(services, endpointFile: resolved.endpointFile, logger: logger,
                                        boundEventsEndpoint: { try await publisher.boundEndpoint() }) { try await host.boundEndpoint() }
        } catch {
            await storage.close()
            throw error
        }
        await storage.close()
    }
}
