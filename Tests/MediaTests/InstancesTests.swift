import Foundation
import FriensoProto
import FriensoTesting
import Identity
@testable import Media
import Synchronization
import Testing
import Wire

private typealias API = MediaV1.MediaService

extension MediaTestGroup {
    /// Two media instances on one PostgreSQL schema, as two processes on two hosts run them: each
    /// request may reach either, so uploads, finishes and maintenance passes meet in the database.
    @Suite("media: several instances on PostgreSQL", .timeLimit(.minutes(2))) struct InstancesTests {
        /// Runs `body` with two instances sharing a fresh PostgreSQL schema.
        func withTwoInstances(now: (@Sendable () -> Int64)? = nil, _ body: @Sendable (MediaHarness, MediaHarness) async throws -> Void) async throws {
            let storage = try await TestStorage.fresh(.postgres, service: "media")
            let peers = FakeMediaPeers()
            do {
                try await withMedia(storage: storage, peers: peers, now: now) { a in
                    try await withMedia(storage: storage, peers: peers, now: now) { b in try await body(a, b) }
                }
            } catch {
                await storage.remove()
                throw error
            }
            await storage.remove()
        }

        @Test func chunksOnBothInstances_makeOnePhoto_readableFromEither() async throws {
            try await withTwoInstances { a, b in
                let photo = Fixture.jpeg(width: 800, height: 600, gps: true, filler: 300_000)
                let start = try await a.call(1, API.startUpload, MediaV1.StartUploadRequest(purpose: .venue, placeId: 7, sizeBytes: UInt64(photo.count)))
                var offset = 0, turn = 0
                while offset < photo.count {
                    let end = min(photo.count, offset + 65_536)
                    let instance = turn % 2 == 0 ? a : b
                    let reply = try await instance.call(1, API.uploadChunk, MediaV1.UploadChunkRequest(uploadId: start.uploadId, offset: UInt64(offset),
                                                                                                       data: Array(photo[offset..<end])))
                    #expect(reply.receivedBytes == UInt64(end))
                    // The same chunk again, on the other instance (a retry that went elsewhere): nothing added.
                    let again = try await (turn % 2 == 0 ? b : a).call(1, API.uploadChunk, MediaV1.UploadChunkRequest(
                        uploadId: start.uploadId, offset: UInt64(offset), data: Array(photo[offset..<end])))
                    #expect(again.receivedBytes == UInt64(end))
                    offset = end
                    turn += 1
                }
                let done = try await b.call(1, API.finishUpload, MediaV1.FinishUploadRequest(uploadId: start.uploadId))
                let item = try #require(done.item)
                #expect(done.locationRemoved)
                let fromA = try await a.download(item.mediaId, as: 2, chunk: 60_000)
                #expect(fromA == (try await b.download(item.mediaId, as: 2)))
                #expect(SHA256.hexDigest(fromA) == item.sha256 && !Fixture.contains(fromA, Fixture.gpsLatitude))
                #expect(try await a.stored() == StoredContents(references: [item.sha256: 1], byteCopies: 1, uploadsHoldingBytes: 0))
                // Bytes stored as received keep their chunks: reads that cross chunk boundaries.
                let clean = Fixture.jpeg(gps: false, filler: 200_000)
                let stored = try #require(try await b.upload(clean, as: 1).item)
                #expect(try await a.download(stored.mediaId, as: 2, chunk: 50_000) == clean)
                #expect(try await b.download(stored.mediaId, as: 2, chunk: 65_536) == clean)
            }
        }

        /// A finish sent to both instances at once (a client's retry that went to the other one
        /// while the first was still working): one photo, and both answers name it.
        @Test func oneUploadFinishedOnBothAtOnce_storesOnePhoto() async throws {
            try await withTwoInstances { a, b in
                for round in 0..<5 {
                    let photo = Fixture.jpeg(gps: false, filler: 120_000 + round)
                    let start = try await a.call(1, API.startUpload, MediaV1.StartUploadRequest(purpose: .venue, placeId: 7, sizeBytes: UInt64(photo.count)))
                    try await a.sendChunks(photo, upload: start.uploadId, as: 1, chunk: 65_536)
                    async let first = a.call(1, API.finishUpload, MediaV1.FinishUploadRequest(uploadId: start.uploadId))
                    async let second = b.call(1, API.finishUpload, MediaV1.FinishUploadRequest(uploadId: start.uploadId))
                    let (x, y) = try await (first, second)
                    #expect(x.item?.mediaId == y.item?.mediaId, "round \(round): both answers name one photo")
                }
                let mine = try await a.call(1, API.listPhotos, MediaV1.ListPhotosRequest(mine: true))
                #expect(mine.items.count == 5, "\(mine.items.map(\.mediaId))")
                #expect(try await a.stored().references.values.allSatisfy { $0 == 1 })
            }
        }

        /// Two profile pictures of one person finished on two instances at once: one is the
        /// picture, the other was replaced and deleted; nothing is left over to count against
        /// the quota.
        @Test func twoProfilePicturesAtOnce_leaveOne_andNoOrphan() async throws {
            try await withTwoInstances { a, b in
                for round in 0..<5 {
                    let one = Fixture.jpeg(gps: false, filler: 50_000 + 2 * round)
                    let two = Fixture.jpeg(gps: false, filler: 50_001 + 2 * round)
                    async let x = a.upload(one, as: 3, purpose: .profile)
                    async let y = b.upload(two, as: 3, purpose: .profile)
                    _ = try await (x, y)
                    let mine = try await a.call(3, API.listPhotos, MediaV1.ListPhotosRequest(mine: true))
                    #expect(mine.items.count == 1, "round \(round): \(mine.items.map(\.mediaId))")
                    let current = try await b.call(3, API.listPhotos, MediaV1.ListPhotosRequest(profileOf: 3))
                    #expect(current.items.map(\.mediaId) == mine.items.map(\.mediaId))
                    let usage = try await a.call(3, API.getUsage, MediaV1.GetUsageRequest())
                    #expect(usage.usedBytes == mine.items.first?.sizeBytes)
                }
            }
        }

        /// Both instances' maintenance passes at once: each expired item is dropped once, and the
        /// kept one stays.
        @Test func bothMaintenancePassesAtOnce_dropEachExpiredPhotoOnce() async throws {
            let clock = Atomic<Int64>(1_000_000_000)
            try await withTwoInstances(now: { clock.load(ordering: .relaxed) }) { a, b in
                var orphans: [String] = []
                for i in 0..<6 {
                    orphans.append(try #require(try await (i % 2 == 0 ? a : b).upload(Fixture.jpeg(gps: false, filler: 10_000 + i), as: 1,
                                                                                        purpose: .checkIn).item).mediaId)
                }
                let kept = try #require(try await a.upload(Fixture.webp(), as: 1, purpose: .checkIn).item)
                _ = try await b.call(1, API.attachCheckInPhoto, MediaV1.AttachCheckInPhotoRequest(userId: 1, mediaId: kept.mediaId))
                clock.store(1_000_000_000 + 25 * 3_600_000, ordering: .relaxed)
                async let first: Void = a.service.maintain()
                async let second: Void = b.service.maintain()
                _ = await (first, second)
                for id in orphans { await expectError(.notFound) { _ = try await a.download(id, as: 1) } }
                #expect(try await b.download(kept.mediaId, as: 1) == Fixture.webp())
                #expect(try await a.stored() == StoredContents(references: [kept.sha256: 1], byteCopies: 1, uploadsHoldingBytes: 0))
                #expect(!a.logs.contains("media maintenance failed") && !b.logs.contains("media maintenance failed"),
                        "\(a.logs.dump())\n\(b.logs.dump())")
            }
        }
    }
}

/// A second instance's view of the same store, whose `receivedBytes` first lets `meanwhile` run
/// (once): another instance's request landing between this one's reads.
private final class InterleavingMediaStore: MediaStorage, @unchecked Sendable {
    let base: any MediaStorage
    private let meanwhile = Mutex<(@Sendable () async throws -> Void)?>(nil)

    init(_ base: any MediaStorage, meanwhile: @escaping @Sendable () async throws -> Void) {
        self.base = base
        self.meanwhile.withLock { $0 = meanwhile }
    }

    var replies: any ReplyStore { base.replies }
    func item(_ id: String) async throws -> MediaRecord? { try await base.item(id) }
    func upload(_ id: String) async throws -> UploadRecord? { try await base.upload(id) }
    func profilePicture(of user: UInt64) async throws -> MediaRecord? { try await base.profilePicture(of: user) }
    func checkInPhoto(of user: UInt64) async throws -> MediaRecord? { try await base.checkInPhoto(of: user) }
    func list(_ selection: PhotoSelection, after cursor: (Int64, String)?, limit: Int) async throws -> [MediaRecord] {
        try await base.list(selection, after: cursor, limit: limit)
    }
    func usage(of owner: UInt64, now: Int64) async throws -> MediaUsage { try await base.usage(of: owner, now: now) }
    func photoBytes(_ item: MediaRecord, offset: Int, count: Int) async throws -> [UInt8]? {
        try await base.photoBytes(item, offset: offset, count: count)
    }
    func startUpload(_ upload: UploadRecord, quotaBytes: Int64, uploadsPerHour: Int) async throws {
        try await base.startUpload(upload, quotaBytes: quotaBytes, uploadsPerHour: uploadsPerHour)
    }
    func receiveChunk(_ upload: UploadRecord, offset: UInt64, data: [UInt8]) async throws -> ChunkOutcome {
        try await base.receiveChunk(upload, offset: offset, data: data)
    }
    func receivedBytes(_ upload: UploadRecord) async throws -> [UInt8] {
        if let first = meanwhile.withLock({ m in defer { m = nil }; return m }) { try await first() }
        return try await base.receivedBytes(upload)
    }
    func finish(upload: UploadRecord, item: MediaRecord, bytes: [UInt8], unchanged: Bool, locationRemoved: Bool) async throws -> FinishedUpload? {
        try await base.finish(upload: upload, item: item, bytes: bytes, unchanged: unchanged, locationRemoved: locationRemoved)
    }
    func abandon(_ upload: String) async throws { try await base.abandon(upload) }
    func delete(_ id: String, owner: UInt64) async throws -> Bool? { try await base.delete(id, owner: owner) }
    func attachCheckInPhoto(user: UInt64, id: String) async throws -> AttachOutcome { try await base.attachCheckInPhoto(user: user, id: id) }
    func expire(now: Int64, unattachedFor: Int64) async throws -> (uploads: Int, photos: Int) {
        try await base.expire(now: now, unattachedFor: unattachedFor)
    }
    func erase(_ user: UInt64, traces: [String]) async throws -> Int { try await base.erase(user, traces: traces) }
    func scrubErased() async throws { try await base.scrubErased() }
    func contents() async throws -> StoredContents { try await base.contents() }
}

extension MediaTestGroup {
    @Suite("media: a finish racing another instance's") struct FinishRaceTests {
        /// The interleaving `oneUploadFinishedOnBothAtOnce_storesOnePhoto` hits now and then, made
        /// certain: instance B reads the upload (not finished), instance A finishes it, and only
        /// then does B read the received bytes, which A's finish moved into the photo. B's answer
        /// is A's photo, as for any retry; it was FAILED_PRECONDITION ("received 0 of … bytes").
        @Test(arguments: Engine.allCases) func aFinishThatFindsTheUploadFinishedMeanwhile_answersWithThatPhoto(engine: Engine) async throws {
            try await withMedia(engine: engine) { a in
                let photo = Fixture.jpeg(gps: false, filler: 120_000)
                let start = try await a.call(1, API.startUpload, MediaV1.StartUploadRequest(purpose: .venue, placeId: 7, sizeBytes: UInt64(photo.count)))
                try await a.sendChunks(photo, upload: start.uploadId, as: 1, chunk: 65_536)
                let finishedByA = Mutex<MediaV1.FinishUploadResponse?>(nil)
                let store = InterleavingMediaStore(a.service.store) {
                    let reply = try await a.call(1, API.finishUpload, MediaV1.FinishUploadRequest(uploadId: start.uploadId))
                    finishedByA.withLock { $0 = reply }
                }
                let b = MediaService(store: store, peers: a.peers, config: testMediaConfig(), logger: a.logs.logger("media-b"), now: nil)
                let bClient = RouterClient(b, name: "media", logger: a.logs.logger("media-b-host"))
                let fromB = try await bClient.call(API.finishUpload, MediaV1.FinishUploadRequest(uploadId: start.uploadId),
                                                   options: CallOptions(callerUserID: 1))
                let fromA = try #require(finishedByA.withLock { $0 }, "A finished in between")
                #expect(fromB.item?.mediaId == fromA.item?.mediaId && fromA.item != nil, "both answers name the one photo")
                let mine = try await a.call(1, API.listPhotos, MediaV1.ListPhotosRequest(mine: true))
                #expect(mine.items.map(\.mediaId) == [fromA.item?.mediaId ?? ""])
                #expect(try await a.download(fromA.item?.mediaId ?? "", as: 1) == photo)
                await bClient.flush()
            }
        }
    }
}
