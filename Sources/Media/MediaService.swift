import Foundation
public import FriensoProto
public import Logging
public import Storage
import Identity
import Synchronization
public import Wire

public struct MediaConfig: Sendable {
    /// The largest photo accepted (default 8 MiB).
    public var maxPhotoBytes: Int64 = 8 << 20
    /// What one user's photos may take in all (each photo counted in full).
    public var quotaBytes: Int64 = 256 << 20
    /// Uploads one user may start in an hour.
    public var uploadsPerHour = 120
    /// The most bytes a chunk (up or down) carries: well under the 4 MiB frame cap of every
    /// socket, and small enough that one transfer never holds a socket for long.
    public var chunkBytes = 1 << 20
    /// An unfinished upload is dropped after this.
    public var uploadLifetime: Duration = .seconds(3600)
    /// A check-in photo never attached to a check-in is dropped after this.
    public var unattachedLifetime: Duration = .seconds(24 * 3600)
    public init() {}
}

/// What media asks of the others: the social graph (a replica) and geo (check-in visibility, places).
public protocol MediaPeers: Sendable {
    func areFriends(_ a: UInt64, _ b: UInt64) -> Bool
    func blocked(_ a: UInt64, _ b: UInt64) -> Bool
    /// May `viewer` see `owner`'s active check-in, and which photo does it carry (geo decides).
    func checkInAccess(viewer: UInt64, owner: UInt64) async throws -> (visible: Bool, mediaID: String)
    func placeExists(_ id: UInt64) async throws -> Bool
}

/// Check-in photos, venue photos and profile pictures: chunked uploads checked by their bytes,
/// location metadata removed, stored by content with reference counts, read by who may see them.
public final class MediaService: Sendable {
    public typealias API = MediaV1.MediaService

    let store: any MediaStorage
    let peers: any MediaPeers
    let config: MediaConfig
    let now: @Sendable () -> Int64
    let logger: Logger
    public let replyStore: AnyReplyStore
    /// Uploads with a chunk or a finish being handled by this instance: one at a time per upload
    /// (the storage orders requests that reach different instances).
    private let busy = Mutex<Set<String>>([])

    /// Opens `<directory>/media.sqlite`, `<directory>/blobs/` and `<directory>/uploads/`, sweeping what a crash left.
    public convenience init(directory: String, peers: any MediaPeers, config: MediaConfig = MediaConfig(), logger: Logger,
                            now: (@Sendable () -> Int64)? = nil) throws {
        self.init(store: try SQLiteMediaStore(directory: directory), peers: peers, config: config, logger: logger, now: now)
    }

    /// Media on `engine`: SQLite in its folder (as `init(directory:…)`), or the `media` schema of
    /// a PostgreSQL database, which several instances share.
    public static func open(_ engine: StorageEngine, peers: any MediaPeers, config: MediaConfig = MediaConfig(), logger: Logger,
                            now: (@Sendable () -> Int64)? = nil) async throws -> MediaService {
        switch engine {
        case .sqlite(let directory):
            return try MediaService(directory: directory, peers: peers, config: config, logger: logger, now: now)
        case .postgres(let database):
            return MediaService(store: try await PostgresMediaStore.open(database), peers: peers, config: config, logger: logger, now: now)
        }
    }

    init(store: any MediaStorage, peers: any MediaPeers, config: MediaConfig, logger: Logger, now: (@Sendable () -> Int64)?) {
        self.store = store
        self.peers = peers
        self.config = config
        self.now = now ?? { WallClock.milliseconds() }
        self.logger = logger
        replyStore = AnyReplyStore(store.replies)
    }


    // MARK: Upload

    public func startUpload(_ request: MediaV1.StartUploadRequest, _ context: RequestContext) async throws -> MediaV1.StartUploadResponse {
        let caller = try context.requireCaller()
        guard request.sizeBytes > 0 else { throw RPCError.invalidArgument("size_bytes: the file is empty") }
        guard request.sizeBytes <= UInt64(config.maxPhotoBytes) else {
            throw RPCError.invalidArgument("size_bytes: \(request.sizeBytes) bytes is over the \(config.maxPhotoBytes)-byte limit for a photo")
        }
        switch request.purpose {
        case .profile, .checkIn:
            guard request.placeId == 0 else { throw RPCError.invalidArgument("place_id: only venue photos name a place") }
        case .venue:
            guard request.placeId != 0 else { throw RPCError.invalidArgument("place_id: a venue photo names its place") }
            guard try await peers.placeExists(request.placeId) else { throw RPCError.notFound("no place \(request.placeId)") }
        default:
            throw RPCError.invalidArgument("purpose: profile, check-in or venue")
        }
        let at = now()
        let upload = UploadRecord(id: randomID(), owner: caller, purpose: request.purpose, placeID: request.placeId, size: Int64(request.sizeBytes),
                                  createdMs: at, expiresMs: at + config.uploadLifetime.wholeMilliseconds)
        _ = try await store.startUpload(upload, quotaBytes: config.quotaBytes, uploadsPerHour: config.uploadsPerHour)
        return MediaV1.StartUploadResponse(uploadId: upload.id, chunkBytes: UInt32(config.chunkBytes), expiresAtMs: upload.expiresMs)
    }

    /// The caller's live upload, or NOT_FOUND.
    private func liveUpload(_ id: String, caller: UInt64) async throws -> UploadRecord {
        guard UploadRecord.isID(id), let upload = try await store.upload(id), upload.owner == caller else {
            throw RPCError.notFound("no upload \(id.prefix(40))")
        }
        guard upload.mediaID != nil || upload.expiresMs > now() else { throw RPCError.notFound("upload \(id) expired: start again") }
        return upload
    }

    private func exclusively<T>(_ upload: String, _ body: () async throws -> T) async throws -> T {
        let took = busy.withLock { $0.insert(upload).inserted }
        guard took else { throw RPCError.failedPrecondition("another request for upload \(upload) is being handled: send chunks one at a time") }
        defer { _ = busy.withLock { $0.remove(upload) } }
        return try await body()
    }

    public func uploadChunk(_ request: MediaV1.UploadChunkRequest, _ context: RequestContext) async throws -> MediaV1.UploadChunkResponse {
        let caller = try context.requireCaller()
        let upload = try await liveUpload(request.uploadId, caller: caller)
        guard upload.mediaID == nil else { throw RPCError.failedPrecondition("upload \(upload.id) is already finished") }
        guard !request.data.isEmpty, request.data.count <= config.chunkBytes else {
            throw RPCError.invalidArgument("data: 1 to \(config.chunkBytes) bytes a chunk")
        }
        guard request.offset + UInt64(request.data.count) <= UInt64(upload.size) else {
            throw RPCError.invalidArgument("the chunk at \(request.offset) runs past the declared size \(upload.size)")
        }
        if request.offset == 0 {
            // Decide the type on the first bytes: a text file named .jpg goes no further.
            let prefixNeeded = min(ImageInspector.sniffLength, Int(upload.size))
            guard request.data.count >= prefixNeeded else {
                throw RPCError.invalidArgument("the first chunk must hold at least \(prefixNeeded) bytes")
            }
            guard ImageInspector.sniff(request.data) != nil else {
                try await store.abandon(upload.id)
                throw RPCError.invalidArgument("not a JPEG, PNG, HEIC or WebP image (decided by its bytes, not its name)")
            }
        }
        return try await exclusively(upload.id) {
            switch try await store.receiveChunk(upload, offset: request.offset, data: request.data) {
            case .received(let total):
                return MediaV1.UploadChunkResponse(receivedBytes: total)
            case .outOfOrder(let have):
                throw RPCError.failedPrecondition("chunks go in order: \(have) bytes received, this one starts at \(request.offset)")
            case .gone:
                throw RPCError.notFound("upload \(upload.id) expired: start again")
            }
        }
    }

    public func finishUpload(_ request: MediaV1.FinishUploadRequest, _ context: RequestContext) async throws -> MediaV1.FinishUploadResponse {
        let caller = try context.requireCaller()
        let upload = try await liveUpload(request.uploadId, caller: caller)
        return try await exclusively(upload.id) {
            // Finished already (a retry): the same answer. A finish running meanwhile, here or on
            // another instance, is the storage's to see (`finish` returns nil).
            if upload.mediaID != nil { return try await finishedAnswer(upload.id) }
            var bytes = try await store.receivedBytes(upload)
            guard bytes.count == upload.size else {
                // Another instance may have finished it since `upload` was read: its finish
                // moved the received bytes into the photo. Then this is a retry, and gets the
                // same answer.
                if try await store.upload(upload.id)?.mediaID != nil { return try await finishedAnswer(upload.id) }
                throw RPCError.failedPrecondition("received \(bytes.count) of \(upload.size) bytes: send the rest first")
            }
            guard let type = ImageInspector.sniff(bytes) else { throw RPCError.invalidArgument("not a JPEG, PNG, HEIC or WebP image") }
            let size: ImageInspector.Dimensions
            do { size = try ImageInspector.inspect(bytes, as: type) } catch let error as ImageError {
                throw RPCError.invalidArgument("not a whole image: \(error.description)")
            }
            let scrubbed = LocationScrubber.scrub(&bytes, type: type)
            let item = MediaRecord(id: randomID(), owner: caller, purpose: upload.purpose, placeID: upload.placeID, type: type,
                                   size: Int64(bytes.count), width: size.width, height: size.height, sha256: SHA256.hexDigest(bytes),
                                   createdMs: now(), attached: false)
            guard let finished = try await store.finish(upload: upload, item: item, bytes: bytes, unchanged: !scrubbed, locationRemoved: scrubbed) else {
                return try await finishedAnswer(upload.id) // another request finished it meanwhile
            }
            context.logger.info("photo stored", metadata: ["media": "\(item.id)", "bytes": "\(bytes.count)", "type": "\(type.protoName)",
                                                           "deduplicated": "\(finished.deduplicated)", "location-removed": "\(scrubbed)"])
            return MediaV1.FinishUploadResponse(item: finished.item.proto, locationRemoved: scrubbed, deduplicated: finished.deduplicated,
                                               replacedMediaId: finished.replaced)
        }
    }

    /// The answer of an upload finished already (a retry, or a finish that reached another
    /// instance at the same time).
    private func finishedAnswer(_ upload: String) async throws -> MediaV1.FinishUploadResponse {
        guard let again = try await store.upload(upload), let id = again.mediaID else {
            throw RPCError.notFound("no upload \(upload)")
        }
        guard let item = try await store.item(id) else { throw RPCError.notFound("the photo of upload \(upload) was deleted since") }
        return MediaV1.FinishUploadResponse(item: item.proto, locationRemoved: again.locationRemoved, deduplicated: again.deduplicated,
                                           replacedMediaId: again.replaced)
    }

    // MARK: Reading

    /// The item if `viewer` may read it; NOT_FOUND alike for "no such photo" and "not yours to see".
    func readable(_ id: String, viewer: UInt64) async throws -> MediaRecord {
        guard UploadRecord.isID(id), let item = try await store.item(id), try await mayRead(item, viewer: viewer) else {
            throw RPCError.notFound("no photo \(id.prefix(40)) that you may see")
        }
        return item
    }

    func mayRead(_ item: MediaRecord, viewer: UInt64) async throws -> Bool {
        if item.owner == viewer { return true }
        if peers.blocked(viewer, item.owner) { return false }
        switch item.purpose {
        case .profile: return peers.areFriends(viewer, item.owner)
        case .venue: return true
        case .checkIn:
            let access = try await peers.checkInAccess(viewer: viewer, owner: item.owner)
            return access.visible && access.mediaID == item.id
        default: return false
        }
    }

    public func getPhoto(_ request: MediaV1.GetPhotoRequest, _ context: RequestContext) async throws -> MediaV1.GetPhotoResponse {
        let caller = try context.requireCaller()
        let item = try await readable(request.mediaId, viewer: caller)
        let limit = request.maxBytes == 0 ? config.chunkBytes : Int(request.maxBytes)
        guard limit <= config.chunkBytes else { throw RPCError.invalidArgument("max_bytes: at most \(config.chunkBytes)") }
        guard request.offset <= UInt64(item.size) else { throw RPCError.invalidArgument("offset: past the end (\(item.size) bytes)") }
        let count = min(limit, Int(item.size) - Int(request.offset))
        guard let data = try await store.photoBytes(item, offset: Int(request.offset), count: count) else {
            throw RPCError.notFound("no photo \(item.id) that you may see") // deleted meanwhile
        }
        return MediaV1.GetPhotoResponse(item: item.proto, data: data, eof: Int(request.offset) + count >= Int(item.size))
    }

    public func listPhotos(_ request: MediaV1.ListPhotosRequest, _ context: RequestContext) async throws -> MediaV1.ListPhotosResponse {
        let caller = try context.requireCaller()
        let selectors = [request.placeId != 0, request.checkInOf != 0, request.profileOf != 0, request.mine].filter { $0 }.count
        guard selectors == 1 else { throw RPCError.invalidArgument("name one of place_id, check_in_of, profile_of, mine") }
        let limit = request.limit == 0 ? 20 : Int(request.limit)
        guard limit <= 100 else { throw RPCError.invalidArgument("limit: at most 100") }
        if request.checkInOf != 0 || request.profileOf != 0 {
            let owner = request.checkInOf != 0 ? request.checkInOf : request.profileOf
            let item = request.checkInOf != 0 ? try await store.checkInPhoto(of: owner) : try await store.profilePicture(of: owner)
            guard let item, try await mayRead(item, viewer: caller) else { return MediaV1.ListPhotosResponse() }
            return MediaV1.ListPhotosResponse(items: [item.proto])
        }
        var cursor: (Int64, String)?
        if !request.pageToken.isEmpty {
            let parts = request.pageToken.split(separator: ".", maxSplits: 1)
            guard parts.count == 2, let ms = Int64(parts[0]), UploadRecord.isID(String(parts[1])) else { throw RPCError.invalidArgument("page_token: not one this service gave") }
            cursor = (ms, String(parts[1]))
        }
        var items: [MediaRecord] = []
        var next = ""
        // Venue photos of people the caller blocked (or who blocked them) are left out; read on
        // until the page is full so a page is not short for it. The token names the last photo
        // looked at, so the next page starts right after it.
        reading: while true {
            let batch = try await store.list(request.mine ? .owner(caller) : .venue(place: request.placeId), after: cursor, limit: limit + 1)
            for item in batch {
                if items.count == limit {
                    next = "\(cursor!.0).\(cursor!.1)" // this one, at least, is left
                    break reading
                }
                cursor = (item.createdMs, item.id)
                if item.owner == caller || !peers.blocked(caller, item.owner) { items.append(item) }
            }
            if batch.count <= limit { break } // the end
        }
        return MediaV1.ListPhotosResponse(items: items.map(\.proto), nextPageToken: next)
    }

    // MARK: Changes

    public func deletePhoto(_ request: MediaV1.DeletePhotoRequest, _ context: RequestContext) async throws -> MediaV1.DeletePhotoResponse {
        let caller = try context.requireCaller()
        guard UploadRecord.isID(request.mediaId),
              let released = try await store.delete(request.mediaId, owner: caller) else {
            throw RPCError.notFound("no photo \(request.mediaId.prefix(40)) of yours")
        }
        return MediaV1.DeletePhotoResponse(bytesReleased: released)
    }

    public func getUsage(_ request: MediaV1.GetUsageRequest, _ context: RequestContext) async throws -> MediaV1.GetUsageResponse {
        let caller = try context.requireCaller()
        let usage = try await store.usage(of: caller, now: now())
        return MediaV1.GetUsageResponse(usedBytes: UInt64(usage.storedBytes + usage.pendingBytes), quotaBytes: UInt64(config.quotaBytes),
                                        uploadsLastHour: UInt32(usage.uploadsLastHour), uploadsPerHour: UInt32(config.uploadsPerHour),
                                        maxPhotoBytes: UInt64(config.maxPhotoBytes))
    }

    public func attachCheckInPhoto(_ request: MediaV1.AttachCheckInPhotoRequest, _ context: RequestContext) async throws -> MediaV1.AttachCheckInPhotoResponse {
        guard request.userId != 0 else { throw RPCError.invalidArgument("user_id: required") }
        guard request.mediaId.isEmpty || UploadRecord.isID(request.mediaId) else {
            throw RPCError.notFound("no photo \(request.mediaId.prefix(40)) of yours")
        }
        switch try await store.attachCheckInPhoto(user: request.userId, id: request.mediaId) {
        case .attached(let released): return MediaV1.AttachCheckInPhotoResponse(releasedMediaId: released)
        case .notFound: throw RPCError.notFound("no photo \(request.mediaId) of yours")
        case .wrongPurpose: throw RPCError.invalidArgument("photo \(request.mediaId) was not uploaded as a check-in photo")
        }
    }

    /// Drops expired uploads and never-attached check-in photos (see `MediaStore.expire`).
    public func maintain() async {
        do {
            let (uploads, photos) = try await store.expire(now: now(), unattachedFor: config.unattachedLifetime.wholeMilliseconds)
            if uploads + photos > 0 { logger.info("media expired", metadata: ["uploads": "\(uploads)", "unattached-photos": "\(photos)"]) }
        } catch {
            logger.error("media maintenance failed", metadata: ["error": "\(error)"])
        }
    }
}

/// Every rpc of the contract has its handler above (or the build fails): see `MethodRouter.register(all:)`.
extension MediaService: FriensoService, MediaV1.MediaService.Handler {
    /// Handlers read and write files or wait for PostgreSQL: they run on the global pool, not the reactor.
    public static var handlerExecution: HandlerExecution { .pool }
}
