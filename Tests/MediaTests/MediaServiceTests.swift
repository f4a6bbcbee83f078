import Foundation
import FriensoProto
import FriensoTesting
@testable import Media
import Synchronization
import ServiceKit
import Identity
import Testing
import Wire

private typealias API = MediaV1.MediaService

extension MediaTestGroup {
    @Suite("media: uploads and storage", .timeLimit(.minutes(2))) struct UploadTests {
        @Test(arguments: Engine.allCases) func jpegWithGPS_isStoredWithoutIt_andTheReplySaysSo(engine: Engine) async throws {
            try await withMedia(engine: engine) { m in
                let photo = Fixture.jpeg(width: 800, height: 600, gps: true, filler: 150_000) // several chunks
                let reply = try await m.upload(photo, as: 1, purpose: .venue)
                #expect(reply.locationRemoved)
                let item = try #require(reply.item)
                #expect(item.type == .jpeg && item.mimeType == "image/jpeg")
                #expect(item.width == 800 && item.height == 600)
                #expect(item.ownerId == 1 && item.purpose == .venue && item.placeId == 7)
                let stored = try await m.download(item.mediaId, as: 1, chunk: 50_000)
                #expect(stored.count == Int(item.sizeBytes))
                #expect(!Fixture.contains(stored, Fixture.gpsLatitude) && !Fixture.contains(stored, Fixture.gpsLongitude))
                #expect(SHA256.hexDigest(stored) == item.sha256)
                let clean = try await m.upload(Fixture.png(), as: 1, purpose: .venue)
                #expect(!clean.locationRemoved)
            }
        }

        @Test(arguments: Engine.allCases) func textNamedJPG_isRefusedOnItsFirstChunk_andLeavesNothing(engine: Engine) async throws {
            try await withMedia(engine: engine) { m in
                let text = Array(String(repeating: "not a photo, just text pretending. ", count: 5_000).utf8) // 175 kB: several chunks
                let start = try await m.call(1, API.startUpload, MediaV1.StartUploadRequest(purpose: .venue, placeId: 7, sizeBytes: UInt64(text.count)))
                await expectError(.invalidArgument, containing: "not a JPEG, PNG, HEIC or WebP") {
                    _ = try await m.call(1, API.uploadChunk, MediaV1.UploadChunkRequest(uploadId: start.uploadId, offset: 0, data: Array(text.prefix(65_536))))
                }
                await expectError(.notFound) {
                    _ = try await m.call(1, API.uploadChunk, MediaV1.UploadChunkRequest(uploadId: start.uploadId, offset: 0, data: Array(text.prefix(100))))
                }
                let stored = try await m.stored()
                #expect(stored.uploadsHoldingBytes == 0 && stored.byteCopies == 0, "\(stored)")
            }
        }

        @Test(arguments: Engine.allCases) func truncatedImage_isRefusedAtFinish_emptyAndOversize_atStart(engine: Engine) async throws {
            var config = testMediaConfig()
            config.maxPhotoBytes = 100_000
            try await withMedia(engine: engine, config: config) { m in
                for (bytes, type) in [(Fixture.jpeg(), "JPEG"), (Fixture.png(), "PNG"), (Fixture.heic(), "HEIC")] {
                    let cut = Array(bytes.prefix(bytes.count - 3))
                    let start = try await m.call(1, API.startUpload, MediaV1.StartUploadRequest(purpose: .venue, placeId: 7, sizeBytes: UInt64(cut.count)))
                    try await m.sendChunks(cut, upload: start.uploadId, as: 1, chunk: 65_536)
                    await expectError(.invalidArgument, containing: "truncated \(type)") {
                        _ = try await m.call(1, API.finishUpload, MediaV1.FinishUploadRequest(uploadId: start.uploadId))
                    }
                }
                await expectError(.invalidArgument, containing: "empty") {
                    _ = try await m.call(1, API.startUpload, MediaV1.StartUploadRequest(purpose: .venue, placeId: 7, sizeBytes: 0))
                }
                await expectError(.invalidArgument, containing: "100000-byte limit") {
                    _ = try await m.call(1, API.startUpload, MediaV1.StartUploadRequest(purpose: .venue, placeId: 7, sizeBytes: 100_001))
                }
                // A chunk cannot take an upload past its declared size either.
                let start = try await m.call(1, API.startUpload, MediaV1.StartUploadRequest(purpose: .venue, placeId: 7, sizeBytes: 20))
                await expectError(.invalidArgument, containing: "past the declared size") {
                    _ = try await m.call(1, API.uploadChunk, MediaV1.UploadChunkRequest(uploadId: start.uploadId, offset: 0, data: Fixture.png()))
                }
                #expect(try await m.stored().byteCopies == 0)
                let mine = try await m.call(1, API.listPhotos, MediaV1.ListPhotosRequest(mine: true))
                #expect(mine.items.isEmpty)
            }
        }

        @Test(arguments: Engine.allCases) func badRequests_getStableErrors(engine: Engine) async throws {
            try await withMedia(engine: engine) { m in
                await expectError(.invalidArgument, containing: "purpose") {
                    _ = try await m.call(1, API.startUpload, MediaV1.StartUploadRequest(sizeBytes: 10))
                }
                await expectError(.invalidArgument, containing: "place_id") {
                    _ = try await m.call(1, API.startUpload, MediaV1.StartUploadRequest(purpose: .venue, sizeBytes: 10))
                }
                await expectError(.notFound, containing: "no place 99") {
                    _ = try await m.call(1, API.startUpload, MediaV1.StartUploadRequest(purpose: .venue, placeId: 99, sizeBytes: 10))
                }
                await expectError(.invalidArgument, containing: "only venue photos") {
                    _ = try await m.call(1, API.startUpload, MediaV1.StartUploadRequest(purpose: .profile, placeId: 7, sizeBytes: 10))
                }
                await expectError(.notFound) { _ = try await m.call(1, API.finishUpload, MediaV1.FinishUploadRequest(uploadId: "../../etc/passwd")) }
                await expectError(.notFound) { _ = try await m.call(1, API.getPhoto, MediaV1.GetPhotoRequest(mediaId: "nope")) }
                await expectError(.invalidArgument, containing: "name one of") {
                    _ = try await m.call(1, API.listPhotos, MediaV1.ListPhotosRequest(placeId: 7, mine: true))
                }
                await expectError(.unauthenticated) { _ = try await m.call(0, API.getUsage, MediaV1.GetUsageRequest()) }
                // Someone else's upload is not there for you.
                let start = try await m.call(1, API.startUpload, MediaV1.StartUploadRequest(purpose: .venue, placeId: 7, sizeBytes: 100))
                await expectError(.notFound) {
                    _ = try await m.call(2, API.uploadChunk, MediaV1.UploadChunkRequest(uploadId: start.uploadId, offset: 0, data: Fixture.png()))
                }
                // Out of order.
                await expectError(.failedPrecondition, containing: "in order") {
                    _ = try await m.call(1, API.uploadChunk, MediaV1.UploadChunkRequest(uploadId: start.uploadId, offset: 50, data: [1, 2, 3]))
                }
                await expectError(.failedPrecondition, containing: "received 0 of 100") {
                    _ = try await m.call(1, API.finishUpload, MediaV1.FinishUploadRequest(uploadId: start.uploadId))
                }
            }
        }

        @Test(arguments: Engine.allCases) func identicalBytes_areStoredOnce_andReleasedWithTheLastReference(engine: Engine) async throws {
            try await withMedia(engine: engine) { m in
                let photo = Fixture.jpeg(gps: false, filler: 30_000)
                let a = try #require(try await m.upload(photo, as: 1).item)
                let second = try await m.upload(photo, as: 2)
                let b = try #require(second.item)
                #expect(second.deduplicated && a.sha256 == b.sha256 && a.mediaId != b.mediaId)
                #expect(try await m.blobRefs() == [a.sha256: 2])
                #expect(try await m.stored().byteCopies == 1)
                let first = try await m.call(1, API.deletePhoto, MediaV1.DeletePhotoRequest(mediaId: a.mediaId))
                #expect(!first.bytesReleased)
                #expect(try await m.download(b.mediaId, as: 2) == photo, "the other holder still reads it")
                let last = try await m.call(2, API.deletePhoto, MediaV1.DeletePhotoRequest(mediaId: b.mediaId))
                #expect(last.bytesReleased)
                #expect(try await m.stored() == StoredContents(references: [:], byteCopies: 0, uploadsHoldingBytes: 0))
            }
        }

        @Test(arguments: Engine.allCases) func concurrentUploadsOfTheSameBytes_allSucceed_oneCopyStored(engine: Engine) async throws {
            try await withMedia(engine: engine) { m in
                let photo = Fixture.jpeg(gps: true, filler: 100_000)
                let items = try await withThrowingTaskGroup(of: MediaV1.MediaItem.self) { group in
                    for user in UInt64(1)...8 { group.addTask { try #require(try await m.upload(photo, as: user).item) } }
                    return try await group.reduce(into: []) { $0.append($1) }
                }
                #expect(Set(items.map(\.mediaId)).count == 8)
                #expect(Set(items.map(\.sha256)).count == 1)
                #expect(try await m.blobRefs() == [items[0].sha256: 8])
                let stored = try await m.stored()
                #expect(stored.byteCopies == 1 && stored.uploadsHoldingBytes == 0, "\(stored)")
            }
        }

        @Test(arguments: Engine.allCases) func retries_areIdempotent_chunkAndFinish(engine: Engine) async throws {
            try await withMedia(engine: engine) { m in
                let photo = Fixture.png()
                let start = try await m.call(1, API.startUpload, MediaV1.StartUploadRequest(purpose: .venue, placeId: 7, sizeBytes: UInt64(photo.count)), key: "s1")
                let again = try await m.call(1, API.startUpload, MediaV1.StartUploadRequest(purpose: .venue, placeId: 7, sizeBytes: UInt64(photo.count)), key: "s1")
                #expect(again.uploadId == start.uploadId)
                let half = photo.count / 2
                _ = try await m.call(1, API.uploadChunk, MediaV1.UploadChunkRequest(uploadId: start.uploadId, offset: 0, data: Array(photo[..<half])))
                let resent = try await m.call(1, API.uploadChunk, MediaV1.UploadChunkRequest(uploadId: start.uploadId, offset: 0, data: Array(photo[..<half])))
                #expect(resent.receivedBytes == UInt64(half), "a resent chunk is not written twice")
                _ = try await m.call(1, API.uploadChunk, MediaV1.UploadChunkRequest(uploadId: start.uploadId, offset: UInt64(half), data: Array(photo[half...])))
                let first = try await m.call(1, API.finishUpload, MediaV1.FinishUploadRequest(uploadId: start.uploadId))
                let second = try await m.call(1, API.finishUpload, MediaV1.FinishUploadRequest(uploadId: start.uploadId))
                #expect(first.item?.mediaId == second.item?.mediaId)
                #expect(try await m.download(try #require(first.item).mediaId, as: 1) == photo)
                #expect(try await m.call(1, API.listPhotos, MediaV1.ListPhotosRequest(mine: true)).items.count == 1)
            }
        }

        @Test(arguments: Engine.allCases) func quotas_storageAndUploadRate_areResourceExhausted(engine: Engine) async throws {
            var config = testMediaConfig()
            config.quotaBytes = 10_000
            config.uploadsPerHour = 3
            try await withMedia(engine: engine, config: config) { m in
                _ = try await m.upload(Fixture.jpeg(gps: false, filler: 6_000), as: 1)
                await expectError(.resourceExhausted, containing: "storage quota") {
                    _ = try await m.call(1, API.startUpload, MediaV1.StartUploadRequest(purpose: .venue, placeId: 7, sizeBytes: 5_000))
                }
                let usage = try await m.call(1, API.getUsage, MediaV1.GetUsageRequest())
                #expect(usage.usedBytes > 6_000 && usage.quotaBytes == 10_000 && usage.uploadsLastHour == 1)
                // Another user is not affected by user 1's storage; the rate counts starts.
                for _ in 0..<3 { _ = try await m.call(2, API.startUpload, MediaV1.StartUploadRequest(purpose: .venue, placeId: 7, sizeBytes: 10)) }
                await expectError(.resourceExhausted, containing: "3 uploads an hour") {
                    _ = try await m.call(2, API.startUpload, MediaV1.StartUploadRequest(purpose: .venue, placeId: 7, sizeBytes: 10))
                }
            }
        }

        /// A restart mid-upload: nothing is visible, and the upload resumes where it stopped. On
        /// SQLite, what a crash inside finish could leave (the synced temp file, and a blob renamed
        /// into place whose row never committed) is swept at start; on PostgreSQL a finish is one
        /// transaction, bytes included, so it leaves nothing to sweep.
        @Test(arguments: Engine.allCases) func crashMidUpload_leavesNothingVisible_andStrayFilesAreSwept(engine: Engine) async throws {
            let storage = try await TestStorage.fresh(engine, service: "media")
            let photo = Fixture.jpeg(gps: false, filler: 200_000)
            let upload = try await withMedia(storage: storage) { m in
                let start = try await m.call(1, API.startUpload, MediaV1.StartUploadRequest(purpose: .venue, placeId: 7, sizeBytes: UInt64(photo.count)))
                try await m.sendChunks(Array(photo.prefix(100_000)), upload: start.uploadId, as: 1, chunk: 65_536)
                return start.uploadId
            }
            if engine == .sqlite {
                let dir = storage.directory
                try Data(photo).write(to: URL(fileURLWithPath: "\(dir)/uploads/\(upload).part.final"))
                try FileManager.default.createDirectory(atPath: "\(dir)/blobs/ab", withIntermediateDirectories: true)
                try Data(photo).write(to: URL(fileURLWithPath: "\(dir)/blobs/ab/ab\(String(repeating: "0", count: 62))"))
            }
            try await withMedia(storage: storage) { m in
                let stored = try await m.stored()
                #expect(stored.byteCopies == 0, "\(stored)")
                #expect(stored.uploadsHoldingBytes == 1, "the live upload's bytes are kept so it can resume")
                #expect(try await m.call(1, API.listPhotos, MediaV1.ListPhotosRequest(placeId: 7)).items.isEmpty)
                // It resumes where it stopped.
                try await m.sendChunks(photo, upload: upload, as: 1, chunk: 65_536, from: 100_000)
                let done = try await m.call(1, API.finishUpload, MediaV1.FinishUploadRequest(uploadId: upload))
                #expect(try await m.download(try #require(done.item).mediaId, as: 1) == photo)
            }
            await storage.remove()
        }

        @Test(arguments: Engine.allCases) func photos_surviveARestart(engine: Engine) async throws {
            let storage = try await TestStorage.fresh(engine, service: "media")
            let photo = Fixture.heic()
            let id = try await withMedia(storage: storage) { m in try #require(try await m.upload(photo, as: 1, purpose: .profile).item).mediaId }
            try await withMedia(storage: storage) { m in
                let scrubbed = try await m.download(id, as: 1)
                #expect(scrubbed.count == photo.count && !Fixture.contains(scrubbed, Fixture.gpsLatitude))
                let profile = try await m.call(1, API.listPhotos, MediaV1.ListPhotosRequest(profileOf: 1))
                #expect(profile.items.map(\.mediaId) == [id] && profile.items.first?.type == .heic && profile.items.first?.width == 4032)
            }
            await storage.remove()
        }

        @Test(arguments: Engine.allCases) func expiredUploads_andNeverAttachedCheckInPhotos_areDropped(engine: Engine) async throws {
            let clock = Atomic<Int64>(1_000_000_000)
            try await withMedia(engine: engine, now: { clock.load(ordering: .relaxed) }) { m in
                let orphan = try #require(try await m.upload(Fixture.png(), as: 1, purpose: .checkIn).item)
                let kept = try #require(try await m.upload(Fixture.webp(), as: 1, purpose: .checkIn).item)
                _ = try await m.call(1, API.attachCheckInPhoto, MediaV1.AttachCheckInPhotoRequest(userId: 1, mediaId: kept.mediaId))
                let start = try await m.call(1, API.startUpload, MediaV1.StartUploadRequest(purpose: .venue, placeId: 7, sizeBytes: 1_000))
                try await m.sendChunks(Array(Fixture.jpeg(filler: 2_000).prefix(500)), upload: start.uploadId, as: 1, chunk: 65_536)
                clock.store(1_000_000_000 + 25 * 3_600_000, ordering: .relaxed)
                await m.service.maintain()
                #expect(try await m.stored().uploadsHoldingBytes == 0)
                await expectError(.notFound) { _ = try await m.download(orphan.mediaId, as: 1) }
                #expect(try await m.download(kept.mediaId, as: 1) == Fixture.webp())
                #expect(try await m.blobRefs().count == 1)
            }
        }
    }

    @Suite("media: who sees what", .timeLimit(.minutes(2))) struct AccessTests {
        @Test(arguments: Engine.allCases) func profilePicture_friendsAndOwner_notStrangersOrBlocked(engine: Engine) async throws {
            try await withMedia(engine: engine) { m in
                m.peers.befriend(1, 2)
                m.peers.befriend(1, 4)
                m.peers.block(1, 4)
                let pic = try #require(try await m.upload(Fixture.png(), as: 1, purpose: .profile).item)
                #expect(try await m.download(pic.mediaId, as: 1) == Fixture.png())
                #expect(try await m.download(pic.mediaId, as: 2) == Fixture.png())
                for outsider: UInt64 in [3, 4] {
                    await expectError(.notFound, containing: "that you may see") { _ = try await m.download(pic.mediaId, as: outsider) }
                    #expect(try await m.call(outsider, API.listPhotos, MediaV1.ListPhotosRequest(profileOf: 1)).items.isEmpty)
                }
                #expect(try await m.call(2, API.listPhotos, MediaV1.ListPhotosRequest(profileOf: 1)).items.map(\.mediaId) == [pic.mediaId])
            }
        }

        @Test(arguments: Engine.allCases) func newProfilePicture_releasesTheOldOne(engine: Engine) async throws {
            try await withMedia(engine: engine) { m in
                let old = try #require(try await m.upload(Fixture.png(), as: 1, purpose: .profile).item)
                let reply = try await m.upload(Fixture.webp(), as: 1, purpose: .profile)
                #expect(reply.replacedMediaId == old.mediaId)
                await expectError(.notFound) { _ = try await m.download(old.mediaId, as: 1) }
                let stored = try await m.stored()
                #expect(stored.references.count == 1 && stored.byteCopies == 1, "\(stored)")
                #expect(try await m.call(1, API.listPhotos, MediaV1.ListPhotosRequest(profileOf: 1)).items.first?.mediaId == reply.item?.mediaId)
            }
        }

        @Test(arguments: Engine.allCases) func checkInPhoto_readableByWhoMaySeeTheCheckIn_only(engine: Engine) async throws {
            try await withMedia(engine: engine) { m in
                let photo = try #require(try await m.upload(Fixture.jpeg(), as: 1, purpose: .checkIn).item)
                // Uploaded, not yet attached: the owner's alone.
                await expectError(.notFound) { _ = try await m.download(photo.mediaId, as: 2) }
                _ = try await m.call(1, API.attachCheckInPhoto, MediaV1.AttachCheckInPhotoRequest(userId: 1, mediaId: photo.mediaId))
                m.peers.state.withLock { $0.checkIns[1] = (viewers: [2], mediaID: photo.mediaId) }
                #expect(try await m.download(photo.mediaId, as: 2).count == Int(photo.sizeBytes))
                #expect(try await m.call(2, API.listPhotos, MediaV1.ListPhotosRequest(checkInOf: 1)).items.map(\.mediaId) == [photo.mediaId])
                await expectError(.notFound) { _ = try await m.download(photo.mediaId, as: 3) }
                #expect(try await m.call(3, API.listPhotos, MediaV1.ListPhotosRequest(checkInOf: 1)).items.isEmpty)
                // Geo down: the owner still reads it, others get UNAVAILABLE rather than a wrong answer.
                m.peers.state.withLock { $0.geoDown = true }
                #expect(try await m.download(photo.mediaId, as: 1).count == Int(photo.sizeBytes))
                await expectError(.unavailable) { _ = try await m.download(photo.mediaId, as: 2) }
            }
        }

        @Test(arguments: Engine.allCases) func attachingANewCheckInPhoto_releasesTheOld_andOnlyYourOwnCheckInUploadsAttach(engine: Engine) async throws {
            try await withMedia(engine: engine) { m in
                let first = try #require(try await m.upload(Fixture.png(), as: 1, purpose: .checkIn).item)
                let second = try #require(try await m.upload(Fixture.webp(), as: 1, purpose: .checkIn).item)
                let venue = try #require(try await m.upload(Fixture.jpeg(), as: 1, purpose: .venue).item)
                let theirs = try #require(try await m.upload(Fixture.heic(), as: 2, purpose: .checkIn).item)
                _ = try await m.call(1, API.attachCheckInPhoto, MediaV1.AttachCheckInPhotoRequest(userId: 1, mediaId: first.mediaId))
                let replaced = try await m.call(1, API.attachCheckInPhoto, MediaV1.AttachCheckInPhotoRequest(userId: 1, mediaId: second.mediaId))
                #expect(replaced.releasedMediaId == first.mediaId)
                await expectError(.notFound) { _ = try await m.download(first.mediaId, as: 1) }
                await expectError(.invalidArgument, containing: "not uploaded as a check-in photo") {
                    _ = try await m.call(1, API.attachCheckInPhoto, MediaV1.AttachCheckInPhotoRequest(userId: 1, mediaId: venue.mediaId))
                }
                await expectError(.notFound) {
                    _ = try await m.call(1, API.attachCheckInPhoto, MediaV1.AttachCheckInPhotoRequest(userId: 1, mediaId: theirs.mediaId))
                }
                // A check-in without a photo releases the last one.
                let cleared = try await m.call(1, API.attachCheckInPhoto, MediaV1.AttachCheckInPhotoRequest(userId: 1, mediaId: ""))
                #expect(cleared.releasedMediaId == second.mediaId)
                #expect(try await m.call(1, API.listPhotos, MediaV1.ListPhotosRequest(checkInOf: 1)).items.isEmpty)
            }
        }

        @Test(arguments: Engine.allCases) func venuePhotos_anySignedInUser_newestFirst_paginated_minusBlocked(engine: Engine) async throws {
            let clock = Atomic<Int64>(1_000)
            try await withMedia(engine: engine, now: { clock.add(1, ordering: .relaxed).newValue }) { m in
                var ids: [String] = []
                for i in 0..<5 {
                    ids.append(try #require(try await m.upload(Fixture.jpeg(gps: false, seed: UInt8(i + 1)), as: 1).item).mediaId)
                }
                let blockedOne = try #require(try await m.upload(Fixture.png(), as: 4).item).mediaId
                m.peers.block(3, 4)
                var seen: [String] = []
                var token = ""
                repeat {
                    let page = try await m.call(3, API.listPhotos, MediaV1.ListPhotosRequest(placeId: 7, limit: 2, pageToken: token))
                    #expect(page.items.count <= 2)
                    seen += page.items.map(\.mediaId)
                    token = page.nextPageToken
                } while !token.isEmpty
                #expect(seen == ids.reversed(), "newest first, every photo once, the blocked user's left out")
                #expect(try await m.download(ids[0], as: 3).count > 0)
                await expectError(.notFound) { _ = try await m.download(blockedOne, as: 3) }
                let all = try await m.call(2, API.listPhotos, MediaV1.ListPhotosRequest(placeId: 7))
                #expect(all.items.first?.mediaId == blockedOne && all.items.count == 6)
                await expectError(.invalidArgument, containing: "page_token") {
                    _ = try await m.call(3, API.listPhotos, MediaV1.ListPhotosRequest(placeId: 7, pageToken: "garbage"))
                }
            }
        }

        /// Every page size over photos by a visible and a blocked uploader, interleaved: each
        /// visible photo exactly once, newest first, however the blocked ones fall on pages.
        @Test(arguments: Engine.allCases) func pagination_withBlockedPhotosAnywhere_losesNothing(engine: Engine) async throws {
            let clock = Atomic<Int64>(1_000)
            try await withMedia(engine: engine, now: { clock.add(1, ordering: .relaxed).newValue }) { m in
                m.peers.state.withLock { $0.places = [7, 8] }
                // Oldest first. Place 8 is the case that lost a photo at 3 a page: the page fills
                // part-way through the last batch of the listing.
                let patterns: [UInt64: [UInt64]] = [8: [1, 1, 1, 4, 4, 1], 7: [1, 4, 4, 1, 1, 4, 1, 1, 4, 4, 4, 1]]
                var visible: [UInt64: [String]] = [:]
                for (place, owners) in patterns {
                    for (i, owner) in owners.enumerated() {
                        let id = try #require(try await m.upload(Fixture.jpeg(gps: false, seed: UInt8(i + 1)), as: owner, place: place).item).mediaId
                        if owner == 1 { visible[place, default: []].insert(id, at: 0) }
                    }
                }
                m.peers.block(3, 4)
                for place in patterns.keys {
                    for limit in UInt32(1)...7 {
                        var seen: [String] = []
                        var token = ""
                        repeat {
                            let page = try await m.call(3, API.listPhotos, MediaV1.ListPhotosRequest(placeId: place, limit: limit, pageToken: token))
                            #expect(page.items.count <= Int(limit))
                            seen += page.items.map(\.mediaId)
                            token = page.nextPageToken
                        } while !token.isEmpty
                        #expect(seen == visible[place], "place \(place), limit \(limit)")
                    }
                }
            }
        }

        @Test(arguments: Engine.allCases) func onlyTheOwnerDeletes(engine: Engine) async throws {
            try await withMedia(engine: engine) { m in
                let photo = try #require(try await m.upload(Fixture.png(), as: 1).item)
                await expectError(.notFound, containing: "of yours") { _ = try await m.call(2, API.deletePhoto, MediaV1.DeletePhotoRequest(mediaId: photo.mediaId)) }
                #expect(try await m.download(photo.mediaId, as: 2) == Fixture.png())
                #expect(try await m.call(1, API.deletePhoto, MediaV1.DeletePhotoRequest(mediaId: photo.mediaId)).bytesReleased)
                await expectError(.notFound) { _ = try await m.download(photo.mediaId, as: 1) }
                await expectError(.notFound) { _ = try await m.call(1, API.deletePhoto, MediaV1.DeletePhotoRequest(mediaId: photo.mediaId)) }
            }
        }
    }
}
