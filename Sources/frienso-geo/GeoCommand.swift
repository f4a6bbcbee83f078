import ArgumentParser
import FriensoProto
import Geo
import Logging
import ServiceKit
import ServiceLifecycle
import SocialReplica
import Wire

@main
struct GeoCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "frienso-geo",
        abstract: "Frienso geo service: live locations, visibility, friends' locations, nearby, navigation.")

    @OptionGroup var options: ServiceOptions

    func run() async throws {
        let resolved = try options.resolve(service: "geo")
        let logger = ServiceRunner.bootstrapLogging(level: resolved.logLevel)
        try resolved.createDataDirectory()
        let toSocial = WireClient(endpoint: resolved.endpoint(of: "social"), logger: logger)
        let replica = SocialGraphReplica(social: toSocial, eventsEndpoint: resolved.eventEndpoint(of: "social"), logger: logger)
        let publisher = Publisher(name: "geo", endpoint: resolved.eventEndpoint(of: "geo"), logger: logger)
        let service = try GeoService(directory: resolved.dataDirectory, graph: replica, publisher: publisher,
                                     config: GeoConfig(resolved: resolved),
                                     photos: RemoteCheckInPhotos(media: WireClient(endpoint: resolved.endpoint(of: "media"), logger: logger)),
                                     logger: logger)
        let grants = GrantConsumer(service: service, endpoint: resolved.eventEndpoint(of: "alerts"), logger: logger)
        let pruner = HistoryPruner(service: service, logger: logger)
        let host = service.makeHost(options: HostOptions(name: "geo", endpoint: resolved.endpoint))
        try await ServiceRunner.run([replica, publisher, grants, pruner, host], endpointFile: resolved.endpointFile, logger: logger,
                                  boundEventsEndpoint: { try await publisher.boundEndpoint() }) {
            try await host.boundEndpoint()
        }
    }
}
