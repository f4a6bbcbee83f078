import Foundation
import FriensoProto
import Geo
import Logging
import SocialReplica
import Synchronization
import Wire

extension GeoScenario {
    /// Durable updates in process at 64 writers with the history fold's period at 10 s (the
    /// default) and at 30 s, alternating twice in one run: with many users, a sweep rewrites
    /// most of `latest`'s pages whatever its length, so a longer period writes each page less
    /// often. Each round should last several periods.
    static func foldPeriodCost(_ options: Options, logger: Logger) async throws -> [String] {
        let n = options.users
        let points = uniform(n, seed: 21)
        let graph = StaticGraph(GraphState())
        var services: [(name: String, geo: GeoService, dir: String)] = []
        for seconds in [10, 30] {
            let dir = BenchStack.scratchDirectory()
            try FileManager.default.createDirectory(atPath: "\(dir)/geo", withIntermediateDirectories: true)
            var config = GeoConfig()
            config.foldPeriod = .seconds(seconds)
            _ = try GeoService(directory: "\(dir)/geo", graph: graph, publisher: nil, config: config, logger: logger) // the schema
            try seedLatest(path: "\(dir)/geo/geo.sqlite", points, ageMs: 86_400_000)
            services.append(("fold every \(seconds) s", try GeoService(directory: "\(dir)/geo", graph: graph, publisher: nil, config: config, logger: logger), dir))
        }
        defer { for s in services { try? FileManager.default.removeItem(atPath: s.dir) } }
        precondition(4 * options.updates < 86_000_000, "--updates: at most 21,500,000 for this part")
        // Newer than the seeded fixes (a day old): every update becomes its user's latest.
        let clock = Atomic<Int64>(WallClock.milliseconds() - 86_400_000 + 1)
        var rows: [LatencyStats] = []
        var lines: [String] = []
        var cpu: [String: (seconds: Double, updates: Int)] = [:]
        for round in 0..<2 {
            for (name, geo, _) in services {
                let before = (stats: geo.commitStats, cpu: processCPUSeconds())
                let stats = await drive(name: "durable updates in process, \(name) (round \(round + 1))", inFlight: 64, count: options.updates, warmup: 0) {
                    let i = BenchRandom.shared(below: n)
                    let request = GeoV1.UpdateLocationRequest(latitude: points.lat[i], longitude: points.lon[i], accuracyM: 5,
                                                              deviceTimeMs: clock.add(1, ordering: .relaxed).newValue)
                    return (try? await geo.record(request, user: UInt64(i + 1))) != nil
                }
                cpu[name, default: (0, 0)].seconds += processCPUSeconds() - before.cpu
                cpu[name, default: (0, 0)].updates += Int(stats.count)
                let after = geo.commitStats
                let batches = after.batches - before.stats.batches, updates = after.updates - before.stats.updates
                lines.append("- \(name), round \(round + 1): \(batches) commits, \(String(format: "%.1f", Double(updates) / Double(max(1, batches)))) updates per commit")
                rows.append(stats)
            }
        }
        for (name, _, _) in services {
            let c = cpu[name] ?? (0, 0)
            lines.append(String(format: "- \(name): %.1f µs of CPU per durable update, whole process", c.seconds * 1e6 / Double(max(1, c.updates))))
        }
        return ["### The history fold's period (\(n) users, 64 writers)", "", Report.table(rows), ""] + lines + [""]
    }
}
