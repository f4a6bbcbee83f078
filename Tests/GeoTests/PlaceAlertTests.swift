@testable import Geo
import Foundation
import FriensoProto
import FriensoTesting
import GRDB
import Testing
import Wire

private let home = (lat: 33.7700, lon: -118.1000)
private let metre = 1 / GeoMath.metresPerDegree

extension GeoTestGroup {
    @Suite("geo: place alerts", .timeLimit(.minutes(2)))
    struct PlaceAlertTests {
        /// Alice (1) has a Home zone (radius 100 m) and allows Bob (2); Carol (3) is a friend she does not allow.
        func setUp(_ geo: GeoHarness) async throws -> UInt64 {
            for friend: UInt64 in [2, 3] { geo.befriend(1, friend) }
            let zone = try #require(try await geo.call(1, API.setZone, GeoV1.SetZoneRequest(zone: GeoV1.Zone(
                label: "Home", latitude: home.lat, longitude: home.lon, radiusM: 100, privacy: .label))).zone)
            #expect(try await geo.call(1, API.allowPlaceAlerts, GeoV1.AllowPlaceAlertsRequest(userId: 2, allowed: true)).allowed == [2])
            return zone.zoneId
        }

        func told(_ geo: GeoHarness) -> [(topic: String, event: GeoV1.PlaceAlertEvent)] {
            geo.recorder.take().filter { $0.method == "geo.PlaceAlert" }.compactMap { e in
                (try? GeoV1.PlaceAlertEvent(serializedBytes: e.payload)).map { (e.topic, $0) }
            }
        }

        /// Alice at `metres` north of home's centre.
        func move(_ geo: GeoHarness, _ metres: Double, accuracy: Double = 5) async throws {
            geo.clock.advance(1_000)
            _ = try await geo.call(1, API.updateLocation, GeoV1.UpdateLocationRequest(
                latitude: home.lat + metres * metre, longitude: home.lon, accuracyM: accuracy, deviceTimeMs: geo.clock.now))
        }

        @Test("arriving and leaving are told once each, with hysteresis; coarse fixes change nothing; each is in her audit and stored for push", arguments: Engine.allCases)
        func arriveAndLeave(engine: Engine) async throws {
            try await withGeo(engine: engine) { geo async throws in
                let zone = try await setUp(geo)
                try await move(geo, 1_000)
                let targets = try await geo.call(2, API.listPlaceAlertTargets, GeoV1.ListPlaceAlertTargetsRequest(subjectId: 1))
                #expect(targets.zones.map(\.label) == ["Home"] && targets.zones.first?.zoneId == zone)
                let alert = try #require(try await geo.call(2, API.createPlaceAlert, GeoV1.CreatePlaceAlertRequest(
                    subjectId: 1, zoneId: zone, onArrive: true, onLeave: true)).alert)
                #expect(alert.label == "Home" && alert.viewerId == 2 && alert.subjectId == 1)
                _ = geo.recorder.take()

                try await move(geo, 60)                      // inside
                let arrived = told(geo)
                #expect(arrived.count == 1 && arrived.first?.topic == "viewer.2." && arrived.first?.event.arrived == true)
                #expect(arrived.first?.event.label == "Home" && arrived.first?.event.alertId == alert.alertId)
                try await move(geo, 20)                      // still inside: nothing
                try await move(geo, 125)                     // 25 m beyond the edge, within the 30 m margin: not left
                try await move(geo, 5_000, accuracy: 400)    // a coarse fix: nothing
                #expect(told(geo).isEmpty)
                try await move(geo, 200)                     // 100 m beyond: left
                let left = told(geo)
                #expect(left.count == 1 && left.first?.event.arrived == false)
                try await move(geo, 250)
                #expect(told(geo).isEmpty, "told once")

                // Stored for alerts (push), with the viewer; and counted in her audit.
                let stored = try await geo.call(0, API.listPlaceEvents, GeoV1.ListPlaceEventsRequest())
                #expect(stored.events.map(\.arrived) == [true, false] && stored.viewers == [2, 2])
                #expect(try await geo.call(0, API.listPlaceEvents, GeoV1.ListPlaceEventsRequest(afterId: stored.events[0].eventId)).events.count == 1)
                try await geo.service.flushAudit()
                let audit = try await geo.call(1, API.listAudit, GeoV1.ListAuditRequest()).entries
                #expect(audit.contains { $0.viewerId == 2 && $0.kind == .placeAlert && $0.count == 2 })
            }
        }

        @Test("campus places too; only allowed friends; disallowing deletes their alerts; either side may delete one", arguments: Engine.allCases)
        func permissions(engine: Engine) async throws {
            try await withGeo(engine: engine, operatorKey: "op-secret") { geo async throws in
                let data = try Array(Data(contentsOf: PlacesTests.sample))
                _ = try await geo.call(0, API.importPlaces, GeoV1.ImportPlacesRequest(operatorKey: "op-secret", format: "geojson", data: data))
                let places = try await geo.call(1, API.listPlaces, GeoV1.ListPlacesRequest(hasPoint: true, latitude: 33.7810, longitude: -118.1130))
                let union = try #require(places.places.first { $0.name == "Student Union" })
                let zone = try await setUp(geo)
                _ = try await geo.locate(1, home.lat, home.lon)

                await expectError(.permissionDenied) { _ = try await geo.call(3, API.listPlaceAlertTargets, GeoV1.ListPlaceAlertTargetsRequest(subjectId: 1)) }
                await expectError(.permissionDenied) {
                    _ = try await geo.call(3, API.createPlaceAlert, GeoV1.CreatePlaceAlertRequest(subjectId: 1, zoneId: zone, onArrive: true))
                }
                await expectError(.failedPrecondition) { _ = try await geo.call(1, API.allowPlaceAlerts, GeoV1.AllowPlaceAlertsRequest(userId: 9, allowed: true)) }
                for bad in [GeoV1.CreatePlaceAlertRequest(subjectId: 1, zoneId: zone, placeId: union.placeId, onArrive: true),
                            GeoV1.CreatePlaceAlertRequest(subjectId: 1, onArrive: true),
                            GeoV1.CreatePlaceAlertRequest(subjectId: 1, zoneId: zone),
                            GeoV1.CreatePlaceAlertRequest(subjectId: 2, zoneId: zone, onArrive: true)] {
                    await expectError(.invalidArgument) { _ = try await geo.call(2, API.createPlaceAlert, bad) }
                }
                await expectError(.notFound) {
                    _ = try await geo.call(2, API.createPlaceAlert, GeoV1.CreatePlaceAlertRequest(subjectId: 1, placeId: 9_999, onArrive: true))
                }

                let onUnion = try #require(try await geo.call(2, API.createPlaceAlert, GeoV1.CreatePlaceAlertRequest(
                    subjectId: 1, placeId: union.placeId, onArrive: true)).alert)
                #expect(onUnion.label == "Student Union")
                _ = geo.recorder.take()
                _ = try await geo.locate(1, 33.7810, -118.1130)
                #expect(told(geo).map(\.event.label) == ["Student Union"])

                // Both see the alert; Alice deletes it, then she stops Bob altogether.
                _ = try await geo.call(2, API.createPlaceAlert, GeoV1.CreatePlaceAlertRequest(subjectId: 1, zoneId: zone, onLeave: true))
                let hers = try await geo.call(1, API.listPlaceAlerts, GeoV1.ListPlaceAlertsRequest())
                #expect(hers.aboutMe.count == 2 && hers.mine.isEmpty && hers.allowed == [2])
                #expect(try await geo.call(2, API.listPlaceAlerts, GeoV1.ListPlaceAlertsRequest()).mine.count == 2)
                #expect(try await geo.call(3, API.deletePlaceAlert, GeoV1.DeletePlaceAlertRequest(alertId: onUnion.alertId)).deleted == false)
                #expect(try await geo.call(1, API.deletePlaceAlert, GeoV1.DeletePlaceAlertRequest(alertId: onUnion.alertId)).deleted)
                #expect(try await geo.call(1, API.allowPlaceAlerts, GeoV1.AllowPlaceAlertsRequest(userId: 2, allowed: false)).allowed.isEmpty)
                #expect(try await geo.call(2, API.listPlaceAlerts, GeoV1.ListPlaceAlertsRequest()).mine.isEmpty)

                // A HIDDEN zone is no target (and a zone that becomes HIDDEN takes its alerts along).
                _ = try await geo.call(1, API.allowPlaceAlerts, GeoV1.AllowPlaceAlertsRequest(userId: 2, allowed: true))
                _ = try await geo.call(2, API.createPlaceAlert, GeoV1.CreatePlaceAlertRequest(subjectId: 1, zoneId: zone, onArrive: true))
                _ = try await geo.call(1, API.setZone, GeoV1.SetZoneRequest(zone: GeoV1.Zone(
                    zoneId: zone, label: "Home", latitude: home.lat, longitude: home.lon, radiusM: 100, privacy: .hidden)))
                #expect(try await geo.call(2, API.listPlaceAlerts, GeoV1.ListPlaceAlertsRequest()).mine.isEmpty)
                #expect(try await geo.call(2, API.listPlaceAlertTargets, GeoV1.ListPlaceAlertTargetsRequest(subjectId: 1)).zones.isEmpty)
                await expectError(.notFound) {
                    _ = try await geo.call(2, API.createPlaceAlert, GeoV1.CreatePlaceAlertRequest(subjectId: 1, zoneId: zone, onArrive: true))
                }
            }
        }

        @Test("nobody is told who may not see her: ghost mode, hidden precision, unfriended", arguments: Engine.allCases)
        func onlyWhoMaySee(engine: Engine) async throws {
            try await withGeo(engine: engine) { geo async throws in
                let zone = try await setUp(geo)
                try await move(geo, 1_000)
                _ = try await geo.call(2, API.createPlaceAlert, GeoV1.CreatePlaceAlertRequest(subjectId: 1, zoneId: zone, onArrive: true, onLeave: true))
                _ = geo.recorder.take()
                _ = try await geo.call(1, API.updateSharing, GeoV1.UpdateSharingRequest(settings: GeoV1.SharingSettings(ghost: true), fields: ["ghost"]))
                try await move(geo, 0)
                #expect(told(geo).isEmpty, "ghost")
                _ = try await geo.call(1, API.updateSharing, GeoV1.UpdateSharingRequest(settings: GeoV1.SharingSettings(ghost: false), fields: ["ghost"]))
                _ = try await geo.call(1, API.setPrecision, GeoV1.SetPrecisionRequest(userId: 2, precision: .hidden))
                try await move(geo, 1_000)
                #expect(told(geo).isEmpty, "hidden precision")
                _ = try await geo.call(1, API.setPrecision, GeoV1.SetPrecisionRequest(userId: 2, precision: .unspecified))
                try await move(geo, 0)
                #expect(told(geo).count == 1, "allowed again")
                geo.graph.apply(SocialV1.GraphEvent(change: .friendshipRemoved, userA: 1, userB: 2))
                try await move(geo, 1_000)
                #expect(told(geo).isEmpty, "no longer friends")
            }
        }

        @Test("alerts survive a restart, which tells nothing for where she already is", arguments: Engine.allCases)
        func restart(engine: Engine) async throws {
            let storage = try await TestStorage.fresh(engine, service: "geo")
            let clock = TestClock()
            let graph = StaticGraph()
            try await withGeo(storage: storage, graph: graph, clock: clock) { geo async throws in
                let zone = try await setUp(geo)
                try await move(geo, 0)
                _ = try await geo.call(2, API.createPlaceAlert, GeoV1.CreatePlaceAlertRequest(subjectId: 1, zoneId: zone, onArrive: true, onLeave: true))
            }
            try await withGeo(storage: storage, graph: graph, clock: clock) { geo async throws in
                try await move(geo, 30)
                #expect(told(geo).isEmpty, "inside before, inside now")
                try await move(geo, 500)
                #expect(told(geo).map(\.event.arrived) == [false])
            }
            await storage.remove()
        }

        @Test("the transition rule (pure): alerts on one target share its state; directions filter; coarse fixes skip")
        func transitions() {
            let area = PlaceArea(lat: 0, lon: 0, radius: 100, ring: [])
            #expect(area.leaveMargin == 30 && PlaceArea(lat: 0, lon: 0, radius: 5_000, ring: []).leaveMargin == 200)
            var book = PlaceAlertBook(alerts: [
                PlaceAlertRecord(id: 1, viewer: 2, subject: 1, target: .zone(9), label: "Home", area: area, onArrive: true, onLeave: false, createdMs: 0),
                PlaceAlertRecord(id: 2, viewer: 3, subject: 1, target: .zone(9), label: "Home", area: area, onArrive: false, onLeave: true, createdMs: 0),
            ], allowed: [(1, 2), (1, 3)])
            let fix = { (m: Double, acc: Double) in (user: UInt64(1), lat: m * metre, lon: 0.0, accuracy: acc) }
            let run = book.transitions([fix(500, 5), fix(50, 5), fix(50, 300), fix(120, 5), fix(140, 5)])
            #expect(run.fired.map(\.alert.id) == [1, 2] && run.fired.map(\.arrived) == [true, false] && run.fired.map(\.fix) == [1, 4])
            book.apply(inside: run.inside)
            #expect(book.inside[1] == nil)
            book.remove(1)
            book.remove(2)
            #expect(book.isEmpty && !book.isWatched(1))
        }
    }
}
