import Alerts
import ArgumentParser
import Logging
import ServiceKit
import ServiceLifecycle
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
        let logger = ServiceRunner.bootstrapLogging(level: resolved.logLevel)
        try resolved.createDataDirectory()
        let toSocial = WireClient(endpoint: resolved.endpoint(of: "social"), logger: logger)
        // The graph replica answers "who is in this circle" while social restarts.
        let replica = SocialGraphReplica(social: toSocial, eventsEndpoint: resolved.eventEndpoint(of: "social"), logger: logger)
        let peers = RemotePeers(accounts: WireClient(endpoint: resolved.endpoint(of: "accounts"), logger: logger), social: toSocial,
                                geo: WireClient(endpoint: resolved.endpoint(of: "geo"), logger: logger), logger: logger,
                                replicaCircle: { owner in replica.read { $0.circle(of: owner) } })
        let publisher = Publisher(name: "alerts", endpoint: resolved.eventEndpoint(of: "alerts"), logger: logger)
        let service = try AlertsService(directory: resolved.dataDirectory, peers: peers, events: publisher,
                                        config: AlertsConfig(resolved: resolved), logger: logger)
        let worker = AlertsWorker(service: service, socialEvents: resolved.eventEndpoint(of: "social"), logger: logger)
        let host = service.makeHost(options: HostOptions(name: "alerts", endpoint: resolved.endpoint))
        try await ServiceRunner.run([replica, publisher, worker, host], endpointFile: resolved.endpointFile, logger: logger,
                                    boundEventsEndpoint: { try await publisher.boundEndpoint() }) {
            try await host.boundEndpoint()
        }
    }
}
