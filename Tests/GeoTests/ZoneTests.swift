@testable import Geo
import Foundation
import FriensoProto
import FriensoTesting
import GRDB
import Testing
import Wire

/// Alice (1) lives at `home`; her friends are 2, 3 and 4.
private let home = (lat: 33.7700, lon: -118.1000)

extension GeoTestGroup {
    @Suite("geo: privacy zones", .timeLimit(.minutes(2)))
    struct ZoneTests {
        func zone(_ geo: GeoHarness, _ user: UInt64, _ label: String = "Home", radius: Double = 150, privacy: GeoV1.ZonePrivacy = .unspecified,
                  keepHistory: Bool = false, at p: (lat: Double, lon: Double) = home) async throws -> GeoV1.Zone {
            try #require(try await geo.call(user, API.setZone, GeoV1.SetZoneRequest(zone: GeoV1.Zone(
                label: label, latitude: p.lat, longitude: p.lon, radiusM: radius, privacy: privacy, keepHistory: keepHistory))).zone)
        }

        func seen(_ geo: GeoHarness, by viewer: UInt64, _ subject: UInt64) async throws -> GeoV1.FriendLocation? {
            try await geo.call(viewer, API.friendsLocations, GeoV1.FriendsLocationsRequest()).friends.first { $0.userId == subject }
        }

        @Test("inside a LABEL zone friends read its label, never coordinates, live and on request; outside they see her again", arguments: Engine.allCases)
        func labelZone(engine: Engine) async throws {
            try await withGeo(engine: engine, operatorKey: "op-secret") { geo async throws in
                for friend: UInt64 in [2, 3] { geo.befriend(1, friend) }
                geo.findable(1, 2)
                let made = try await zone(geo, 1)
                #expect(made.privacy == .label && made.zoneId != 0 && !made.inside)
                _ = try await geo.locate(2, home.lat + 0.003, home.lon) // ~330 m away
                _ = geo.recorder.take()
                _ = try await geo.locate(1, home.lat + 0.0005, home.lon) // ~55 m from the centre: inside

                let shown = try #require(try await seen(geo, by: 2, 1))
                #expect(shown.fix == nil && shown.around == "Home" && shown.precision == .place && shown.distanceM == 0)
                let live = geo.recorder.all.filter { $0.method == "geo.Location" }.compactMap { try? GeoV1.LocationEvent(serializedBytes: $0.payload) }
                #expect(live.count == 2 && live.allSatisfy { $0.fix == nil && $0.around == "Home" })
                // No distance leaks: navigate, nearby and proximity all stop.
                await expectError(.notFound) { _ = try await geo.call(2, API.navigate, GeoV1.NavigateRequest(userId: 1)) }
                #expect(try await geo.call(2, API.nearby, GeoV1.NearbyRequest(radiusM: 5_000)).users.isEmpty)
                // She sees herself, and her zone says she is inside.
                #expect(try await geo.call(1, API.friendsLocations, GeoV1.FriendsLocationsRequest()).you?.latitude == home.lat + 0.0005)
                #expect(try await geo.call(1, API.listZones, GeoV1.ListZonesRequest()).zones.first?.inside == true)

                // A fix just outside the circle but whose accuracy reaches into it still counts as inside.
                _ = try await geo.call(1, API.updateLocation, GeoV1.UpdateLocationRequest(
                    latitude: home.lat + 0.0016, longitude: home.lon, accuracyM: 60, deviceTimeMs: geo.clock.now)) // ~178 m, ±60
                #expect(try await seen(geo, by: 2, 1)?.fix == nil)

                _ = try await geo.locate(1, home.lat + 0.01, home.lon) // 1.1 km away: out
                let out = try #require(try await seen(geo, by: 2, 1))
                #expect(out.precision == .exact && out.fix?.latitude == home.lat + 0.01)
            }
        }

        @Test("inside a HIDDEN zone friends see nothing; her own helpNow still shows her exactly; share links show the label only", arguments: Engine.allCases)
        func hiddenZoneAndGrants(engine: Engine) async throws {
            try await withGeo(engine: engine) { geo async throws in
                geo.befriend(1, 2)
                _ = try await zone(geo, 1, "Parents'", privacy: .hidden)
                _ = try await zone(geo, 1, "Gym", at: (home.lat + 0.02, home.lon))
                _ = try await geo.locate(1, home.lat + 0.01, home.lon, status: "on my way")
                _ = geo.recorder.take()
                _ = try await geo.locate(1, home.lat, home.lon)
                #expect(try await seen(geo, by: 2, 1) == nil)
                // Friend 2 saw her until now: told once that she is out of sight (no fix, no status), then nothing.
                let gone = geo.recorder.take().filter { $0.method == "geo.Location" }.compactMap { e in
                    (try? GeoV1.LocationEvent(serializedBytes: e.payload)).map { (e.topic, $0) }
                }
                #expect(gone.count == 1 && gone.first?.0 == "viewer.2." && gone.first?.1.precision == .hidden)
                #expect(gone.first?.1.fix == nil && gone.first?.1.status == "" && gone.first?.1.around == "")
                geo.clock.advance(1_000)
                _ = try await geo.locate(1, home.lat + 0.0001, home.lon)
                #expect(geo.recorder.take().filter { $0.method == "geo.Location" }.isEmpty, "inside: nothing more")
                let link = try #require(try await geo.call(1, API.createShareLink, GeoV1.CreateShareLinkRequest(minutes: 30)).link)
                let hidden = try await geo.call(0, API.viewShareLink, GeoV1.ViewShareLinkRequest(token: link.token))
                #expect(hidden.fix == nil && hidden.around.isEmpty)

                _ = try await geo.locate(1, home.lat + 0.02, home.lon)
                let gym = try await geo.call(0, API.viewShareLink, GeoV1.ViewShareLinkRequest(token: link.token))
                #expect(gym.fix == nil && gym.around == "Gym")

                try await geo.service.apply(GeoV1.LocationGrant(subjectId: 1, viewerId: 2, expiresAtMs: geo.clock.now + 60_000, reason: "help_now"))
                let exact = try #require(try await seen(geo, by: 2, 1))
                #expect(exact.precision == .exact && exact.fix?.latitude == home.lat + 0.02)
            }
        }

        @Test("venues do not count a friend inside their zone as a friend there; a check-in inside a zone shows no coordinates", arguments: Engine.allCases)
        func venuesAndCheckIns(engine: Engine) async throws {
            try await withGeo(engine: engine, operatorKey: "op-secret") { geo async throws in
                let data = try Array(Data(contentsOf: PlacesTests.sample))
                _ = try await geo.call(0, API.importPlaces, GeoV1.ImportPlacesRequest(operatorKey: "op-secret", format: "geojson", data: data))
                geo.befriend(1, 2)
                let union = (lat: 33.7810, lon: -118.1130) // the Student Union (a venue)
                _ = try await zone(geo, 2, "Work", radius: 100, at: union)
                for (u, d) in [(2, 0.0), (3, 0.00002), (5, 0.00004)] as [(UInt64, Double)] { _ = try await geo.locate(u, union.lat + d, union.lon) }
                let venue = try #require(try await geo.call(1, API.listVenues, GeoV1.ListVenuesRequest()).venues.first { $0.venue?.name == "Student Union" })
                #expect(venue.people == 3 && venue.friends == 0)

                _ = try await geo.call(2, API.checkIn, GeoV1.CheckInRequest(placeName: "Desk"))
                _ = try await geo.locate(1, union.lat + 0.001, union.lon)
                let checkIn = try #require(try await geo.call(1, API.listCheckIns, GeoV1.ListCheckInsRequest()).checkIns.first { $0.userId == 2 })
                #expect(checkIn.latitude == 0 && checkIn.longitude == 0 && checkIn.placeName == "Desk")
                let own = try #require(try await geo.call(2, API.listCheckIns, GeoV1.ListCheckInsRequest()).checkIns.first { $0.userId == 2 })
                #expect(own.latitude != 0)
            }
        }

        @Test("history inside a zone is gone once folded (kept with keep_history); the latest fix stays durable", arguments: Engine.allCases)
        func historyInsideAZone(engine: Engine) async throws {
            let storage = try await TestStorage.fresh(engine, service: "geo")
            let clock = TestClock()
            try await withGeo(storage: storage, clock: clock) { geo async throws in
                _ = try await zone(geo, 1)
                _ = try await zone(geo, 1, "Library", keepHistory: true, at: (home.lat + 0.05, home.lon))
                for (i, lat) in [home.lat + 0.01, home.lat, home.lat + 0.0001, home.lat + 0.05].enumerated() {
                    clock.advance(1_000)
                    _ = try await geo.locate(1, lat, home.lon + Double(i) * 0.00001)
                }
                _ = try await geo.locate(1, home.lat + 0.0002, home.lon) // the last: inside Home
            }
            // A restart folds everything: the rows inside Home are deleted; the latest fix (inside) is kept.
            try await withGeo(storage: storage, clock: clock) { geo async throws in
                let history = try await geo.call(1, API.exportMyData, GeoV1.ExportMyDataRequest()).history
                #expect(history.map { $0.fix?.latitude } == [home.lat + 0.01, home.lat + 0.05], "outside, and inside the Library (kept)")
                let rows = try await geo.rows("SELECT lat FROM history WHERE user_id = 1").map { Double($0[0])! }
                #expect(rows.sorted() == [home.lat + 0.01, home.lat + 0.05])
                #expect(try await geo.call(1, API.latestLocation, GeoV1.LatestLocationRequest(userId: 1)).fix?.latitude == home.lat + 0.0002)
                #expect(try await geo.call(1, API.exportMyData, GeoV1.ExportMyDataRequest()).zones.map(\.label) == ["Home", "Library"])
            }
            await storage.remove()
        }

        @Test("zones: bad input has stable codes; at most 20; only the owner edits or deletes", arguments: Engine.allCases)
        func zoneInput(engine: Engine) async throws {
            try await withGeo(engine: engine) { geo async throws in
                let bad: [GeoV1.Zone] = [
                    GeoV1.Zone(label: "", latitude: 1, longitude: 1, radiusM: 100),
                    GeoV1.Zone(label: String(repeating: "x", count: 41), latitude: 1, longitude: 1, radiusM: 100),
                    GeoV1.Zone(label: "a\u{7}b", latitude: 1, longitude: 1, radiusM: 100),
                    GeoV1.Zone(label: "Home", latitude: 91, longitude: 1, radiusM: 100),
                    GeoV1.Zone(label: "Home", latitude: .nan, longitude: 1, radiusM: 100),
                    GeoV1.Zone(label: "Home", latitude: 1, longitude: 1, radiusM: 10),
                    GeoV1.Zone(label: "Home", latitude: 1, longitude: 1, radiusM: .infinity),
                    GeoV1.Zone(label: "Home", latitude: 1, longitude: 1, radiusM: 100, privacy: GeoV1.ZonePrivacy(rawValue: 9)),
                ]
                for z in bad { await expectError(.invalidArgument) { _ = try await geo.call(1, API.setZone, GeoV1.SetZoneRequest(zone: z)) } }
                await expectError(.invalidArgument) { _ = try await geo.call(1, API.setZone, GeoV1.SetZoneRequest()) }
                let mine = try await zone(geo, 1)
                var edited = mine
                edited.label = "Flat"
                await expectError(.notFound) { _ = try await geo.call(2, API.setZone, GeoV1.SetZoneRequest(zone: edited)) }
                #expect(try await geo.call(1, API.setZone, GeoV1.SetZoneRequest(zone: edited)).zone?.label == "Flat")
                #expect(try await geo.call(2, API.deleteZone, GeoV1.DeleteZoneRequest(zoneId: mine.zoneId)).deleted == false)
                for i in 1..<ZoneRecord.maxPerUser { _ = try await zone(geo, 1, "Z\(i)") }
                await expectError(.resourceExhausted) { _ = try await zone(geo, 1, "one too many") }
                #expect(try await geo.call(1, API.deleteZone, GeoV1.DeleteZoneRequest(zoneId: mine.zoneId)).deleted)
                #expect(try await geo.call(1, API.listZones, GeoV1.ListZonesRequest()).zones.count == ZoneRecord.maxPerUser - 1)
            }
        }

        @Test("the zone rules (pure): the accuracy circle counts; HIDDEN beats LABEL; OFF is not private")
        func zoneBook() {
            let book = ZoneBook([
                ZoneRecord(id: 1, user: 7, label: "Home", lat: 10, lon: 10, radius: 100, privacy: .label, keepHistory: false),
                ZoneRecord(id: 2, user: 7, label: "Secret", lat: 10, lon: 10, radius: 50, privacy: .hidden, keepHistory: true),
                ZoneRecord(id: 3, user: 7, label: "Shop", lat: 11, lon: 11, radius: 100, privacy: .off, keepHistory: false),
            ])
            let metre = 1 / GeoMath.metresPerDegree
            #expect(book.privateZone(of: 7, lat: 10, lon: 10, accuracy: 0)?.id == 2)
            #expect(book.privateZone(of: 7, lat: 10 + 80 * metre, lon: 10, accuracy: 0)?.id == 1)
            #expect(book.privateZone(of: 7, lat: 10 + 130 * metre, lon: 10, accuracy: 0) == nil)
            #expect(book.privateZone(of: 7, lat: 10 + 130 * metre, lon: 10, accuracy: 40)?.id == 1)
            #expect(book.privateZone(of: 7, lat: 11, lon: 11, accuracy: 0) == nil, "OFF")
            #expect(book.privateZone(of: 8, lat: 10, lon: 10, accuracy: 0) == nil)
            let inside = LocationUpdate(user: 7, lat: 10, lon: 10, accuracy: 0, deviceMs: 1, receivedMs: 1)
            let shop = LocationUpdate(user: 7, lat: 11, lon: 11, accuracy: 0, deviceMs: 1, receivedMs: 1)
            #expect(book.unrecorded(inside) && !book.unrecorded(shop))

            // The hiding circle is shifted and grown by as much: the whole zone stays covered, and its
            // rim is centred elsewhere than home.
            let shifted = ZoneRecord(id: 4, user: 9, label: "Home", lat: 10, lon: 10, radius: 100, privacy: .label, keepHistory: false, shift: (50, 0))
            #expect(shifted.hidingRadius == 150 && abs(shifted.hidingCentre.lat - (10 + 50 * metre)) < 1e-12)
            for angle in stride(from: 0.0, to: 2 * .pi, by: .pi / 8) {
                #expect(shifted.covers(lat: 10 + 99 * metre * cos(angle), lon: 10 + 99 * metre * sin(angle) / cos(10 * .pi / 180), accuracy: 0))
            }
            #expect(shifted.covers(lat: 10 + 190 * metre, lon: 10, accuracy: 0) && !shifted.covers(lat: 10 - 110 * metre, lon: 10, accuracy: 0))
            for _ in 0..<100 {
                let s = ZoneRecord.randomShift(radius: 200)
                #expect((s.north * s.north + s.east * s.east).squareRoot() <= 100.000_001)
            }
        }

        @Test("a zone's hiding circle keeps its shift through edits of its label, and draws a new one when it moves", arguments: Engine.allCases)
        func shiftKept(engine: Engine) async throws {
            try await withGeo(engine: engine) { geo async throws in
                var made = try await zone(geo, 1, radius: 400)
                let first = try #require(geo.service.state.mutex.withLock { $0.zones.zone(made.zoneId, of: 1) }).shift
                made.label = "Flat"
                _ = try await geo.call(1, API.setZone, GeoV1.SetZoneRequest(zone: made))
                #expect(try #require(geo.service.state.mutex.withLock { $0.zones.zone(made.zoneId, of: 1) }).shift == first)
                var moved = [first]
                for i in 1...3 {
                    made.latitude += 0.001 * Double(i)
                    _ = try await geo.call(1, API.setZone, GeoV1.SetZoneRequest(zone: made))
                    moved.append(try #require(geo.service.state.mutex.withLock { $0.zones.zone(made.zoneId, of: 1) }).shift)
                }
                #expect(Set(moved.map { "\($0.north),\($0.east)" }).count > 1, "moved: shifts drawn again")
            }
        }
    }
}
