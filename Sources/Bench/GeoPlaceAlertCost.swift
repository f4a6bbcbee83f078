import Foundation
import FriensoProto
import Geo
import GRDB
import Logging
import SocialReplica
import Synchronization
import Wire

#if canImport(Glibc)
import Glibc
#endif

extension GeoScenario {
    /// Durable location updates in process at 64 in flight, with 100,000 places watched and
    /// without any, alternating three times in one run: the CPU a durable update costs with place
    /// checks (privacy zones and place alerts) as a ratio (target: at most 1.10×).
    ///
    /// With places: each of the 20,000 users has 4 zones (a LABEL "home" around where they are,
    /// keeping no history, and 3 OFF ones 400 m apart), 20,000 campus places (100 m circles)
    /// make 100,000 places; each user is watched by a friend on their home and on one campus
    /// place. Updates wander within ±500 m of each user's home, so zones and alerts are crossed
    /// and told as they would be.
    static func placeAlertCost(_ options: Options, logger: Logger) async throws -> [String] {
        let n = min(options.users, 20_000), zonesEach = 4, campusPlaces = 20_000
        let homes = uniform(n, seed: 11), campus = uniform(campusPlaces, seed: 12)
        var graphState = GraphState()
        for i in 0..<n {
            let j = (i + 1) % n
            graphState.apply(SocialV1.GraphEvent(change: .friendshipAdded, userA: UInt64(min(i, j) + 1), userB: UInt64(max(i, j) + 1)))
        }
        let graph = StaticGraph(graphState)
        var services: [(name: String, geo: GeoService, dir: String)] = []
        for withPlaces in [false, true] {
            let dir = BenchStack.scratchDirectory()
            try FileManager.default.createDirectory(atPath: "\(dir)/geo", withIntermediateDirectories: true)
            _ = try GeoService(directory: "\(dir)/geo", graph: graph, publisher: nil, logger: logger) // creates the schema
            try seedLatest(path: "\(dir)/geo/geo.sqlite", homes)
            if withPlaces { try seedPlaces(path: "\(dir)/geo/geo.sqlite", homes: homes, campus: campus, zonesEach: zonesEach) }
            let name = withPlaces ? "\(n * zonesEach + campusPlaces) places, \(2 * n) alerts" : "no places"
            services.append((name, try GeoService(directory: "\(dir)/geo", graph: graph, publisher: nil, logger: logger), dir))
        }
        defer { for s in services { try? FileManager.default.removeItem(atPath: s.dir) } }

        var rows: [LatencyStats] = []
        var cpu: [String: (seconds: Double, updates: Int)] = [:]
        // Device times after the seeded fixes' (an hour ago), one millisecond apart: every update
        // becomes its user's latest, so every one is checked against zones and alerts.
        let clock = Atomic<Int64>(WallClock.milliseconds() - 3_590_000)
        precondition(12 * options.updates < 3_500_000, "--updates: at most 290,000 for this part")
        let metre = 1 / GeoMath.metresPerDegree
        var lines: [String] = []
        // Walking: each user in turn moves ~25 m along a 250 m circle that passes 50 m from their
        // home's centre (into the home zone and out again twice a lap): what a phone reports.
        // Jumping: every update a random point within ±500 m of home, so about one update in
        // seven crosses the home zone's edge: a worst case for the events' own cost.
        for movement in ["walking", "jumping"] {
            // Three rounds each, alternating: this VM's rates wander by 20% from one second to the next.
            for round in 0..<3 {
                for (name, geo, _) in services {
                    let before = Self.processCPUSeconds()
                    let stats = await drive(name: "durable updates in process, \(movement), \(name) (round \(round + 1))", inFlight: 64,
                                            count: options.updates, warmup: 0) {
                        let c = clock.add(1, ordering: .relaxed).newValue
                        let i: Int, north: Double, east: Double
                        if movement == "walking" {
                            i = Int(c % Int64(n))
                            let angle = Double(c / Int64(n)) * 2 * .pi / 64
                            (north, east) = (200 + 250 * cos(angle), 250 * sin(angle))
                        } else {
                            i = BenchRandom.shared(below: n)
                            (north, east) = (BenchRandom.sharedUnit() * 1_000 - 500, BenchRandom.sharedUnit() * 1_000 - 500)
                        }
                        let request = GeoV1.UpdateLocationRequest(latitude: homes.lat[i] + north * metre,
                                                                  longitude: homes.lon[i] + east * metre / cos(homes.lat[i] * .pi / 180),
                                                                  accuracyM: 10, deviceTimeMs: c)
                        return (try? await geo.record(request, user: UInt64(i + 1))) != nil
                    }
                    cpu["\(movement), \(name)", default: (0, 0)].seconds += Self.processCPUSeconds() - before
                    cpu["\(movement), \(name)", default: (0, 0)].updates += Int(stats.count)
                    rows.append(stats)
                }
            }
            let perUpdate = cpu.mapValues { $0.seconds * 1e6 / Double(max(1, $0.updates)) }
            let without = perUpdate["\(movement), \(services[0].name)"] ?? 0, with = perUpdate["\(movement), \(services[1].name)"] ?? 0
            lines.append(String(format: "- \(movement): CPU per durable update, whole process: %.1f µs without places, %.1f µs with them: %.3f×%@",
                                without, with, with / max(without, 1e-9), movement == "walking" ? " (target ≤ 1.10×)" : ""))
        }
        let placeEvents = try await services[1].geo.placeEventCount()
        return ["### Place checks: a durable update's CPU with \(n * zonesEach + campusPlaces) places (\(n) users, \(zonesEach) zones each, \(campusPlaces) campus places, \(2 * n) place alerts)", "",
                Report.table(rows), ""] + lines + ["- place alerts told in the run (stored for push): \(placeEvents)", ""]
    }

    /// User and system CPU of this process so far, in seconds.
    static func processCPUSeconds() -> Double {
        var usage = rusage()
        getrusage(RUSAGE_SELF.rawValue, &usage)
        func s(_ t: timeval) -> Double { Double(t.tv_sec) + Double(t.tv_usec) / 1e6 }
        return s(usage.ru_utime) + s(usage.ru_stime)
    }

    static func seedPlaces(path: String, homes: Points, campus: Points, zonesEach: Int) throws {
        let db = try DatabaseQueue(path: path)
        let metre = 1 / GeoMath.metresPerDegree
        try db.write { db in
            let zone = try db.makeStatement(sql: """
                INSERT INTO zones (user_id, label, lat, lon, radius_m, privacy, keep_history) VALUES (?, ?, ?, ?, 150, ?, 0)
                """)
            for i in 0..<homes.lat.count {
                for k in 0..<zonesEach {
                    // The first is home (LABEL: 1), the others OFF (3) places 400 m apart.
                    try zone.execute(arguments: [i + 1, k == 0 ? "Home" : "Place \(k)", homes.lat[i] + Double(k) * 400 * metre, homes.lon[i], k == 0 ? 1 : 3])
                }
            }
            let place = try db.makeStatement(sql: "INSERT INTO places (name, kind, lat, lon, radius_m, ring) VALUES (?, 1, ?, ?, 100, '[]')")
            for i in 0..<campus.lat.count { try place.execute(arguments: ["Place \(i)", campus.lat[i], campus.lon[i]]) }
            let access = try db.makeStatement(sql: "INSERT INTO place_alert_access (subject, viewer) VALUES (?, ?)")
            let alert = try db.makeStatement(sql: """
                INSERT INTO place_alerts (viewer, subject, zone_id, place_id, on_arrive, on_leave, created_ms) VALUES (?, ?, ?, ?, 1, 1, 0)
                """)
            let n = homes.lat.count
            for i in 0..<n {
                let subject = i + 1, viewer = (i + 1) % n + 1
                try access.execute(arguments: [subject, viewer])
                try alert.execute(arguments: [viewer, subject, i * zonesEach + 1, 0])                 // their home
                try alert.execute(arguments: [viewer, subject, 0, (i &* 7_919) % campus.lat.count + 1]) // a campus place
            }
        }
    }
}
