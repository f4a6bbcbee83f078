import ArgumentParser
import FriensoProto
import Geo
import Logging
import ServiceKit
import ServiceLifecycle
import SocialReplica
import Storage
import Wire

@main
struct GeoCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "frienso-geo",
        abstract: "Frienso geo service: live locations, visibility, friends' locations, nearby, navigation.")

    @OptionGroup var options: ServiceOptions

    func run() async throws {
        let resolved = try options.resolve(service: "geo")
        let logger = ServiceRunner.bootstrapLogging(level: resolved.logLevel, format: resolved.logFormat)
        let plane = try resolved.plane(logger: logger)
        try resolved.createDataDirectory()
        try await resolved.withStorage(for: "geo", logger: logger) { storage in
            try await run(resolved, storage: storage, plane: plane, logger: logger)
        }
    }

    private func run(_ resolved: ResolvedOptions, storage: StorageEngine, plane: InternalPlane, logger: Logger) async throws {
        let toSocial = try plane.client("social", at: resolved.peer("social"), logger: logger)
        let replica = SocialGraphReplica(social: toSocial, eventsEndpoint: try resolved.peerEvents("social"),
                                         eventsSecurity: try plane.client(of: "social"), logger: logger)
        let publisher = plane.publisher(name: "geo", endpoint: try resolved.ownEventEndpoint(), logger: logger)
        let media = try plane.client("media", at: resolved.peer("media"), logger: logger)
        let service = try await GeoService.open(storage, instance: resolved.instance, instances: resolved.instances, graph: replica,
                                                publisher: publisher, config: GeoConfig(resolved: resolved),
                                                photos: RemoteCheckInPhotos(media: media), logger: logger)
        let grants = GrantConsumer(service: service, endpoint: try resolved.peerEvents("alerts"), security: try plane.client(of: "alerts"),
                                   logger: logger)
        let pruner = PeriodicPrune("history", logger: logger) { try await service.pruneHistory() }
        let audit = AuditWriter(service: service, logger: logger)
        MetricsRefresh.register { service.recordIndexMetrics() }
        let host = service.makeHost(options: plane.hostOptions(name: "geo", endpoint: resolved.endpoint), logger: logger)
        let answering = StartWhenReady(host, when: { replica.isReady }, what: "social's graph", logger: logger)
        var services: [any Service] = [replica, publisher, grants, pruner, audit, answering]
        if resolved.instances > 1 { services.append(GeoFollower(service: service, logger: logger)) }
        try await ServiceRunner.run(services, endpointFile: resolved.endpointFile, logger: logger,
                                    boundEventsEndpoint: { try await publisher.boundEndpoint() }) {
            try await host.boundEndpoint()
        }
    }
}
