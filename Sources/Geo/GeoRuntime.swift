import Foundation
import FriensoProto
public import Logging
public import ServiceLifecycle
public import Wire

/// Follows the alerts service's `grants` stream and applies each grant to geo. Grants are kept
/// in geo's database too, so a restart of geo keeps the live ones; alerts republishes a grant
/// whenever it changes.
public final class GrantConsumer: Service, Sendable {
    private let service: GeoService
    private let endpoint: String
    private let security: ClientSecurity
    private let logger: Logger
    private let context: ZMQContext
    private let reactor: Reactor

    /// - Parameters: endpoint, security: alerts' PUB socket and how to authenticate to it.
    public init(service: GeoService, endpoint: String, security: ClientSecurity = .plaintext, logger: Logger,
                context: ZMQContext = .shared, reactor: Reactor = .shared) {
        self.service = service
        self.endpoint = endpoint
        self.security = security
        self.logger = logger
        self.context = context
        self.reactor = reactor
    }

    /// `FRIENSO_GEO_GRANTS=each` stores each grant in a transaction of its own, as before item 46
    /// of `docs/benchmarks.md` (issue 16), for A/B runs.
    static let grantsPerCommit = ProcessInfo.processInfo.environment["FRIENSO_GEO_GRANTS"] == "each" ? 1 : 256

    public func run() async throws {
        let subscriber = Subscriber(endpoint: endpoint, prefixes: ["grants"], logger: logger, security: security,
                                    context: context, reactor: reactor)
        let service = service, logger = logger
        // The grants that arrive while a batch is stored are stored together next, in order.
        let batches = AsyncBatcher<GeoV1.LocationGrant>(maxBatch: Self.grantsPerCommit) { grants in
            do { try await service.apply(grants) } catch {
                logger.error("grants not applied", metadata: ["error": "\(error)", "grants": "\(grants.count)"])
            }
        }
        await cancelWhenGracefulShutdown {
            for await event in subscriber.events {
                guard let grant = try? GeoV1.LocationGrant(serializedBytes: event.envelope.payload) else {
                    logger.warning("undecodable grant event")
                    continue
                }
                batches.add(grant)
            }
        }
        await batches.flush()
        subscriber.stop()
    }
}

/// Check-in photos through the media service.
public struct RemoteCheckInPhotos: CheckInPhotos {
    let media: WireClient

    public init(media: WireClient) { self.media = media }

    public func attach(user: UInt64, mediaID: String, deadline: Duration) async throws {
        // Idempotent: attaching the same photo again changes nothing, so a resend is safe.
        _ = try await media.call(MediaV1.MediaService.attachCheckInPhoto, MediaV1.AttachCheckInPhotoRequest(userId: user, mediaId: mediaID),
                                 options: CallOptions(deadline: deadline, callerUserID: user, idempotent: true))
    }
}
