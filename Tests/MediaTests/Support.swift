import Foundation
import FriensoProto
import FriensoTesting
import Logging
@testable import Media
import ServiceLifecycle
import Synchronization
import Testing
import Wire

/// Social and geo as media sees them, under the test's control.
final class FakeMediaPeers: MediaPeers {
    struct State {
        var friends: Set<[UInt64]> = []
        var blocks: Set<[UInt64]> = []
        /// owner → (who may see the check-in, its photo)
        var checkIns: [UInt64: (viewers: Set<UInt64>, mediaID: String)] = [:]
        var places: Set<UInt64> = [7]
        var geoDown = false
    }
    let state = Mutex(State())

    func befriend(_ a: UInt64, _ b: UInt64) { _ = state.withLock { $0.friends.insert([min(a, b), max(a, b)]) } }
    func block(_ a: UInt64, _ b: UInt64) { _ = state.withLock { $0.blocks.insert([min(a, b), max(a, b)]) } }

    func areFriends(_ a: UInt64, _ b: UInt64) -> Bool { state.withLock { $0.friends.contains([min(a, b), max(a, b)]) } }
    func blocked(_ a: UInt64, _ b: UInt64) -> Bool { state.withLock { $0.blocks.contains([min(a, b), max(a, b)]) } }
    func checkInAccess(viewer: UInt64, owner: UInt64) async throws -> (visible: Bool, mediaID: String) {
        try state.withLock { s in
            if s.geoDown { throw RPCError.unavailable("geo is down (test)") }
            guard let c = s.checkIns[owner], c.viewers.contains(viewer) || viewer == owner else { return (false, "") }
            return (true, c.mediaID)
        }
    }
    func placeExists(_ id: UInt64) async throws -> Bool {
        try state.withLock { s in
            if s.geoDown { throw RPCError.unavailable("geo is down (test)") }
            return s.places.contains(id)
        }
    }
}

struct MediaHarness: Sendable {
    let service: MediaService
    let client: RouterClient
    let peers: FakeMediaPeers
    let storage: TestStorage
    let logs: CapturedLogs

    func call<Q, R>(_ user: UInt64, _ method: RPCMethod<Q, R>, _ request: Q, key: String = "") async throws -> R {
        try await client.call(method, request, options: CallOptions(idempotencyKey: key, callerUserID: user))
    }

    /// Start, chunks, finish, as the CLI does.
    func upload(_ bytes: [UInt8], as user: UInt64, purpose: MediaV1.Purpose = .venue, place: UInt64 = 0) async throws -> MediaV1.FinishUploadResponse {
        let start = try await call(user, MediaV1.MediaService.startUpload,
                                   MediaV1.StartUploadRequest(purpose: purpose, placeId: purpose == .venue && place == 0 ? 7 : place, sizeBytes: UInt64(bytes.count)))
        try await sendChunks(bytes, upload: start.uploadId, as: user, chunk: Int(start.chunkBytes))
        return try await call(user, MediaV1.MediaService.finishUpload, MediaV1.FinishUploadRequest(uploadId: start.uploadId))
    }

    func sendChunks(_ bytes: [UInt8], upload: String, as user: UInt64, chunk: Int, from: Int = 0) async throws {
        var offset = from
        while offset < bytes.count {
            let end = min(bytes.count, offset + chunk)
            _ = try await call(user, MediaV1.MediaService.uploadChunk,
                               MediaV1.UploadChunkRequest(uploadId: upload, offset: UInt64(offset), data: Array(bytes[offset..<end])))
            offset = end
        }
    }

    /// The whole photo as `user` reads it, in chunks of `chunk` bytes.
    func download(_ id: String, as user: UInt64, chunk: UInt32 = 0) async throws -> [UInt8] {
        var out: [UInt8] = []
        while true {
            let reply = try await call(user, MediaV1.MediaService.getPhoto, MediaV1.GetPhotoRequest(mediaId: id, offset: UInt64(out.count), maxBytes: chunk))
            out += reply.data
            if reply.eof { return out }
        }
    }

    /// What the store holds: blobs' reference counts, copies of bytes, uploads holding bytes.
    func stored() async throws -> StoredContents { try await service.store.contents() }

    func blobRefs() async throws -> [String: Int] { try await stored().references }
}

func testMediaConfig() -> MediaConfig {
    var config = MediaConfig()
    config.chunkBytes = 64 << 10 // several chunks even for small fixtures
    return config
}

/// Runs media in process on `storage` (a fresh one of `engine` unless given: a test that
/// "restarts" media passes the same storage to each run).
func withMedia<T: Sendable>(engine: Engine = .sqlite, storage given: TestStorage? = nil, peers: FakeMediaPeers = FakeMediaPeers(),
                            config: MediaConfig = testMediaConfig(), now: (@Sendable () -> Int64)? = nil,
                            _ body: @Sendable (MediaHarness) async throws -> T) async throws -> T {
    let logs = CapturedLogs()
    return try await TestStorage.withOpen(engine, given: given, service: "media") { storage, opened in
        let service = try await MediaService.open(opened, peers: peers, config: config, logger: logs.logger("media"), now: now)
        // In process: the router and the durable reply cache, as the host runs them (no socket).
        let client = RouterClient(service, name: "media", logger: logs.logger("media-host"))
        let outcome: Result<T, any Error>
        do {
            outcome = .success(try await body(MediaHarness(service: service, client: client, peers: peers, storage: storage, logs: logs)))
        } catch {
            print("media test failed (\(storage.engine)); logs:\n\(logs.dump().suffix(6000))")
            outcome = .failure(error)
        }
        await client.flush() // a graceful stop: replies being saved are in before a "restart"
        return try outcome.get()
    }
}

/// Every media suite runs inside this one, one test at a time (see `AlertsTestGroup`).
@Suite("media", .serialized) struct MediaTestGroup {}

