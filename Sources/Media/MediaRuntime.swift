import FriensoProto
public import ServiceLifecycle
public import SocialReplica
public import Wire

/// The social graph from the replica (friends, blocks: no call per photo read), check-in
/// visibility and places from geo.
public struct RemoteMediaPeers: MediaPeers {
    let replica: SocialGraphReplica
    let geo: WireClient
    let deadline: Duration

    public init(replica: SocialGraphReplica, geo: WireClient, deadline: Duration = .seconds(1)) {
        self.replica = replica
        self.geo = geo
        self.deadline = deadline
    }

    public func areFriends(_ a: UInt64, _ b: UInt64) -> Bool { replica.areFriends(a, b) }
    public func blocked(_ a: UInt64, _ b: UInt64) -> Bool { replica.blocked(a, b) }

    public func checkInAccess(viewer: UInt64, owner: UInt64) async throws -> (visible: Bool, mediaID: String) {
        let reply = try await geo.call(GeoV1.GeoService.checkInAccess, GeoV1.CheckInAccessRequest(viewerId: viewer, ownerId: owner),
                                       options: CallOptions(deadline: deadline))
        return (reply.visible, reply.mediaId)
    }

    public func placeExists(_ id: UInt64) async throws -> Bool {
        try await geo.call(GeoV1.GeoService.getPlace, GeoV1.GetPlaceRequest(placeId: id), options: CallOptions(deadline: deadline)).found
    }
}

/// Drops expired uploads and never-attached check-in photos, at start and every minute.
public final class MediaWorker: Service, Sendable {
    private let service: MediaService
    private let interval: Duration

    public init(service: MediaService, interval: Duration = .seconds(60)) {
        self.service = service
        self.interval = interval
    }

    public func run() async throws {
        let service = service, interval = interval
        await cancelWhenGracefulShutdown {
            while !Task.isCancelled {
                await service.maintain()
                try? await Task.sleep(for: interval)
            }
        }
    }
}
