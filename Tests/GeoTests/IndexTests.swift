import Foundation
@testable import Geo
import FriensoProto
import FriensoTesting
import SocialReplica
import Testing

/// The reference: every stored point, exact distance, sorted by (distance, id).
func bruteForce(_ index: SpatialIndex, lat: Double, lon: Double, radius: Double, limit: Int,
                include: (UInt64) -> Bool = { _ in true }) -> [UInt64] {
    index.allPositions()
        .map { ($0.user, GeoMath.distance(lat1: lat, lon1: lon, lat2: $0.lat, lon2: $0.lon)) }
        .filter { $0.1 <= radius && include($0.0) }
        .sorted { ($0.1, $0.0) < ($1.1, $1.0) }
        .prefix(limit).map(\.0)
}

@Suite("geo: spatial index")
struct IndexTests {
    @Test(arguments: [
        (name: "uniform city", latRange: 40.6...40.9, lonRange: -74.1 ... -73.8),
        (name: "antimeridian", latRange: -17.0 ... -16.0, lonRange: 179.5...180.0),
        (name: "near the north pole", latRange: 89.9...90.0, lonRange: -180.0...180.0),
        // A few rows, each with occupied cells far apart: the search walks each row's occupied
        // columns outward from the query's, across long empty stretches.
        (name: "few rows, wide", latRange: 40.0...40.01, lonRange: -74.5 ... -73.5),
    ])
    func nearest_matchesBruteForce(_ area: (name: String, latRange: ClosedRange<Double>, lonRange: ClosedRange<Double>)) async {
        // CPU-bound for a second or two: on a thread of its own, so the cooperative pool (two
        // threads here) stays free for the other suites' services running in parallel.
        let mismatches = await ProcessHarness.offPool { () -> [String] in
            var rng = SplitMix(seed: 42)
            var index = SpatialIndex()
            for user in 1...3_000 as ClosedRange<UInt64> {
                var lon = Double.random(in: area.lonRange, using: &rng)
                // Across the antimeridian: half the points on the other side.
                if area.name == "antimeridian", user % 2 == 0 { lon = -180 + (lon - 179.5) }
                index.upsert(user, lat: Double.random(in: area.latRange, using: &rng), lon: lon)
            }
            // Moves and removals too: the index must follow them.
            for user in stride(from: UInt64(1), through: 500, by: 7) {
                index.upsert(user, lat: Double.random(in: area.latRange, using: &rng), lon: Double.random(in: area.lonRange, using: &rng))
            }
            for user in stride(from: UInt64(2), through: 500, by: 11) { index.remove(user) }
            let odd: (UInt64) -> Bool = { $0 % 3 != 0 }
            // The same filter as a context the search hands to `include` (what geo's nearby passes the graph as).
            let thirds = Set(stride(from: UInt64(0), through: 3_000, by: 3))
            var mismatches: [String] = []
            for _ in 0..<40 {
                let lat = Double.random(in: area.latRange, using: &rng)
                var lon = Double.random(in: area.lonRange, using: &rng)
                if area.name == "antimeridian" { lon = Bool.random(using: &rng) ? 179.999 : -179.999 }
                let radius = [300.0, 1_500, 5_000][Int.random(in: 0..<3, using: &rng)]
                let limit = [1, 20, 50, 100][Int.random(in: 0..<4, using: &rng)]
                let got = index.nearest(lat: lat, lon: lon, radius: radius, limit: limit, include: odd).map(\.user)
                if got != bruteForce(index, lat: lat, lon: lon, radius: radius, limit: limit, include: odd) {
                    mismatches.append("\(area.name): \(lat), \(lon) r \(radius) k \(limit)")
                }
                let read = index.nearest(lat: lat, lon: lon, radius: radius, limit: limit, reading: thirds) { thirds, user in !thirds.contains(user) }
                if read.map(\.user) != got {
                    mismatches.append("\(area.name), with a context: \(lat), \(lon) r \(radius) k \(limit)")
                }
            }
            return mismatches
        }
        #expect(mismatches.isEmpty, "\(mismatches)")
    }

    @Test func radiusBoundary_isInclusive_andDistancesAreReported() {
        var index = SpatialIndex()
        let metresPerDegree = GeoMath.metresPerDegree
        // Points due north at 999, 1000 and 1001 metres.
        index.upsert(1, lat: 999 / metresPerDegree, lon: 0)
        index.upsert(2, lat: 1_000 / metresPerDegree, lon: 0)
        index.upsert(3, lat: 1_001 / metresPerDegree, lon: 0)
        let got = index.nearest(lat: 0, lon: 0, radius: 1_000.05, limit: 10) { _ in true }
        #expect(got.map(\.user) == [1, 2])
        #expect(abs(got[1].distance - 1_000) < 0.2, "Float storage keeps ~0.1 m here")
        #expect(index.nearest(lat: 0, lon: 0, radius: 1_000.05, limit: 1) { _ in true }.map(\.user) == [1])
        #expect(index.nearest(lat: 0, lon: 0, radius: 1_000.05, limit: 0) { _ in true }.isEmpty)
    }

    @Test func poleAndEdgeInputs_doNotTrap() {
        var index = SpatialIndex()
        for (i, point) in [(90.0, 0.0), (-90.0, 180.0), (0.0, -180.0), (0.0, 180.0), (89.99999, 179.99999)].enumerated() {
            index.upsert(UInt64(i + 1), lat: point.0, lon: point.1)
        }
        #expect(index.count == 5)
        let nearPole = index.nearest(lat: 90, lon: 45, radius: 5_000, limit: 10) { _ in true }.map(\.user)
        #expect(nearPole == bruteForce(index, lat: 90, lon: 45, radius: 5_000, limit: 10))
        #expect(nearPole.contains(1) && nearPole.contains(5))
        let dateline = index.nearest(lat: 0, lon: 179.9999, radius: 100, limit: 10) { _ in true }.map(\.user)
        #expect(Set(dateline) == [3, 4], "-180 and 180 are the same meridian")
    }
}

@Suite("geo: visibility")
struct VisibilityTests {
    /// One row a rule: (friends, blocked, sharing, grant expiry, visible, reason).
    @Test(arguments: [
        (true, false, Sharing(), nil as Int64?, true, Visibility.Reason.friend),
        (false, false, Sharing(), nil, false, .notFriends),
        (true, true, Sharing(), nil, false, .blocked),
        (true, false, Sharing(ghost: true), nil, false, .ghost),
        (true, false, Sharing(shareWithFriends: false), nil, false, .notShared),
        (false, false, Sharing(), 2_000, true, .grant),              // grant active: a stranger in the circle's alert
        (true, false, Sharing(ghost: true), 2_000, true, .grant),     // grant beats ghost (helpNow)
        (false, false, Sharing(), 1_000, false, .notFriends),        // grant expired exactly now
        (false, false, Sharing(), 500, false, .notFriends),          // grant expired
        (true, false, Sharing(ghost: true), 999, false, .ghost),     // expired grant, ghost again
    ])
    func table(_ row: (Bool, Bool, Sharing, Int64?, Bool, Visibility.Reason)) {
        let facts = Visibility.Facts(friends: row.0, blocked: row.1, subject: row.2, grantExpiresAtMs: row.3)
        let decision = Visibility.decide(viewer: 1, subject: 2, facts, nowMs: 1_000)
        #expect(decision.visible == row.4)
        #expect(decision.reason == row.5)
    }

    @Test func yourself_alwaysVisible() {
        let facts = Visibility.Facts(friends: false, blocked: false, subject: Sharing(shareWithFriends: false, ghost: true))
        #expect(Visibility.decide(viewer: 7, subject: 7, facts, nowMs: 0) == (true, .yourself))
    }
}

@Suite("geo: which fix becomes the latest (pure)")
struct LatestRuleTests {
    func update(_ user: UInt64, _ deviceMs: Int64) -> LocationUpdate {
        LocationUpdate(user: user, lat: 0, lon: 0, accuracy: 10, deviceMs: deviceMs, receivedMs: 0, status: nil)
    }

    @Test func aLaterOrEqualDeviceTimeWins_inBatchOrder_andAnOlderOneGoesToHistoryOnly() {
        let stored: [UInt64: Int64] = [1: 100]
        let batch = [update(1, 90), update(1, 110), update(1, 105), update(2, 5), update(1, 110), update(2, 4)]
        #expect(GeoState.accept(batch) { stored[$0] } == [false, true, false, true, true, false])
        #expect(GeoState.accept([]) { stored[$0] } == [])
        #expect(GeoState.accept([update(3, .min)]) { _ in nil } == [true], "a user with no fix takes any")
    }

    @Test func aDecisionMadeBeforeTheCommit_yieldsToANewerFixThatArrivedMeanwhile() {
        var state = GeoState(index: SpatialIndex(cellDegrees: 0.01))
        let mine = LocationUpdate(user: 1, lat: 1, lon: 1, accuracy: 5, deviceMs: 100, receivedMs: 0, status: "mine")
        let replaces = state.accept([mine])
        #expect(replaces == [true])
        // Another instance's newer fix, applied while this batch was committing.
        let theirs = LocationUpdate(user: 1, lat: 2, lon: 2, accuracy: 5, deviceMs: 120, receivedMs: 0, status: nil)
        _ = state.applied([theirs], replaces: state.accept([theirs]), graph: nil, now: 0)
        _ = state.applied([mine], replaces: replaces, graph: nil, now: 0)
        #expect(state.latest[1]?.lat == 2 && state.latest[1]?.deviceMs == 120, "the newer fix stays")
        #expect(state.latest[1]?.status == "mine", "the older update's status applies, as for any older update")
    }
}

@Suite("geo: what a committed batch causes (pure)")
struct AppliedBatchTests {
    /// Ann (1) and Ben (2) are friends; Cat (3) is Ann's friend too; Dan (4) is nobody's.
    func graph() -> GraphState {
        var g = GraphState()
        for (a, b) in [(1, 2), (1, 3)] as [(UInt64, UInt64)] { g.apply(SocialV1.GraphEvent(change: .friendshipAdded, userA: a, userB: b)) }
        return g
    }

    func move(_ user: UInt64, _ lat: Double, at deviceMs: Int64) -> LocationUpdate {
        LocationUpdate(user: user, lat: lat, lon: -118.11, accuracy: 10, deviceMs: deviceMs, receivedMs: deviceMs, status: nil)
    }

    func apply(_ s: inout GeoState, _ updates: [LocationUpdate], _ g: GraphState) -> [GeoState.Outgoing] {
        s.applied(updates, replaces: s.accept(updates), graph: g, now: 1_000)
    }

    func nearby(_ out: [GeoState.Outgoing]) -> [(UInt64, UInt64)] {
        out.compactMap { if case .nearby(let viewer, let friend, _, _) = $0 { (viewer, friend) } else { nil } }
    }

    @Test func friendsNearEachOther_areToldOnceEach_andAgainOnlyAfterMovingApart() {
        var s = GeoState(index: SpatialIndex())
        s.sharing[1] = Sharing(proximityAlerts: true, proximityMetres: 200)
        s.sharing[2] = Sharing(proximityAlerts: true, proximityMetres: 500)
        let g = graph()
        _ = apply(&s, [move(2, 33.7800, at: 1)], g)
        // Ann arrives 111 m from Ben: within the smaller distance (200 m), both are told.
        let first = apply(&s, [move(1, 33.7810, at: 2)], g)
        #expect(nearby(first).map { [$0.0, $0.1] } == [[1, 2], [2, 1]])
        #expect(first.contains { if case .location(let viewers, 1, _, _) = $0 { viewers == [2, 3] } else { false } }, "friends see her move")
        // Still near (and hovering under 1.5 × 200 m): not told again.
        #expect(nearby(apply(&s, [move(1, 33.7812, at: 3)], g)).isEmpty)
        #expect(nearby(apply(&s, [move(1, 33.7825, at: 4)], g)).isEmpty, "278 m: outside, but not beyond 300 m: still armed off")
        // Beyond 1.5 × the distance, then back: told again.
        #expect(nearby(apply(&s, [move(1, 33.7830, at: 5)], g)).isEmpty)
        #expect(nearby(apply(&s, [move(1, 33.7805, at: 6)], g)).count == 2)
        // An older fix changes nothing and causes nothing.
        #expect(apply(&s, [move(1, 10, at: 1)], g).isEmpty)
        #expect(s.latest[1]?.deviceMs == 6)
    }

    @Test func aGhost_causesNoEvent_andStrangersSeeNothing() {
        var s = GeoState(index: SpatialIndex())
        s.sharing[1] = Sharing(ghost: true, proximityAlerts: true)
        s.sharing[2] = Sharing(proximityAlerts: true)
        let g = graph()
        _ = apply(&s, [move(2, 33.7800, at: 1)], g)
        #expect(apply(&s, [move(1, 33.7801, at: 2)], g).isEmpty, "a ghost is seen by nobody, told of nobody")
        #expect(apply(&s, [move(4, 33.7801, at: 2)], g).isEmpty, "nobody may see Dan")
        #expect(s.latest[1] != nil && s.latest[4] != nil, "memory has the fixes all the same")
    }
    @Test func aFixIsDecidedOnlyForViewersSomeoneListensFor_withTheSameEventsForThem_andNearbyStateKeptForAll() {
        // The same moves twice: every viewer listening, then only Cat (3).
        func state() -> GeoState {
            var s = GeoState(index: SpatialIndex())
            s.sharing[1] = Sharing(proximityAlerts: true, proximityMetres: 200)
            s.sharing[2] = Sharing(proximityAlerts: true, proximityMetres: 200)
            return s
        }
        var all = state(), cat = state()
        let g = graph()
        var everyone: [[GeoState.Outgoing]] = [], onlyCat: [[GeoState.Outgoing]] = []
        for (user, lat, at) in [(2, 33.7800, 1), (1, 33.7810, 2), (1, 33.7830, 3), (1, 33.7805, 4)] as [(UInt64, Double, Int64)] {
            let update = [move(user, lat, at: at)]
            everyone.append(all.applied(update, replaces: all.accept(update), graph: g, now: 1_000))
            onlyCat.append(cat.applied(update, replaces: cat.accept(update), graph: g, now: 1_000) { $0 == 3 })
        }
        func locations(_ out: [GeoState.Outgoing], for viewer: UInt64) -> [GeoState.Outgoing] {
            out.compactMap {
                guard case .location(let viewers, let subject, let fix, let precision) = $0, viewers.contains(viewer) else { return nil }
                return .location(viewers: [viewer], subject: subject, fix: fix, precision: precision)
            }
        }
        for (a, b) in zip(everyone, onlyCat) {
            #expect(locations(a, for: 3) == locations(b, for: 3), "Cat, who listens, is told the same")
            #expect(locations(b, for: 2).isEmpty, "Ben listens nowhere: no location is decided for him")
            #expect(nearby(a).map { [$0.0, $0.1] } == nearby(b).map { [$0.0, $0.1] },
                    "proximity is decided for everyone (its hysteresis is state), whoever listens")
        }
        #expect(everyone.joined().contains { if case .location(let viewers, 1, _, _) = $0 { viewers.contains(2) } else { false } })
    }
}
