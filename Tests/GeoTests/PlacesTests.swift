import Foundation
import FriensoProto
import FriensoTesting
@testable import Geo
import Testing
import Wire

extension GeoTestGroup {
    @Suite("geo: places, venues, check-ins", .timeLimit(.minutes(2)))
    struct PlacesTests {
        static let sample = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("deploy/data/campus.geojson")

        func importSample(_ geo: GeoHarness) async throws {
            let data = try Array(Data(contentsOf: Self.sample))
            let reply = try await geo.call(0, API.importPlaces, GeoV1.ImportPlacesRequest(operatorKey: "op-secret", format: "geojson", data: data))
            #expect(reply.imported == 6 && reply.problems.isEmpty, "\(reply.problems)")
        }

        @Test(arguments: Engine.allCases) func imports_needTheOperatorKey_andReportBadRows(engine: Engine) async throws {
            try await withGeo(engine: engine, operatorKey: "op-secret") { geo async throws in
                let csv = Array("name,kind,lat,lon,radius_m\nCafe,venue,33.78,-118.11,30\n,venue,1,1,1\nBad,castle,1,1,1\nFar,venue,95,0,10\n".utf8)
                await expectError(.permissionDenied) {
                    _ = try await geo.call(0, API.importPlaces, GeoV1.ImportPlacesRequest(operatorKey: "wrong", format: "csv", data: csv))
                }
                await expectError(.permissionDenied) {
                    _ = try await geo.call(0, API.importPlaces, GeoV1.ImportPlacesRequest(format: "csv", data: csv))
                }
                let reply = try await geo.call(0, API.importPlaces, GeoV1.ImportPlacesRequest(operatorKey: "op-secret", format: "csv", data: csv))
                #expect(reply.imported == 1)
                #expect(reply.problems.count == 3, "\(reply.problems)")
                for bad in [GeoV1.ImportPlacesRequest(operatorKey: "op-secret", format: "xml", data: csv),
                            GeoV1.ImportPlacesRequest(operatorKey: "op-secret", format: "geojson", data: Array("{}".utf8)),
                            GeoV1.ImportPlacesRequest(operatorKey: "op-secret", format: "csv", data: [])] {
                    await expectError(.invalidArgument) { _ = try await geo.call(0, API.importPlaces, bad) }
                }
            }
            try await withGeo(engine: engine) { geo async throws in // no key configured: imports are off
                await expectError(.permissionDenied, containing: "no operator key") {
                    _ = try await geo.call(0, API.importPlaces, GeoV1.ImportPlacesRequest(operatorKey: "", format: "csv", data: Array("x".utf8)))
                }
            }
        }

        /// alerts' question for a helpNow: the latest fix and the place it is at; with a point
        /// (the phone's own fix, sent with the raise), the place at that point instead.
        @Test(arguments: Engine.allCases) func latestLocation_namesThePlace_ofTheFix_orOfAGivenPoint(engine: Engine) async throws {
            try await withGeo(engine: engine, operatorKey: "op-secret") { geo async throws in
                try await importSample(geo)
                let union = (lat: 33.781, lon: -118.113)
                let unknown = try await geo.call(1, API.latestLocation, GeoV1.LatestLocationRequest(userId: 1, hasPoint: true, latitude: union.lat, longitude: union.lon))
                #expect(!unknown.found && unknown.placeName == "Student Union", "no fix stored: the point is still named")
                #expect(try await geo.locate(1, 33.7774, -118.1145))
                let stored = try await geo.call(1, API.latestLocation, GeoV1.LatestLocationRequest(userId: 1))
                #expect(stored.found && stored.placeName == "University Library")
                let pointed = try await geo.call(1, API.latestLocation, GeoV1.LatestLocationRequest(userId: 1, hasPoint: true, latitude: union.lat, longitude: union.lon))
                #expect(pointed.placeName == "Student Union" && pointed.fix?.latitude == 33.7774, "the point's place; the stored fix as it is")
                let nowhere = try await geo.call(1, API.latestLocation, GeoV1.LatestLocationRequest(userId: 1, hasPoint: true, latitude: 0, longitude: 0))
                #expect(nowhere.placeName == "")
                for (lat, lon) in [(91.0, 0.0), (0, -181), (.nan, 0)] {
                    await expectError(.invalidArgument, containing: "latitude") {
                        _ = try await geo.call(1, API.latestLocation, GeoV1.LatestLocationRequest(userId: 1, hasPoint: true, latitude: lat, longitude: lon))
                    }
                }
            }
        }

        /// alerts' copy of the places: every place a page at a time, with geo's "around"
        /// distance, and each import announced on the "places" stream.
        @Test(arguments: Engine.allCases) func placesSnapshot_pagesEveryPlace_andAnImportIsAnnounced(engine: Engine) async throws {
            try await withGeo(engine: engine, operatorKey: "op-secret") { geo async throws in
                #expect(try await geo.call(0, API.placesSnapshot, GeoV1.PlacesSnapshotRequest()).places.isEmpty)
                try await importSample(geo)
                #expect(geo.recorder.all.filter { $0.topic == GeoService.placesStream }.map(\.method) == ["geo.PlacesChanged"])
                var pages: [[GeoV1.Place]] = []
                var after: UInt64 = 0
                repeat {
                    let page = try await geo.call(0, API.placesSnapshot, GeoV1.PlacesSnapshotRequest(afterId: after, limit: 4))
                    #expect(page.withinM == 150)
                    pages.append(page.places)
                    after = page.nextAfterId
                } while after != 0 && pages.count < 5
                #expect(pages.map(\.count) == [4, 2])
                let all = pages.flatMap { $0 }
                #expect(all.map(\.placeId) == all.map(\.placeId).sorted() && Set(all.map(\.name)).count == 6)
                #expect(all.contains { $0.name == "University Library" && $0.polygonLat.count >= 4 }, "outlines come too")
                await expectError(.invalidArgument) { _ = try await geo.call(0, API.placesSnapshot, GeoV1.PlacesSnapshotRequest(limit: 5_001)) }
            }
        }

        @Test(arguments: Engine.allCases) func listPlaces_aroundAPoint_nearestFirst_withOutlines_forAMap(engine: Engine) async throws {
            try await withGeo(engine: engine, operatorKey: "op-secret") { geo async throws in
                try await importSample(geo)
                let library = (lat: 33.7774, lon: -118.1145)
                let all = try await geo.call(1, API.listPlaces, GeoV1.ListPlacesRequest(hasPoint: true, latitude: library.lat, longitude: library.lon))
                #expect(all.places.count == 6)
                #expect(all.places.first?.name == "University Library")
                #expect(all.places.contains { $0.kind == .campus && $0.polygonLat.count >= 4 }, "the campus outline, with its ring")
                let near = try await geo.call(1, API.listPlaces, GeoV1.ListPlacesRequest(hasPoint: true, latitude: library.lat, longitude: library.lon, radiusM: 50))
                // The library itself, and the campus outline the point is inside (its centroid is further).
                #expect(Set(near.places.map(\.kind)) == [.building, .campus] && near.places.count == 2, "\(near.places.map(\.name))")
                let one = try await geo.call(1, API.listPlaces, GeoV1.ListPlacesRequest(hasPoint: true, latitude: library.lat, longitude: library.lon, limit: 1))
                #expect(one.places.map(\.name) == ["University Library"])
                await expectError(.failedPrecondition) { _ = try await geo.call(1, API.listPlaces, GeoV1.ListPlacesRequest()) }
                await expectError(.invalidArgument) {
                    _ = try await geo.call(1, API.listPlaces, GeoV1.ListPlacesRequest(hasPoint: true, latitude: 1, longitude: 1, radiusM: 50_000))
                }
                try await geo.locate(1, library.lat, library.lon)
                #expect(try await geo.call(1, API.listPlaces, GeoV1.ListPlacesRequest()).places.first?.name == "University Library")
            }
        }

        @Test(arguments: Engine.allCases) func closestPlace_onCampus_andAroundLabel(engine: Engine) async throws {
            try await withGeo(engine: engine, operatorKey: "op-secret") { geo async throws in
                try await importSample(geo)
                let inLibrary = try await geo.call(1, API.closestPlace, GeoV1.ClosestPlaceRequest(hasPoint: true, latitude: 33.7774, longitude: -118.1145))
                #expect(inLibrary.place?.name == "University Library" && inLibrary.distanceM == 0 && inLibrary.onCampus)
                let offCampus = try await geo.call(1, API.closestPlace, GeoV1.ClosestPlaceRequest(hasPoint: true, latitude: 33.7746, longitude: -118.1204))
                #expect(offCampus.place?.name == "Harbor Coffee" && !offCampus.onCampus)
                let building = try await geo.call(1, API.closestPlace, GeoV1.ClosestPlaceRequest(
                    hasPoint: true, latitude: 33.7811, longitude: -118.1131, kind: .building))
                #expect(building.place?.kind == .building)
                await expectError(.failedPrecondition) { _ = try await geo.call(1, API.closestPlace, GeoV1.ClosestPlaceRequest()) }
                // A friend by the Student Union is "Around Student Union".
                geo.befriend(1, 2)
                try await geo.locate(2, 33.7811, -118.1131)
                let seen = try await geo.call(1, API.friendsLocations, GeoV1.FriendsLocationsRequest())
                #expect(seen.friends.first?.around == "Around Student Union")
            }
        }

        @Test(arguments: Engine.allCases) func venueAttendance_countsFreshFixesInside_andFriends(engine: Engine) async throws {
            try await withGeo(engine: engine, operatorKey: "op-secret") { geo async throws in
                try await importSample(geo)
                geo.befriend(1, 2)
                let fresh: [(UInt64, Double, Double)] = [
                    (2, 33.7810, -118.1130),    // in the Student Union, a friend
                    (3, 33.78105, -118.11305),  // in it too
                    (9, 33.78102, -118.11302),  // and a third
                    (4, 33.7790, -118.1094),    // inside the arena polygon
                    (5, 33.7830, -118.1130),    // 220 m away: not in the union
                ]
                try await geo.locate(6, 33.7810, -118.1130)  // in it, but its fix goes stale
                geo.clock.advance(16 * 60_000)
                for (u, lat, lon) in fresh { try await geo.locate(u, lat, lon) }
                let venues = try await geo.call(1, API.listVenues, GeoV1.ListVenuesRequest())
                let by = Dictionary(uniqueKeysWithValues: venues.venues.map { ($0.venue?.name ?? "", ($0.people, $0.friends, $0.few)) })
                #expect(by["Student Union"]! == (3, 1, false))
                #expect(by["Pyramid Arena"]! == (0, 0, true), "one person: the total is withheld")
                #expect(by["Harbor Coffee"]! == (0, 0, true))
                #expect(venues.minPeople == 3)
                #expect(venues.venues.first?.venue?.name == "Student Union", "busiest first")
            }
        }

        @Test("venue counts cannot single anyone out: ghosts are not counted, hidden friends are not friends, small totals are withheld", arguments: Engine.allCases)
        func venueAttendance_privacy(engine: Engine) async throws {
            try await withGeo(engine: engine, operatorKey: "op-secret") { geo async throws in
                try await importSample(geo)
                for friend: UInt64 in [2, 7, 8] { geo.befriend(1, friend) }
                _ = try await geo.call(7, API.updateSharing, GeoV1.UpdateSharingRequest(settings: GeoV1.SharingSettings(ghost: true), fields: ["ghost"]))
                _ = try await geo.call(8, API.updateSharing, GeoV1.UpdateSharingRequest(
                    settings: GeoV1.SharingSettings(shareWithFriends: false), fields: ["share_with_friends"]))
                // The ghost friend alone in the union: no "1 friend" there, no person either.
                try await geo.locate(7, 33.7810, -118.1130)
                var union = try #require(try await geo.call(1, API.listVenues, GeoV1.ListVenuesRequest()).venues.first { $0.venue?.name == "Student Union" })
                #expect(union.people == 0 && union.friends == 0 && union.few)
                // A friend who does not share, and two strangers: four people, not counting the ghost; no friend shown.
                try await geo.locate(8, 33.78101, -118.11301)
                try await geo.locate(3, 33.78102, -118.11302)
                try await geo.locate(4, 33.78103, -118.11303)
                union = try #require(try await geo.call(1, API.listVenues, GeoV1.ListVenuesRequest()).venues.first { $0.venue?.name == "Student Union" })
                #expect((union.people, union.friends, union.few) == (3, 0, false))
                // A friend who shares: counted as a friend, even while the total is withheld elsewhere.
                try await geo.locate(2, 33.7790, -118.1094)
                let arena = try #require(try await geo.call(1, API.listVenues, GeoV1.ListVenuesRequest()).venues.first { $0.venue?.name == "Pyramid Arena" })
                #expect((arena.people, arena.friends, arena.few) == (0, 1, true))
            }
        }

        @Test(arguments: Engine.allCases) func checkIns_replace_expire_andRespectVisibility(engine: Engine) async throws {
            try await withGeo(engine: engine) { geo async throws in
                geo.befriend(1, 2)
                geo.findable(3)
                for u in 1...4 as ClosedRange<UInt64> { try await geo.locate(u, 33.78 + Double(u) * 0.001, -118.11) }
                let first = try await geo.call(2, API.checkIn, GeoV1.CheckInRequest(placeName: "Library"))
                #expect(!first.replaced)
                geo.clock.advance(1_000)
                let second = try await geo.call(2, API.checkIn, GeoV1.CheckInRequest(placeName: "Student Union", mediaId: "m_abc123"))
                #expect(second.replaced)
                _ = try await geo.call(3, API.checkIn, GeoV1.CheckInRequest(placeName: "Arena"))   // a findable stranger
                _ = try await geo.call(4, API.checkIn, GeoV1.CheckInRequest(placeName: "Secret"))  // a stranger, not findable
                let nearby = try await geo.call(1, API.listCheckIns, GeoV1.ListCheckInsRequest())
                #expect(nearby.checkIns.map(\.placeName) == ["Student Union", "Arena"], "one per user, nearest first, visible only")
                let feed = try await geo.call(1, API.listCheckIns, GeoV1.ListCheckInsRequest(feed: true))
                #expect(feed.checkIns.map(\.userId) == [3, 2], "newest first")
                for bad in [GeoV1.CheckInRequest(placeName: ""), GeoV1.CheckInRequest(placeName: String(repeating: "x", count: 81)),
                            GeoV1.CheckInRequest(placeName: "x", mediaId: "../etc"), GeoV1.CheckInRequest(placeName: "x", hasPoint: true, latitude: 100)] {
                    await expectError(.invalidArgument) { _ = try await geo.call(1, API.checkIn, bad) }
                }
                geo.clock.advance(3 * 3_600_000)
                #expect(try await geo.call(1, API.listCheckIns, GeoV1.ListCheckInsRequest(feed: true)).checkIns.isEmpty, "expired")
            }
        }

        /// Check-in photos: media attaches the photo (and releases the replaced check-in's), and
        /// answers for media which check-in a viewer may see.
        @Test(arguments: Engine.allCases) func checkInPhotos_attachThroughMedia_andMediaAsksWhoMaySee(engine: Engine) async throws {
            try await withGeo(engine: engine) { geo async throws in
                geo.befriend(1, 2)
                for u in 1...3 as ClosedRange<UInt64> { try await geo.locate(u, 33.78, -118.11) }
                _ = try await geo.call(1, API.checkIn, GeoV1.CheckInRequest(placeName: "Library", mediaId: "photo1"))
                _ = try await geo.call(1, API.checkIn, GeoV1.CheckInRequest(placeName: "Union"))  // releases photo1
                _ = try await geo.call(1, API.checkIn, GeoV1.CheckInRequest(placeName: "Union"))  // nothing to release: no call
                _ = try await geo.call(1, API.checkIn, GeoV1.CheckInRequest(placeName: "Arena", mediaId: "photo2"))
                #expect(geo.photos.attached.withLock { $0.map(\.mediaID) } == ["photo1", "", "photo2"])
                await expectError(.notFound, containing: "of yours") {
                    _ = try await geo.call(1, API.checkIn, GeoV1.CheckInRequest(placeName: "Arena", mediaId: "bad1"))
                }
                geo.photos.down.store(true, ordering: .relaxed)
                await expectError(.unavailable) { _ = try await geo.call(1, API.checkIn, GeoV1.CheckInRequest(placeName: "Gym", mediaId: "photo3")) }
                // Without a photo the check-in goes ahead; media drops the old photo at the next attach.
                _ = try await geo.call(1, API.checkIn, GeoV1.CheckInRequest(placeName: "Gym"))
                // The friend may see user 1's check-in (and learns no photo is on it now); the stranger may not.
                let friend = try await geo.call(0, API.checkInAccess, GeoV1.CheckInAccessRequest(viewerId: 2, ownerId: 1))
                #expect(friend.visible && friend.mediaId.isEmpty)
                #expect(!(try await geo.call(0, API.checkInAccess, GeoV1.CheckInAccessRequest(viewerId: 3, ownerId: 1))).visible)
                #expect(!(try await geo.call(0, API.checkInAccess, GeoV1.CheckInAccessRequest(viewerId: 2, ownerId: 3))).visible, "no check-in")
                #expect(!(try await geo.call(0, API.getPlace, GeoV1.GetPlaceRequest(placeId: 12345))).found)
            }
        }

        /// A check-in retried after a restart under its key (its reply no longer in memory) is
        /// answered as it was, and never attaches its photo again over the check-in made since:
        /// check-ins run before the reply store is read (issue 16, item 54), so the handler reads
        /// it itself before it asks media for anything.
        @Test(arguments: Engine.allCases) func aCheckInRetriedAfterARestart_isAnsweredAsItWas_andAttachesNoPhotoAgain(engine: Engine) async throws {
            let storage = try await TestStorage.fresh(engine, service: "geo")
            let (graph, clock) = (StaticGraph(), TestClock())
            @Sendable func checkIn(_ geo: GeoHarness, _ place: String, photo: String, key: String) async throws -> GeoV1.CheckInResponse {
                try await geo.client.call(API.checkIn, GeoV1.CheckInRequest(placeName: place, mediaId: photo),
                                          options: CallOptions(idempotencyKey: key, callerUserID: 1))
            }
            let first = try await withGeo(storage: storage, graph: graph, clock: clock) { geo async throws in
                try await geo.locate(1, 33.78, -118.11)
                let first = try await checkIn(geo, "Library", photo: "photo1", key: "k1")
                _ = try await checkIn(geo, "Arena", photo: "photo2", key: "k2")
                #expect(geo.photos.attached.withLock { $0.map(\.mediaID) } == ["photo1", "photo2"])
                return first
            }
            try await withGeo(storage: storage, graph: graph, clock: clock) { geo async throws in
                let again = try await checkIn(geo, "Library", photo: "photo1", key: "k1")
                #expect(again == first, "the first run's reply, from the store")
                #expect(geo.photos.attached.withLock { $0.isEmpty }, "media was not asked again")
                let mine = try await geo.call(0, API.checkInAccess, GeoV1.CheckInAccessRequest(viewerId: 1, ownerId: 1))
                #expect(mine.mediaId == "photo2", "the check-in made since keeps its photo")
                // A new check-in under a new key goes ahead as usual.
                _ = try await checkIn(geo, "Gym", photo: "photo3", key: "k3")
                #expect(geo.photos.attached.withLock { $0.map(\.mediaID) } == ["photo3"])
            }
        }

        /// A crash between a check-in's commit and its reply leaves only the claim: the retry is
        /// answered by a dry run, which must not ask media to attach the first run's photo again
        /// (it would replace the photo of the check-in made since).
        @Test(arguments: Engine.allCases) func aCheckInWhoseReplyACrashLost_isAnsweredAppliedOnce_andAttachesNoPhotoAgain(engine: Engine) async throws {
            let storage = try await TestStorage.fresh(engine, service: "geo")
            let (graph, clock) = (StaticGraph(), TestClock())
            let options = { @Sendable (key: String) in CallOptions(idempotencyKey: key, callerUserID: 1) }
            try await withGeo(storage: storage, graph: graph, clock: clock) { geo async throws in
                try await geo.locate(1, 33.78, -118.11)
                _ = try await geo.client.callThenLoseTheReply(API.checkIn, GeoV1.CheckInRequest(placeName: "Library", mediaId: "photo1"),
                                                              options: options("k1"))
                _ = try await geo.client.call(API.checkIn, GeoV1.CheckInRequest(placeName: "Arena", mediaId: "photo2"), options: options("k2"))
                #expect(geo.photos.attached.withLock { $0.map(\.mediaID) } == ["photo1", "photo2"])
            }
            try await withGeo(storage: storage, graph: graph, clock: clock) { geo async throws in
                await expectError(.alreadyExists, containing: "applied once already") {
                    _ = try await geo.client.call(API.checkIn, GeoV1.CheckInRequest(placeName: "Library", mediaId: "photo1"), options: options("k1"))
                }
                #expect(geo.photos.attached.withLock { $0.isEmpty }, "media was not asked again")
                let mine = try await geo.call(0, API.checkInAccess, GeoV1.CheckInAccessRequest(viewerId: 1, ownerId: 1))
                #expect(mine.mediaId == "photo2", "the check-in made since keeps its photo")
                let listed = try await geo.call(1, API.listCheckIns, GeoV1.ListCheckInsRequest())
                #expect(listed.checkIns.map(\.placeName) == ["Arena"])
            }
        }
    }
}
