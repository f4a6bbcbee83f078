import Foundation
import FriensoProto
import FriensoTesting
@testable import Geo
import Testing
import Wire

typealias API = GeoV1.GeoService

extension GeoTestGroup {
    @Suite("geo: locations, visibility, nearby", .timeLimit(.minutes(2)))
    struct GeoServiceTests {
        @Test(arguments: Engine.allCases) func invalidInputs_areInvalidArgument_andStoreNothing(engine: Engine) async throws {
            try await withGeo(engine: engine) { geo async throws in
                let now = geo.clock.now
                for bad in [
                    GeoV1.UpdateLocationRequest(latitude: 91, longitude: 0, accuracyM: 5, deviceTimeMs: now),
                    GeoV1.UpdateLocationRequest(latitude: 0, longitude: -180.01, accuracyM: 5, deviceTimeMs: now),
                    GeoV1.UpdateLocationRequest(latitude: .nan, longitude: 0, accuracyM: 5, deviceTimeMs: now),
                    GeoV1.UpdateLocationRequest(latitude: 0, longitude: .infinity, accuracyM: 5, deviceTimeMs: now),
                    GeoV1.UpdateLocationRequest(latitude: 0, longitude: 0, accuracyM: -1, deviceTimeMs: now),
                    GeoV1.UpdateLocationRequest(latitude: 0, longitude: 0, accuracyM: .nan, deviceTimeMs: now),
                    GeoV1.UpdateLocationRequest(latitude: 0, longitude: 0, accuracyM: 5, deviceTimeMs: 0),
                    GeoV1.UpdateLocationRequest(latitude: 0, longitude: 0, accuracyM: 5, deviceTimeMs: now + 600_000),
                    GeoV1.UpdateLocationRequest(latitude: 0, longitude: 0, accuracyM: 5, deviceTimeMs: now, setStatus: true,
                                                status: String(repeating: "x", count: 141)),
                ] {
                    await expectError(.invalidArgument) { _ = try await geo.call(1, API.updateLocation, bad) }
                }
                #expect(try await geo.call(1, API.latestLocation, GeoV1.LatestLocationRequest(userId: 1)).found == false)
                await expectError(.unauthenticated) { _ = try await geo.call(0, API.nearby, GeoV1.NearbyRequest()) }
            }
        }

        @Test(arguments: Engine.allCases) func outOfOrderUpdates_goToHistory_withoutReplacingTheLatest(engine: Engine) async throws {
            try await withGeo(engine: engine) { geo async throws in
                #expect(try await geo.locate(1, 40.0, -73.0, status: "at the library"))
                #expect(try await geo.locate(1, 41.0, -74.0, ago: 60_000) == false, "older than the stored fix")
                let latest = try await geo.call(1, API.latestLocation, GeoV1.LatestLocationRequest(userId: 1))
                #expect(latest.fix?.latitude == 40.0)
                #expect(try await geo.service.store.historyCount(of: 1) == 2, "both are in history")
                #expect(try await geo.call(1, API.deleteHistory, GeoV1.DeleteHistoryRequest()).deleted == 2)
                #expect(try await geo.call(1, API.latestLocation, GeoV1.LatestLocationRequest(userId: 1)).found, "the latest fix stays")
            }
        }

        @Test(arguments: Engine.allCases) func friendsLocations_followTheVisibilityRules(engine: Engine) async throws {
            try await withGeo(engine: engine) { geo async throws in
                // 1 views; 2 friend sharing; 3 friend in ghost mode; 4 friend not sharing; 5 stranger; 6 stranger with a grant.
                for u in [2, 3, 4] as [UInt64] { geo.befriend(1, u) }
                for u in 1...6 as ClosedRange<UInt64> { try await geo.locate(u, 33.78 + Double(u) * 0.001, -118.11, status: "s\(u)") }
                _ = try await geo.call(3, API.updateSharing, GeoV1.UpdateSharingRequest(settings: GeoV1.SharingSettings(ghost: true), fields: ["ghost"]))
                _ = try await geo.call(4, API.updateSharing, GeoV1.UpdateSharingRequest(
                    settings: GeoV1.SharingSettings(shareWithFriends: false), fields: ["share_with_friends"]))
                try await geo.service.apply(GeoV1.LocationGrant(subjectId: 6, viewerId: 1, expiresAtMs: geo.clock.now + 60_000, reason: "watch"))
                // A friend who granted a view too is listed once.
                try await geo.service.apply(GeoV1.LocationGrant(subjectId: 2, viewerId: 1, expiresAtMs: geo.clock.now + 60_000, reason: "watch"))
                let seen = try await geo.call(1, API.friendsLocations, GeoV1.FriendsLocationsRequest())
                #expect(seen.friends.map(\.userId) == [2, 6], "nearest first: the sharing friend and the grant, each once")
                #expect(seen.friends.first?.status == "s2")
                #expect(seen.you?.latitude == 33.781, "the caller's own fix comes along (the map centres on it)")
                #expect(try await geo.call(7, API.friendsLocations, GeoV1.FriendsLocationsRequest()).you == nil, "no fix, no position")
                #expect(seen.friends.first.map { $0.distanceM > 100 && $0.distanceM < 120 } == true)
                await expectError(.notFound) { _ = try await geo.call(1, API.navigate, GeoV1.NavigateRequest(userId: 3)) }
                let nav = try await geo.call(1, API.navigate, GeoV1.NavigateRequest(userId: 2))
                #expect(abs(nav.bearingDeg) < 0.5 || abs(nav.bearingDeg - 360) < 0.5, "due north")
                // The grant expires: the stranger disappears without anyone calling anything.
                geo.clock.advance(60_001)
                #expect(try await geo.call(1, API.friendsLocations, GeoV1.FriendsLocationsRequest()).friends.map(\.userId) == [2])
                // A block hides a friend at once.
                geo.graph.apply(SocialV1.GraphEvent(change: .blockAdded, userA: 2, userB: 1))
                #expect(try await geo.call(1, API.friendsLocations, GeoV1.FriendsLocationsRequest()).friends.isEmpty)
            }
        }

        @Test(arguments: Engine.allCases) func nearby_onlyFindable_notBlocked_notGhost_optionallyNotExchanged(engine: Engine) async throws {
            try await withGeo(engine: engine) { geo async throws in
                geo.findable(1, 2, 3, 4, 5)
                for u in 1...6 as ClosedRange<UInt64> { try await geo.locate(u, 40.75 + Double(u) * 0.001, -73.99) }
                await expectError(.failedPrecondition) { _ = try await geo.call(6, API.nearby, GeoV1.NearbyRequest()) } // 6 is not findable
                geo.graph.apply(SocialV1.GraphEvent(change: .blockAdded, userA: 3, userB: 1))
                _ = try await geo.call(4, API.updateSharing, GeoV1.UpdateSharingRequest(settings: GeoV1.SharingSettings(ghost: true), fields: ["ghost"]))
                geo.graph.apply(SocialV1.GraphEvent(change: .exchangeAdded, userA: 1, userB: 5))
                let all = try await geo.call(1, API.nearby, GeoV1.NearbyRequest())
                #expect(all.users.map(\.userId) == [2, 5])
                #expect(all.users.first.map { abs($0.distanceM - 111.2) < 1 } == true)
                let new = try await geo.call(1, API.nearby, GeoV1.NearbyRequest(excludeExchanged: true))
                #expect(new.users.map(\.userId) == [2])
                #expect(try await geo.call(1, API.nearby, GeoV1.NearbyRequest(radiusM: 150)).users.map(\.userId) == [2])
                #expect(try await geo.call(1, API.nearby, GeoV1.NearbyRequest(limit: 1)).users.map(\.userId) == [2])
                for bad in [GeoV1.NearbyRequest(radiusM: -1), GeoV1.NearbyRequest(radiusM: 50_000), GeoV1.NearbyRequest(limit: 101)] {
                    await expectError(.invalidArgument) { _ = try await geo.call(1, API.nearby, bad) }
                }
            }
        }

        @Test(arguments: Engine.allCases) func proximity_firesOncePerApproach_withHysteresis(engine: Engine) async throws {
            try await withGeo(engine: engine) { geo async throws in
                geo.befriend(1, 2)
                for u in [1, 2] as [UInt64] {
                    _ = try await geo.call(u, API.updateSharing, GeoV1.UpdateSharingRequest(
                        settings: GeoV1.SharingSettings(proximityAlerts: true, proximityM: 100), fields: ["proximity_alerts", "proximity_m"]))
                }
                let step = 1 / GeoMath.metresPerDegree // one metre of latitude
                try await geo.locate(1, 0, 0)
                try await geo.locate(2, 0, 500 * step)            // 500 m apart: nothing
                #expect(geo.recorder.nearby().isEmpty)
                try await geo.locate(2, 95 * step, 0)             // 95 m: both told
                #expect(Set(geo.recorder.nearby().map(\.viewer)) == [ViewerTopic.of(1), ViewerTopic.of(2)])
                try await geo.locate(2, 105 * step, 0)            // hovering at the boundary: silent
                try await geo.locate(2, 98 * step, 0)
                try await geo.locate(2, 140 * step, 0)            // still within 1.5 × 100 m: not re-armed
                try await geo.locate(2, 90 * step, 0)
                #expect(geo.recorder.nearby().isEmpty, "no flapping")
                try await geo.locate(2, 160 * step, 0)            // beyond 150 m: re-armed
                try await geo.locate(2, 50 * step, 0)
                #expect(geo.recorder.nearby().count == 2, "told again after moving apart")
                // One side turns it off: no more alerts.
                _ = try await geo.call(2, API.updateSharing, GeoV1.UpdateSharingRequest(
                    settings: GeoV1.SharingSettings(proximityAlerts: false), fields: ["proximity_alerts"]))
                try await geo.locate(2, 500 * step, 0)
                try await geo.locate(2, 10 * step, 0)
                #expect(geo.recorder.nearby().isEmpty)
            }
        }

        @Test(arguments: Engine.allCases) func liveLocationEvents_goToPermittedViewersOnly(engine: Engine) async throws {
            try await withGeo(engine: engine) { geo async throws in
                geo.befriend(1, 2)
                geo.befriend(1, 3)
                _ = try await geo.call(1, API.updateSharing, GeoV1.UpdateSharingRequest(settings: GeoV1.SharingSettings(ghost: true), fields: ["ghost"]))
                try await geo.service.apply(GeoV1.LocationGrant(subjectId: 1, viewerId: 3, expiresAtMs: geo.clock.now + 1_000, reason: "help_now"))
                _ = geo.recorder.take()
                try await geo.locate(1, 10, 10)
                let topics = geo.recorder.take().filter { $0.method == "geo.Location" }.map(\.topic)
                #expect(topics == [ViewerTopic.of(3)], "ghost hides from friend 2; the helpNow grant shows to 3")
            }
        }

        /// Several alerts instances publish grants on sockets of their own, and a republish may have
        /// read a grant just before its revocation: a grant older than the last one applied for its
        /// key arrives late and must not show the location again.
        @Test(arguments: Engine.allCases) func aStaleGrant_arrivingAfterItsRevocation_isIgnored(engine: Engine) async throws {
            try await withGeo(engine: engine) { geo async throws in
                geo.befriend(1, 3)
                _ = try await geo.call(1, API.updateSharing, GeoV1.UpdateSharingRequest(settings: GeoV1.SharingSettings(ghost: true), fields: ["ghost"]))
                func liveTo3() async throws -> Bool {
                    geo.clock.advance(1_000) // a newer fix each time
                    _ = geo.recorder.take()
                    try await geo.locate(1, 10, 10)
                    return geo.recorder.take().contains { $0.method == "geo.Location" && $0.topic == ViewerTopic.of(3) }
                }
                let later = geo.clock.now + 600_000
                try await geo.service.apply(GeoV1.LocationGrant(subjectId: 1, viewerId: 3, expiresAtMs: later, reason: "watch", version: 7))
                #expect(try await liveTo3(), "granted")
                try await geo.service.apply(GeoV1.LocationGrant(subjectId: 1, viewerId: 3, expiresAtMs: geo.clock.now, reason: "watch", version: 9))
                #expect(try await !liveTo3(), "revoked")
                // The grant of version 7 again, late (another instance's republish): stale.
                try await geo.service.apply(GeoV1.LocationGrant(subjectId: 1, viewerId: 3, expiresAtMs: later, reason: "watch", version: 7))
                #expect(try await !liveTo3(), "a stale grant does not undo its revocation")
                // A newer grant applies; so does one without a version.
                try await geo.service.apply(GeoV1.LocationGrant(subjectId: 1, viewerId: 3, expiresAtMs: later, reason: "watch", version: 12))
                #expect(try await liveTo3())
                try await geo.service.apply(GeoV1.LocationGrant(subjectId: 1, viewerId: 3, expiresAtMs: geo.clock.now, reason: "watch"))
                #expect(try await !liveTo3())
            }
        }

        /// Grants that arrive together are stored in one transaction (`apply(_: [LocationGrant])`,
        /// as the grant consumer batches them) with the rules of one at a time: in order, a stale
        /// one ignored even when it follows its newer version in the same batch, and all of them
        /// kept across a restart.
        @Test(arguments: Engine.allCases) func grantsInOneBatch_followTheRulesOfOneAtATime(engine: Engine) async throws {
            let storage = try await TestStorage.fresh(engine, service: "geo")
            let graph = StaticGraph()
            let clock = TestClock()
            @Sendable func liveTo(_ viewer: UInt64, _ geo: GeoHarness) async throws -> Bool {
                geo.clock.advance(1_000) // a newer fix each time
                _ = geo.recorder.take()
                try await geo.locate(1, 10, 10)
                return geo.recorder.take().contains { $0.method == "geo.Location" && $0.topic == ViewerTopic.of(viewer) }
            }
            let later = clock.now + 600_000
            try await withGeo(storage: storage, graph: graph, clock: clock) { geo async throws in
                for viewer: UInt64 in [3, 4, 5] { geo.befriend(1, viewer) }
                _ = try await geo.call(1, API.updateSharing, GeoV1.UpdateSharingRequest(settings: GeoV1.SharingSettings(ghost: true), fields: ["ghost"]))
                try await geo.service.apply([
                    GeoV1.LocationGrant(subjectId: 1, viewerId: 3, expiresAtMs: later, reason: "watch", version: 7),
                    GeoV1.LocationGrant(subjectId: 1, viewerId: 4, expiresAtMs: later, reason: "help_now", version: 2),
                    GeoV1.LocationGrant(subjectId: 1, viewerId: 3, expiresAtMs: geo.clock.now, reason: "watch", version: 9), // revokes 7
                    GeoV1.LocationGrant(subjectId: 1, viewerId: 3, expiresAtMs: later, reason: "watch", version: 8),          // stale
                    GeoV1.LocationGrant(subjectId: 1, viewerId: 5, expiresAtMs: later, reason: "help_now", version: 1),
                    GeoV1.LocationGrant(subjectId: 1, viewerId: 5, expiresAtMs: later, reason: "bogus", version: 1),          // malformed
                ])
                #expect(try await !liveTo(3, geo), "revoked by version 9 in the same batch; version 8 after it is stale")
                #expect(try await liveTo(4, geo))
                #expect(try await liveTo(5, geo))
            }
            try await withGeo(storage: storage, graph: graph, clock: clock) { geo async throws in
                #expect(try await !liveTo(3, geo), "still revoked after the restart")
                #expect(try await liveTo(4, geo), "kept across the restart")
                #expect(try await liveTo(5, geo), "kept across the restart")
            }
            await storage.remove()
        }

        /// A phone that lost the reply sends the same reading again (same device time, place and
        /// accuracy): it is answered as the latest fix it is, without a second history row. A
        /// new reading at the same place is a new row.
        @Test(arguments: Engine.allCases) func aRepeatedReading_aRetry_isStoredOnce(engine: Engine) async throws {
            try await withGeo(engine: engine) { geo async throws in
                func rows() async throws -> Int { try await geo.rows("SELECT id FROM history WHERE user_id = 1").count }
                #expect(try await geo.locate(1, 10, 10, status: "walking home"))
                #expect(try await geo.locate(1, 10, 10, status: "walking home"), "the retry is answered as the latest fix")
                #expect(try await geo.locate(1, 10, 10), "the same reading, status left as it is")
                #expect(try await rows() == 1)
                #expect(try await geo.call(1, API.exportMyData, GeoV1.ExportMyDataRequest()).history.count == 1)
                // The same device time with another place or status is not a repeat.
                _ = try await geo.locate(1, 10, 10.001)
                _ = try await geo.locate(1, 10, 10.001, status: "home")
                geo.clock.advance(1_000)
                #expect(try await geo.locate(1, 10, 10.001, status: "home"), "a new reading at the same place")
                #expect(try await rows() == 4)
            }
        }

        /// The same after a restart of geo between the revocation and the stale grant: the
        /// revocation's version is stored with it (a tombstone row), not only kept in memory.
        @Test(arguments: Engine.allCases) func aStaleGrant_arrivingAfterItsRevocationAndARestart_isIgnored(engine: Engine) async throws {
            let storage = try await TestStorage.fresh(engine, service: "geo")
            let graph = StaticGraph()
            let clock = TestClock()
            let later = clock.now + 600_000
            @Sendable func liveTo3(_ geo: GeoHarness) async throws -> Bool {
                geo.clock.advance(1_000) // a newer fix each time
                _ = geo.recorder.take()
                try await geo.locate(1, 10, 10)
                return geo.recorder.take().contains { $0.method == "geo.Location" && $0.topic == ViewerTopic.of(3) }
            }
            try await withGeo(storage: storage, graph: graph, clock: clock) { geo async throws in
                geo.befriend(1, 3)
                _ = try await geo.call(1, API.updateSharing, GeoV1.UpdateSharingRequest(settings: GeoV1.SharingSettings(ghost: true), fields: ["ghost"]))
                try await geo.service.apply(GeoV1.LocationGrant(subjectId: 1, viewerId: 3, expiresAtMs: later, reason: "watch", version: 7))
                #expect(try await liveTo3(geo), "granted")
                try await geo.service.apply(GeoV1.LocationGrant(subjectId: 1, viewerId: 3, expiresAtMs: geo.clock.now, reason: "watch", version: 9))
                #expect(try await !liveTo3(geo), "revoked")
            }
            try await withGeo(storage: storage, graph: graph, clock: clock) { geo async throws in
                #expect(try await !liveTo3(geo), "still revoked after the restart")
                try await geo.service.apply(GeoV1.LocationGrant(subjectId: 1, viewerId: 3, expiresAtMs: later, reason: "watch", version: 7))
                #expect(try await !liveTo3(geo), "a stale grant does not undo its revocation after a restart")
                // The store refuses it too (another instance, whose memory has not seen version 9).
                let key = GrantKey(subject: 1, viewer: 3, reason: "watch")
                #expect(try await geo.service.store.saveGrants([GrantWrite(key: key, expiresMs: later, version: 8)], now: geo.clock.now) == [false])
                try await geo.service.apply(GeoV1.LocationGrant(subjectId: 1, viewerId: 3, expiresAtMs: later, reason: "watch", version: 12))
                #expect(try await liveTo3(geo), "a newer grant applies")
            }
            await storage.remove()
        }

        @Test(arguments: Engine.allCases) func restart_rebuildsTheIndex_withTheSameAnswers(engine: Engine) async throws {
            let storage = try await TestStorage.fresh(engine, service: "geo")
            let graph = StaticGraph()
            let clock = TestClock()
            let before = try await withGeo(storage: storage, graph: graph, clock: clock) { geo async throws in
                geo.findable(1)
                var rng = SplitMix(seed: 9)
                for u in 1...300 as ClosedRange<UInt64> {
                    geo.findable(u)
                    try await geo.locate(u, Double.random(in: 40.70...40.72, using: &rng), Double.random(in: -74.0 ... -73.98, using: &rng))
                }
                _ = try await geo.call(7, API.updateSharing, GeoV1.UpdateSharingRequest(settings: GeoV1.SharingSettings(ghost: true), fields: ["ghost"]))
                return try await geo.call(1, API.nearby, GeoV1.NearbyRequest(limit: 100)).users.map(\.userId)
            }
            #expect(before.count == 100 && !before.contains(7))
            let after = try await withGeo(storage: storage, graph: graph, clock: clock) { geo async throws in
                try await geo.call(1, API.nearby, GeoV1.NearbyRequest(limit: 100)).users.map(\.userId)
            }
            #expect(after == before)
            await storage.remove()
        }
    }

    @Suite("geo: bad inputs", .timeLimit(.minutes(1)))
    struct GeoBadInputTests {
        @Test(arguments: Engine.allCases) func sharingNavigatePlacesAndCheckIns_refuseBadInputs(engine: Engine) async throws {
            try await withGeo(engine: engine) { geo async throws in
                try await geo.locate(1, 40.0, -73.0)
                for bad in [
                    GeoV1.UpdateSharingRequest(settings: GeoV1.SharingSettings(ghost: true)),                        // no fields named
                    GeoV1.UpdateSharingRequest(settings: GeoV1.SharingSettings(), fields: ["visible_to_all"]),       // unknown field
                    GeoV1.UpdateSharingRequest(settings: GeoV1.SharingSettings(proximityM: 5), fields: ["proximity_m"]),
                    GeoV1.UpdateSharingRequest(settings: GeoV1.SharingSettings(proximityM: .nan), fields: ["proximity_m"]),
                    GeoV1.UpdateSharingRequest(settings: GeoV1.SharingSettings(proximityM: 20_000), fields: ["proximity_m"]),
                ] {
                    await expectError(.invalidArgument) { _ = try await geo.call(1, API.updateSharing, bad) }
                }
                #expect(try await geo.call(1, API.getSharing, GeoV1.GetSharingRequest()).settings?.proximityM == 200, "nothing was changed")
                await expectError(.invalidArgument) { _ = try await geo.call(1, API.navigate, GeoV1.NavigateRequest()) }
                await expectError(.notFound) { _ = try await geo.call(1, API.navigate, GeoV1.NavigateRequest(userId: 999)) }
                await expectError(.invalidArgument) {
                    _ = try await geo.call(1, API.closestPlace, GeoV1.ClosestPlaceRequest(hasPoint: true, latitude: 0, longitude: 181))
                }
                for bad in [GeoV1.ListCheckInsRequest(radiusM: -5), GeoV1.ListCheckInsRequest(radiusM: 50_000),
                            GeoV1.ListCheckInsRequest(limit: 101)] {
                    await expectError(.invalidArgument) { _ = try await geo.call(1, API.listCheckIns, bad) }
                }
                await expectError(.failedPrecondition) { _ = try await geo.call(2, API.listCheckIns, GeoV1.ListCheckInsRequest()) } // no fix yet
                await expectError(.unauthenticated) { _ = try await geo.call(0, API.listVenues, GeoV1.ListVenuesRequest()) }
            }
        }
    }
}
