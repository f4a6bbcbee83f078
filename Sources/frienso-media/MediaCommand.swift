import ArgumentParser
import Logging
import Media
import ServiceKit
import SocialReplica
import Wire

@main
struct MediaCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "frienso-media",
        abstract: "Frienso media service: check-in photos, venue photos, profile pictures.")

    @OptionGroup var options: ServiceOptions

    func run() async throws {
        let resolved = try options.resolve(service: "media")
        try resolved.refuseSeveralInstances("media runs on SQLite only (its photos are files on its host)")
        let logger = ServiceRunner.bootstrapLogging(level: resolved.logLevel, format: resolved.logFormat)
        let plane = try resolved.plane(logger: logger)
        // PostgreSQL is accounts' only so far (issue 21): a configuration asking it of media is refused.
        _ = try resolved.storageChoice(for: "media", postgres: false, logger: logger)
        try resolved.createDataDirectory()
        let replica = SocialGraphReplica(social: try plane.client("social", at: resolved.peer("social"), logger: logger),
                                         eventsEndpoint: try resolved.peerEvents("social"), eventsSecurity: try plane.client(of: "social"),
                                         logger: logger)
        let peers = RemoteMediaPeers(replica: replica, geo: try plane.client("geo", at: resolved.peer("geo"), logger: logger))
        let service = try MediaService(directory: resolved.dataDirectory, peers: peers, config: MediaConfig(resolved: resolved), logger: logger)
        let host = service.makeHost(options: plane.hostOptions(name: "media", endpoint: resolved.endpoint), logger: logger)
        try await ServiceRunner.run([replica, MediaWorker(service: service), host], endpointFile: resolved.endpointFile, logger: logger) {
            try await host.boundEndpoint()
        }
    }
}
