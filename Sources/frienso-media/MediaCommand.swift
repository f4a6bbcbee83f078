import ArgumentParser
import Logging
import Media
import ServiceKit
import SocialReplica
import Storage
import Wire

@main
struct MediaCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "frienso-media",
        abstract: "Frienso media service: check-in photos, venue photos, profile pictures.")

    @OptionGroup var options: ServiceOptions

    func run() async throws {
        let resolved = try options.resolve(service: "media")
        let logger = ServiceRunner.bootstrapLogging(level: resolved.logLevel, format: resolved.logFormat)
        let plane = try resolved.plane(logger: logger)
        try resolved.createDataDirectory()
        try await resolved.withStorage(for: "media", logger: logger) { storage in
            try await run(resolved, storage: storage, plane: plane, logger: logger)
        }
    }

    private func run(_ resolved: ResolvedOptions, storage: StorageEngine, plane: InternalPlane, logger: Logger) async throws {
        let replica = SocialGraphReplica(social: try plane.client("social", at: resolved.peer("social"), logger: logger),
                                         eventsEndpoint: try resolved.peerEvents("social"), eventsSecurity: try plane.client(of: "social"),
                                         logger: logger)
        let peers = RemoteMediaPeers(replica: replica, geo: try plane.client("geo", at: resolved.peer("geo"), logger: logger))
        let service = try await MediaService.open(storage, peers: peers, config: MediaConfig(resolved: resolved), logger: logger)
        let host = service.makeHost(options: plane.hostOptions(name: "media", endpoint: resolved.endpoint), logger: logger)
        let answering = StartWhenReady(host, when: { replica.isReady }, what: "social's graph", logger: logger)
        try await ServiceRunner.run([replica, MediaWorker(service: service), answering], endpointFile: resolved.endpointFile, logger: logger) {
            try await host.boundEndpoint()
        }
    }
}
