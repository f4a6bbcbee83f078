import Alerts
import Deliveries
import ArgumentParser
import Logging
import ServiceKit
import ServiceLifecycle
import Storage
import SocialReplica
import Wire

@main
struct AlertsCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "frienso-alerts",
        abstract: "Frienso alerts service: watchMe, helpNow, the request inbox, push/SMS delivery, emergency prompts, campus resources.")

    @OptionGroup var options: ServiceOptions

    func run() async throws {
        let resolved = try options.resolve(service: "alerts")
        let logger = ServiceRunner.bootstrapLogging(level: resolved.logLevel, format: resolved.logFormat)
        let plane = try resolved.plane(logger: logger)
        try resolved.createDataDirectory()
        try await resolved.withStorage(for: "alerts", logger: logger) { storage in
            try await run(resolved, storage: storage, plane: plane, logger: logger)
        }
    }

    private func run(_ resolved: ResolvedOptions, storage: StorageEngine, plane: InternalPlane, logger: Logger) async throws {
        let toSocial = try plane.client("social", at: resolved.peer("social"), logger: logger)
        let socialEvents = try resolved.peerEvents("social")
        // The graph replica answers "who is in this circle" while social restarts.
        let replica = SocialGraphReplica(social: toSocial, eventsEndpoint: socialEvents, eventsSecurity: try plane.client(of: "social"),
                                         logger: logger)
        let toAccounts = try plane.client("accounts", at: resolved.peer("accounts"), logger: logger)
        // Names for helpNow texts from memory, also while accounts restarts.
        let profiles = ProfileReplica.profiles(accounts: toAccounts, eventsEndpoint: try resolved.peerEvents("accounts"),
                                               eventsSecurity: try plane.client(of: "accounts"), logger: logger)
        let peers = RemotePeers(accounts: toAccounts, social: toSocial,
                                geo: try plane.client("geo", at: resolved.peer("geo"), logger: logger), logger: logger,
                                profiles: profiles, replicaCircle: { owner in replica.read { $0.circle(of: owner) } },
                                replicaClock: { owner in replica.circleClock(of: owner) })
        let publisher = plane.publisher(name: "alerts", endpoint: try resolved.ownEventEndpoint(), logger: logger)
        let providers = try DeliveryProviders(resolved: resolved, logger: logger)
        let service = try await AlertsService.open(storage, instance: "\(resolved.instance)", peers: peers, events: publisher,
                                                   config: AlertsConfig(resolved: resolved), sms: providers.sms, push: providers.push, logger: logger)
        let worker = AlertsWorker(service: service, socialEvents: socialEvents, socialEventsSecurity: try plane.client(of: "social"),
                                  geoEvents: try resolved.peerEvents("geo"), geoEventsSecurity: try plane.client(of: "geo"), logger: logger)
        MetricsRefresh.register { await service.recordOutboxMetrics(nowMs: WallClock.milliseconds()) }
        let host = service.makeHost(options: plane.hostOptions(name: "alerts", endpoint: resolved.endpoint), logger: logger)
        // The providers' HTTP client closes after the worker stopped delivering.
        let clients: [any Service] = providers.http.map { [ProviderClientLifecycle($0)] } ?? []
        try await ServiceRunner.run(clients + [replica, profiles, publisher, worker, host], endpointFile: resolved.endpointFile, logger: logger,
                                    boundEventsEndpoint: { try await publisher.boundEndpoint() }) {
            try await host.boundEndpoint()
        }
    }
}
