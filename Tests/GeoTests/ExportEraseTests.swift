@testable import Geo
import Foundation
import FriensoProto
import FriensoTesting
import GRDB
import Testing
import Wire

extension GeoTestGroup {
    @Suite("geo: export my data, erase a deleted account", .timeLimit(.minutes(2)))
    struct ExportEraseTests {
        @Test("the export holds settings, latest fix, check-in, live grants and the whole history, in pages", arguments: Engine.allCases)
        func export(engine: Engine) async throws {
            try await withGeo(engine: engine) { geo async throws in
                let lats = [33.78, 33.781, 33.782, 33.783, 33.784]
                for (i, lat) in lats.enumerated() { _ = try await geo.locate(1, lat, -118.11, status: i == 4 ? "home soon" : nil); geo.clock.advance(1_000) }
                _ = try await geo.call(1, API.checkIn, GeoV1.CheckInRequest(placeName: "Library"))
                try await geo.service.apply(GeoV1.LocationGrant(subjectId: 1, viewerId: 2, expiresAtMs: geo.clock.now + 60_000, reason: "watch"))
                try await geo.service.apply(GeoV1.LocationGrant(subjectId: 3, viewerId: 1, expiresAtMs: geo.clock.now + 60_000, reason: "help_now"))
                _ = try await geo.locate(2, 34.0, -118.0) // someone else's history is not in it
                var page = try await geo.call(1, API.exportMyData, GeoV1.ExportMyDataRequest(limit: 2))
                #expect(page.latest?.latitude == 33.784 && page.status == "home soon" && page.checkIn?.placeName == "Library")
                #expect(Set(page.grants.map { "\($0.subjectId)→\($0.viewerId) \($0.reason)" }) == ["1→2 watch", "3→1 help_now"])
                var history = page.history
                while page.more, let last = page.history.last {
                    page = try await geo.call(1, API.exportMyData, GeoV1.ExportMyDataRequest(afterHistoryId: last.id, limit: 2))
                    history += page.history
                }
                #expect(history.map(\.fix?.latitude) == lats)
                #expect(history.last?.hasStatus == true && history.last?.status == "home soon" && history.first?.hasStatus == false)
                await expectError(.invalidArgument) { _ = try await geo.call(1, API.exportMyData, GeoV1.ExportMyDataRequest(limit: 10_001)) }
            }
        }

        @Test("EraseUser forgets the person in memory and on disk: no fix, no history, no grant either way", arguments: Engine.allCases)
        func erase(engine: Engine) async throws {
            try await withGeo(engine: engine) { geo async throws in
                geo.befriend(1, 2)
                _ = try await geo.locate(1, 33.78, -118.11)
                _ = try await geo.locate(2, 33.781, -118.11)
                try await geo.service.apply(GeoV1.LocationGrant(subjectId: 1, viewerId: 2, expiresAtMs: geo.clock.now + 60_000, reason: "watch"))
                #expect(try await geo.call(2, API.friendsLocations, GeoV1.FriendsLocationsRequest()).friends.count == 1)
                // A zone, permission and a place alert that has fired: all gone with the person.
                let zone = try #require(try await geo.call(1, API.setZone, GeoV1.SetZoneRequest(zone: GeoV1.Zone(
                    label: "Home", latitude: 33.70, longitude: -118.11, radiusM: 100, privacy: .off))).zone)
                _ = try await geo.call(1, API.allowPlaceAlerts, GeoV1.AllowPlaceAlertsRequest(userId: 2, allowed: true))
                _ = try await geo.call(2, API.createPlaceAlert, GeoV1.CreatePlaceAlertRequest(subjectId: 1, zoneId: zone.zoneId, onArrive: true))
                geo.clock.advance(1_000)
                _ = try await geo.locate(1, 33.70, -118.11)
                #expect(try await geo.call(0, API.listPlaceEvents, GeoV1.ListPlaceEventsRequest()).events.count == 1)
                let erased = try await geo.call(0, API.eraseUser, GeoV1.EraseUserRequest(userId: 1))
                #expect(erased.erased > 0)
                #expect(try await geo.call(2, API.friendsLocations, GeoV1.FriendsLocationsRequest()).friends.isEmpty)
                let mine = try await geo.call(1, API.exportMyData, GeoV1.ExportMyDataRequest())
                #expect(mine.latest == nil && mine.history.isEmpty && mine.grants.isEmpty)
                #expect(mine.zones.isEmpty && mine.placeAlerts.isEmpty && mine.placeAlertsAllowed.isEmpty)
                #expect(try await geo.call(2, API.listPlaceAlerts, GeoV1.ListPlaceAlertsRequest()).mine.isEmpty)
                #expect(try await geo.call(0, API.listPlaceEvents, GeoV1.ListPlaceEventsRequest()).events.isEmpty)
                var rows: [Double] = []
                for table in ["zones", "place_alerts", "place_alert_access", "place_events"] { rows.append(try await geo.number("SELECT count(*) FROM \(table)")) }
                #expect(rows == [0, 0, 0, 0])
                #expect(try await geo.call(0, API.eraseUser, GeoV1.EraseUserRequest(userId: 1)).erased == 0, "again: nothing more")
                await expectError(.invalidArgument) { _ = try await geo.call(0, API.eraseUser, GeoV1.EraseUserRequest(userId: 0)) }
            }
        }
    }
}
