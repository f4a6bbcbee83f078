@testable import Geo
import Foundation
import FriensoProto
import FriensoTesting
import Testing
import Wire

extension GeoTestGroup {
    @Suite("geo: precision per friend", .timeLimit(.minutes(2)))
    struct PrecisionTests {
        func importSample(_ geo: GeoHarness) async throws {
            let data = try Array(Data(contentsOf: PlacesTests.sample))
            _ = try await geo.call(0, API.importPlaces, GeoV1.ImportPlacesRequest(operatorKey: "op-secret", format: "geojson", data: data))
        }

        func seen(_ geo: GeoHarness, by viewer: UInt64, _ subject: UInt64) async throws -> GeoV1.FriendLocation? {
            try await geo.call(viewer, API.friendsLocations, GeoV1.FriendsLocationsRequest()).friends.first { $0.userId == subject }
        }

        func set(_ geo: GeoHarness, _ subject: UInt64, for viewer: UInt64, _ p: GeoV1.LocationPrecision) async throws {
            _ = try await geo.call(subject, API.setPrecision, GeoV1.SetPrecisionRequest(userId: viewer, precision: p))
        }

        @Test("approximate is the same ~1 km cell each time; place is the place only; hidden is nothing; navigate and nearby follow", arguments: Engine.allCases)
        func levels(engine: Engine) async throws {
            try await withGeo(engine: engine, operatorKey: "op-secret") { geo async throws in
                try await importSample(geo)
                for friend: UInt64 in [2, 3, 4] { geo.befriend(1, friend) }
                geo.findable(1, 2)
                _ = try await geo.locate(2, 33.7775, -118.1145)
                _ = try await geo.locate(1, 33.7810, -118.1130) // in the Student Union
                try await set(geo, 1, for: 2, .approximate)
                try await set(geo, 1, for: 3, .place)
                try await set(geo, 1, for: 4, .hidden)

                let exact = try #require(try await seen(geo, by: 2, 1))
                #expect(exact.precision == .approximate && exact.around.isEmpty)
                #expect((exact.fix?.accuracyM ?? 0) >= 1_000 && exact.fix?.latitude != 33.7810)
                // Moving within the cell: the same point, so repeated reads cannot be averaged.
                geo.clock.advance(1_000)
                _ = try await geo.locate(1, 33.7832, -118.1161)
                let again = try #require(try await seen(geo, by: 2, 1))
                #expect(again.fix?.latitude == exact.fix?.latitude && again.fix?.longitude == exact.fix?.longitude)
                #expect(abs((again.fix?.latitude ?? 0) - 33.7832) < 0.01 && abs((again.fix?.longitude ?? 0) + 118.1161) < 0.015)
                _ = try await geo.locate(1, 33.7810, -118.1130)

                let place = try #require(try await seen(geo, by: 3, 1))
                #expect(place.fix == nil && place.around == "Around Student Union" && place.precision == .place && place.distanceM == 0)
                #expect(try await seen(geo, by: 4, 1) == nil, "hidden")

                // Navigate: to the cell for approximate; not at all for place or hidden.
                let toCell = try await geo.call(2, API.navigate, GeoV1.NavigateRequest(userId: 1))
                #expect(toCell.theirFix?.latitude == exact.fix?.latitude)
                _ = try await geo.locate(3, 33.7775, -118.1145)
                _ = try await geo.locate(4, 33.7775, -118.1145)
                for viewer: UInt64 in [3, 4] {
                    await expectError(.notFound) { _ = try await geo.call(viewer, API.navigate, GeoV1.NavigateRequest(userId: 1)) }
                }
                // Nearby (both findable, 2 is a friend shown approximately): no distance to 1.
                let near = try await geo.call(2, API.nearby, GeoV1.NearbyRequest(radiusM: 5_000))
                #expect(!near.users.contains { $0.userId == 1 })

                // The default for the other friends, a setting of their own wins, UNSPECIFIED removes it.
                try await set(geo, 1, for: 0, .place)
                try await set(geo, 1, for: 3, .unspecified)
                #expect(try await seen(geo, by: 3, 1)?.precision == .place)
                let listed = try await geo.call(1, API.getPrecision, GeoV1.GetPrecisionRequest())
                #expect(listed.defaultPrecision == .place && listed.settings.map(\.userId) == [2, 4])
                await expectError(.failedPrecondition) { try await set(geo, 1, for: 99, .exact) }
                await expectError(.invalidArgument) { try await set(geo, 1, for: 0, .unspecified) }
            }
        }

        @Test("live events follow the precision of each viewer; a grant (watch, helpNow) shows the circle the exact place", arguments: Engine.allCases)
        func eventsAndGrants(engine: Engine) async throws {
            try await withGeo(engine: engine, operatorKey: "op-secret") { geo async throws in
                try await importSample(geo)
                for friend: UInt64 in [2, 3, 4] { geo.befriend(1, friend) }
                try await set(geo, 1, for: 2, .approximate)
                try await set(geo, 1, for: 3, .place)
                try await set(geo, 1, for: 4, .hidden)
                _ = geo.recorder.take()
                _ = try await geo.locate(1, 33.7810, -118.1130)
                let events = self.events(geo)
                #expect(events.count == 2)
                let byViewer = Dictionary(uniqueKeysWithValues: events.map { ($0.topic, $0.event) })
                #expect(byViewer["viewer.2."]?.precision == .approximate && byViewer["viewer.2."]?.fix?.latitude != 33.7810)
                #expect(byViewer["viewer.3."]?.fix == nil && byViewer["viewer.3."]?.around == "Around Student Union")
                #expect(byViewer["viewer.4."] == nil, "hidden: no event")

                // helpNow's grant: friend 4 (hidden) and 2 (approximate) see 1 exactly while it lasts.
                for viewer: UInt64 in [2, 4] {
                    try await geo.service.apply(GeoV1.LocationGrant(subjectId: 1, viewerId: viewer, expiresAtMs: geo.clock.now + 60_000, reason: "help_now"))
                }
                for viewer: UInt64 in [2, 4] {
                    let shown = try #require(try await seen(geo, by: viewer, 1))
                    #expect(shown.precision == .exact && shown.fix?.latitude == 33.7810)
                }
            }
        }

        @Test("venues count a friend as a friend only where their precision places them there", arguments: Engine.allCases)
        func venues(engine: Engine) async throws {
            try await withGeo(engine: engine, operatorKey: "op-secret") { geo async throws in
                try await importSample(geo)
                for friend: UInt64 in [2, 3] { geo.befriend(1, friend) }
                try await set(geo, 2, for: 1, .approximate)
                try await set(geo, 3, for: 1, .place)
                for (u, d) in [(2, 0.0), (3, 0.00002), (5, 0.00004)] as [(UInt64, Double)] { _ = try await geo.locate(u, 33.7810 + d, -118.1130) }
                let union = try #require(try await geo.call(1, API.listVenues, GeoV1.ListVenuesRequest()).venues.first { $0.venue?.name == "Student Union" })
                #expect(union.people == 3 && union.friends == 1, "3 (place) counts; 2 (approximate) does not")
            }
        }

        /// The location events published so far (the writer publishes before it answers).
        func events(_ geo: GeoHarness) -> [(topic: String, event: GeoV1.LocationEvent)] {
            geo.recorder.all.filter { $0.method == "geo.Location" }.compactMap { e in
                (try? GeoV1.LocationEvent(serializedBytes: e.payload)).map { (e.topic, $0) }
            }
        }
    }
}
