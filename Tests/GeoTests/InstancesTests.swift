import Foundation
import FriensoProto
import FriensoTesting
@testable import Geo
import Synchronization
import Testing
import Wire

private let metre = 1 / GeoMath.metresPerDegree
private let home = (lat: 33.7700, lon: -118.1000)

extension GeoTestGroup {
    /// Two geo instances on one PostgreSQL schema, as two processes on two hosts run them: a request
    /// may reach either, so each must answer with what the other took.
    @Suite("geo: several instances on PostgreSQL", .timeLimit(.minutes(2)))
    struct GeoInstancesTests {
        /// Runs `body` with two instances sharing a fresh schema, the same graph and clock, each
        /// following the other's changes (`GeoFollower`, updates every 20 ms).
        func withTwoInstances(graph: StaticGraph = StaticGraph(), clock: TestClock = TestClock(), storage given: TestStorage? = nil,
                              _ body: @Sendable (GeoHarness, GeoHarness) async throws -> Void) async throws {
            let storage: TestStorage
            if let given { storage = given } else { storage = try await TestStorage.fresh(.postgres, service: "geo") }
            do {
                try await withGeo(storage: storage, graph: graph, clock: clock, operatorKey: "op", instance: 1, instances: 2) { a in
                    try await withGeo(storage: storage, graph: graph, clock: clock, operatorKey: "op", instance: 2, instances: 2) { b in
                        let followers = [a, b].map { geo in
                            Task { try await GeoFollower(service: geo.service, interval: .milliseconds(20), logger: geo.logs.logger("follower")).run() }
                        }
                        defer { for follower in followers { follower.cancel() } }
                        try await body(a, b)
                    }
                }
            } catch {
                if given == nil { await storage.remove() }
                throw error
            }
            if given == nil { await storage.remove() }
        }

        /// Waits (at most 10 s, checking every 20 ms) until `condition` holds.
        func eventually(_ what: Comment, _ condition: @Sendable () async throws -> Bool) async throws {
            let deadline = ContinuousClock.now + .seconds(10)
            while ContinuousClock.now < deadline {
                if try await condition() { return }
                try await Task.sleep(for: .milliseconds(20))
            }
            Issue.record("not within 10 s: \(what)")
        }

        func latest(_ geo: GeoHarness, _ user: UInt64) async throws -> Double? {
            try await geo.call(user, API.latestLocation, GeoV1.LatestLocationRequest(userId: user)).fix?.latitude
        }

        @Test func updatesTakenByOne_areInTheOthersAnswers_nearbyAndFriendsIncluded() async throws {
            let graph = StaticGraph()
            try await withTwoInstances(graph: graph) { a, b in
                a.befriend(1, 2)
                a.findable(1, 2, 3)
                #expect(try await a.locate(1, 40.000, -73.0))
                #expect(try await b.locate(2, 40.001, -73.0))
                #expect(try await a.locate(3, 40.002, -73.0))
                try await eventually("each instance has the other's updates") {
                    let (b1, a2, b3) = (try await latest(b, 1), try await latest(a, 2), try await latest(b, 3))
                    return b1 == 40.000 && a2 == 40.001 && b3 == 40.002
                }
                let nearB = try await b.call(1, API.nearby, GeoV1.NearbyRequest(limit: 10)).users.map(\.userId)
                let nearA = try await a.call(1, API.nearby, GeoV1.NearbyRequest(limit: 10)).users.map(\.userId)
                #expect(nearA == [2, 3] && nearB == nearA, "the index of each holds everyone")
                #expect(try await b.call(2, API.friendsLocations, GeoV1.FriendsLocationsRequest()).friends.map(\.userId) == [1])
                // An older fix taken by the other instance goes to history only, there as here.
                #expect(try await b.locate(1, 41.0, -73.0, ago: 60_000) == false, "older than the fix A took")
                try await eventually("A has applied B's older fix") { try await a.service.followOthers() == 0 }
                let (a1, b1) = (try await latest(a, 1), try await latest(b, 1))
                #expect(a1 == 40.000 && b1 == 40.000)
                #expect(try await a.service.store.historyCount(of: 1) == 2)
            }
        }

        /// The latitude of the `n`-th move.
        static func lat(_ n: Int) -> Double { 40 + Double(n) / 1_000 }

        @Test func bothWritingAtOnce_historyIsOneOrderedLog_andARestartOfEitherHasTheNewestFixOfEveryone() async throws {
            let storage = try await TestStorage.fresh(.postgres, service: "geo")
            let clock = TestClock()
            try await withTwoInstances(clock: clock, storage: storage) { a, b in
                try await withThrowingTaskGroup(of: Void.self) { group in
                    for (n, geo) in [a, b].enumerated() {
                        group.addTask {
                            // Each user is moved by both instances, in turn; device times rise.
                            for step in 0..<40 {
                                for user in 1...10 as ClosedRange<UInt64> {
                                    let lat = Self.lat(step * 2 + n)
                                    _ = try await geo.call(user, API.updateLocation, GeoV1.UpdateLocationRequest(
                                        latitude: lat, longitude: -73, accuracyM: 5, deviceTimeMs: clock.now - 100_000 + Int64(step * 2 + n)))
                                }
                            }
                        }
                    }
                    try await group.waitForAll()
                }
                let ids = try await a.rows("SELECT id FROM history ORDER BY id").map { Int64($0[0])! }
                #expect(ids.count == 800 && ids == Array(1...800), "one log, every id once, no hole (no batch rolled back)")
                try await eventually("both instances agree on every user's newest fix (from instance 2, step 39)") {
                    _ = try await a.service.followOthers()
                    _ = try await b.service.followOthers()
                    for user in 1...10 as ClosedRange<UInt64> {
                        guard try await latest(a, user) == Self.lat(79), try await latest(b, user) == Self.lat(79) else { return false }
                    }
                    return true
                }
            }
            // Both stopped without a graceful fold (as after kill -9): either one, started again, replays to the same answer.
            try await withGeo(storage: storage, clock: clock, instance: 2, instances: 2) { b async throws in
                for user in 1...10 as ClosedRange<UInt64> { #expect(try await latest(b, user) == Self.lat(79)) }
            }
            await storage.remove()
        }

        @Test func settingsChangedOnOne_reachTheOther_sharingZonesPrecisionAndCheckIns() async throws {
            try await withTwoInstances { a, b in
                a.befriend(1, 2)
                _ = try await a.locate(1, home.lat, home.lon)
                _ = try await b.locate(2, home.lat + 0.01, home.lon)
                try await eventually("B has 1's fix") { _ = try await b.service.followOthers(); return try await latest(b, 1) != nil }
                #expect(try await b.call(2, API.friendsLocations, GeoV1.FriendsLocationsRequest()).friends.map(\.userId) == [1])
                // Ghost mode set through A: B stops showing her.
                _ = try await a.call(1, API.updateSharing, GeoV1.UpdateSharingRequest(settings: GeoV1.SharingSettings(ghost: true), fields: ["ghost"]))
                try await eventually("B hides a ghost") { try await b.call(2, API.friendsLocations, GeoV1.FriendsLocationsRequest()).friends.isEmpty }
                _ = try await b.call(1, API.updateSharing, GeoV1.UpdateSharingRequest(settings: GeoV1.SharingSettings(ghost: false), fields: ["ghost"]))
                try await eventually("A shows her again") { try await a.call(2, API.friendsLocations, GeoV1.FriendsLocationsRequest()).friends.count == 1 }
                // A LABEL zone made on B: A shows the label, never the coordinates.
                _ = try await b.call(1, API.setZone, GeoV1.SetZoneRequest(zone: GeoV1.Zone(label: "Home", latitude: home.lat, longitude: home.lon,
                                                                                          radiusM: 150, privacy: .label)))
                try await eventually("A hides her inside the zone") {
                    let seen = try await a.call(2, API.friendsLocations, GeoV1.FriendsLocationsRequest()).friends.first
                    return seen?.fix == nil && seen?.around == "Home"
                }
                // Precision chosen on A for friend 2, read on B; then the zone goes (on A).
                let zones = try await a.call(1, API.listZones, GeoV1.ListZonesRequest()).zones
                _ = try await a.call(1, API.deleteZone, GeoV1.DeleteZoneRequest(zoneId: try #require(zones.first).zoneId))
                _ = try await a.call(1, API.setPrecision, GeoV1.SetPrecisionRequest(userId: 2, precision: .hidden))
                try await eventually("B shows friend 2 nothing of her") {
                    try await b.call(2, API.friendsLocations, GeoV1.FriendsLocationsRequest()).friends.isEmpty
                }
                // A check-in made on A is listed by B.
                _ = try await a.call(1, API.setPrecision, GeoV1.SetPrecisionRequest(userId: 2, precision: .exact))
                _ = try await a.call(1, API.checkIn, GeoV1.CheckInRequest(placeName: "Desk"))
                try await eventually("B lists her check-in") {
                    try await b.call(2, API.listCheckIns, GeoV1.ListCheckInsRequest()).checkIns.contains { $0.userId == 1 && $0.placeName == "Desk" }
                }
            }
        }

        @Test func aPlaceAlertSetOnOne_firesOnTheOther_andTheEventsAreOneOrderedList() async throws {
            try await withTwoInstances { a, b in
                a.befriend(1, 2)
                let zone = try #require(try await a.call(1, API.setZone, GeoV1.SetZoneRequest(zone: GeoV1.Zone(
                    label: "Home", latitude: home.lat, longitude: home.lon, radiusM: 100, privacy: .label))).zone)
                _ = try await a.call(1, API.allowPlaceAlerts, GeoV1.AllowPlaceAlertsRequest(userId: 2, allowed: true))
                _ = try await a.call(2, API.createPlaceAlert, GeoV1.CreatePlaceAlertRequest(subjectId: 1, zoneId: zone.zoneId, onArrive: true, onLeave: true))
                try await eventually("B knows the alert") {
                    b.service.state.mutex.withLock { $0.placeAlerts.isWatched(1) && $0.placeAlerts.isAllowed(viewer: 2, subject: 1) }
                }
                // She walks home: the updates alternate between the instances.
                for (i, metres) in [600.0, 300, 50, 0, 400].enumerated() {
                    let geo = i % 2 == 0 ? b : a
                    a.clock.advance(1_000)
                    _ = try await geo.call(1, API.updateLocation, GeoV1.UpdateLocationRequest(
                        latitude: home.lat + metres * metre, longitude: home.lon, accuracyM: 5, deviceTimeMs: a.clock.now))
                    // The next update's instance knows where she was (in a deployment: within the follow interval).
                    _ = try await (i % 2 == 0 ? a : b).service.followOthers()
                }
                let events = try await b.call(0, API.listPlaceEvents, GeoV1.ListPlaceEventsRequest()).events
                #expect(events.map(\.arrived) == [true, false], "arrived once (at 50 m, on B), left once (at 400 m, on B)")
                #expect(events.map(\.eventId) == events.map(\.eventId).sorted())
                #expect(try await a.call(0, API.listPlaceEvents, GeoV1.ListPlaceEventsRequest()).events == events)
            }
        }

        /// An instance whose host is cut off in the middle of a batch leaves its transaction open,
    /// holding the history lock: the others' updates wait until the server ends it (after
    /// `PostgresGeoStore.idleTimeout`: how long is measured by the several-hosts test, not here),
    /// and the stuck instance's next statement then fails at once instead of waiting forever
    /// (postgres-nio 1.33 writes a query to a closed connection without failing it: without
    /// `ensureOpen` this test hangs).
    @Test func aBatchLeftOpenByAnInstanceCutOff_holdsUpTheOthersOnlyUntilTheServerEndsIt() async throws {
        try await withTwoInstances { a, b in
            let store = try #require(a.service.store as? PostgresGeoStore)
            let (release, releasing) = AsyncStream.makeStream(of: Void.self)
            let stuck = Task {
                try await store.database.transaction { connection in
                    try await PostgresGeoStore.lockHistory(connection, logger: store.logger)
                    for await _ in release { break } // idle in the transaction: its host is gone
                    try connection.ensureOpen() // as the next statement of a batch does
                    try await connection.query("SELECT 1", logger: store.logger)
                }
            }
            try await eventually("A's batch holds the history lock") {
                try await a.rows("""
                    SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted AND objsubid = 1
                    AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
                    AND ((classid::bigint << 32) | objid::bigint) = \(PostgresGeoStore.historyLockKey)
                    """).first == ["1"]
            }
            #expect(try await b.locate(1, 40, -73), "B's update commits once the server has ended A's transaction")
            releasing.yield()
            releasing.finish()
            let outcome = await stuck.result
            #expect(throws: (any Error).self, "A's transaction was ended by the server") { try outcome.get() }
            #expect(try await a.rows("SELECT count(*) FROM history").first == ["1"])
        }
    }

    @Test func anAccountErasedThroughOne_isForgottenByTheOther() async throws {
            try await withTwoInstances { a, b in
                a.befriend(1, 2)
                _ = try await a.locate(1, 40, -73)
                try await eventually("B has 1's fix") { _ = try await b.service.followOthers(); return try await latest(b, 1) != nil }
                _ = try await b.call(1, API.updateSharing, GeoV1.UpdateSharingRequest(settings: GeoV1.SharingSettings(proximityAlerts: true),
                                                                                       fields: ["proximity_alerts"]))
                #expect(try await a.call(0, API.eraseUser, GeoV1.EraseUserRequest(userId: 1)).erased > 0)
                try await eventually("B forgot her") {
                    b.service.state.mutex.withLock { $0.latest[1] == nil && $0.sharing[1] == nil && $0.index.count == 0 }
                }
                #expect(try await b.call(2, API.friendsLocations, GeoV1.FriendsLocationsRequest()).friends.isEmpty)
                #expect(try await b.rows("SELECT count(*) FROM events WHERE subject = 1 AND method <> 'geo.Changed'").first == ["0"])
            }
        }
    }
}
