import Accounts
import Foundation
import FriensoClient
import FriensoProto
import Gateway
import Geo
import GRDB
public import Logging
import ServiceLifecycle
import SocialReplica
import Synchronization
import Wire

/// `geo`: the spatial index (memory, scaling), nearby and durable location updates in service
/// and through the gateway, and Redis GEOSEARCH/GEOADD on the same data in the same run.
public enum GeoScenario {
    /// What `--parts` may name.
    public static let parts: Set<String> = ["index", "service", "redis", "audit", "places", "fold"]

    public struct Options: Sendable {
        public var users: Int
        public var queries: Int
        public var updates: Int
        public var inFlight: [Int]
        /// Which parts to run: index, service (in service and through the gateway), redis.
        public var parts: Set<String> = GeoScenario.parts
        /// The internal hop of the rows through the gateway: plaintext, curve (one gateway each).
        public var planes: Set<String> = ["plaintext", "curve"]
        public init(users: Int, queries: Int, updates: Int, inFlight: [Int]) {
            self.users = users
            self.queries = queries
            self.updates = updates
            self.inFlight = inFlight
        }
    }

    /// The issue's box: lat 40.6–40.9, lon −74.1…−73.8.
    static let box = (lat: 40.6...40.9, lon: -74.1 ... -73.8)

    struct Points: Sendable {
        var lat: [Double] = []
        var lon: [Double] = []
    }

    static func uniform(_ n: Int, seed: UInt64, scale: Double = 1) -> Points {
        var rng = BenchRandom(seed: seed)
        var p = Points()
        let latSpan = (box.lat.upperBound - box.lat.lowerBound) * scale, lonSpan = (box.lon.upperBound - box.lon.lowerBound) * scale
        for _ in 0..<n {
            p.lat.append(box.lat.lowerBound + rng.unit() * latSpan)
            p.lon.append(box.lon.lowerBound + rng.unit() * lonSpan)
        }
        return p
    }

    /// 40 hot spots (campus, stadium, station…), Gaussian with σ ≈ 400 m, inside the same box.
    static func clustered(_ n: Int, seed: UInt64) -> Points {
        var rng = BenchRandom(seed: seed)
        let centres = (0..<40).map { _ in (box.lat.lowerBound + 0.03 + rng.unit() * 0.24, box.lon.lowerBound + 0.03 + rng.unit() * 0.24) }
        var p = Points()
        let sigma = 400 / GeoMath.metresPerDegree
        for i in 0..<n {
            let c = centres[i % centres.count]
            p.lat.append(c.0 + rng.gaussian() * sigma)
            p.lon.append(c.1 + rng.gaussian() * sigma / cos(c.0 * .pi / 180))
        }
        return p
    }

    public static func run(_ options: Options, logger: Logger) async throws -> String {
        var out: [String] = []
        var quiet = logger
        quiet.logLevel = .warning
        let n = options.users

        // 1. The index alone: memory, one-core k-nearest, scaling from 10k to n at the same density.
        if options.parts.contains("index") {
        var indexRows: [String] = ["| data | users | index B/user | build s | k-nearest q/s (1 core) | p50 µs | p99 µs |",
                                   "|---|---:|---:|---:|---:|---:|---:|"]
        var p50s: [String: Double] = [:]
        for (name, points) in [("uniform", uniform(n, seed: 1)), ("uniform, same density", uniform(max(1, n / 100), seed: 2, scale: 0.1)),
                               ("clustered", clustered(n, seed: 3))] {
            let before = BenchStack.heapInUse()
            let start = ContinuousClock.now
            var index = SpatialIndex()
            for i in 0..<points.lat.count { index.upsert(UInt64(i + 1), lat: points.lat[i], lon: points.lon[i]) }
            let build = BenchStack.seconds(start.duration(to: .now))
            let bytes = Double(BenchStack.heapInUse() - before) / Double(points.lat.count)
            let frozen = index
            let stats = await offPool {
                threadLoad(name: name, threads: 1, count: options.queries, warmup: 1_000) { _, i in
                    let u = (i &* 7_919) % points.lat.count
                    return !frozen.nearest(lat: points.lat[u], lon: points.lon[u], radius: 1_500, limit: 50) { _ in true }.isEmpty
                }
            }
            p50s[name] = stats.micros(50)
            // Below ~100k users the heap's own churn is larger than the index: no figure.
            let memory = points.lat.count >= 100_000 ? String(format: "%.1f", bytes) : "-"
            indexRows.append("| \(name) | \(points.lat.count) | \(memory) | \(String(format: "%.2f", build)) | \(Int(stats.throughput)) | \(Report.f(stats.micros(50))) | \(Report.f(stats.micros(99))) |")
            withExtendedLifetime(index) {}
        }
        out += ["### Spatial index (1,500 m, 50 nearest)", ""] + indexRows
        report(&out)
        if let small = p50s["uniform, same density"], let big = p50s["uniform"] {
            out.append("- p50 at \(n) users / p50 at \(n / 100) users, same density: \(String(format: "%.2f", big / small))× (target ≤ 2×)")
        }
        out.append("")
        }
        if options.parts.contains("audit") { out += try await auditCost(options, logger: quiet) }
        if options.parts.contains("places") { out += try await placeAlertCost(options, logger: quiet) }
        if options.parts.contains("fold") { out += try await foldPeriodCost(options, logger: quiet) }
        guard options.parts.contains("service") || options.parts.contains("redis") else { report(&out); return "" }

        // 2. The service: n users seeded in geo's database, all findable; the state rebuilt at start.
        let dir = BenchStack.scratchDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        try FileManager.default.createDirectory(atPath: "\(dir)/geo", withIntermediateDirectories: true)
        let points = uniform(n, seed: 1)
        var graphState = GraphState()
        for i in 0..<n { graphState.apply(SocialV1.GraphEvent(change: .findableOn, userA: UInt64(i + 1))) }
        let graph = StaticGraph(graphState)
        _ = try GeoService(directory: "\(dir)/geo", graph: graph, publisher: nil, logger: quiet) // creates the schema
        try seedLatest(path: "\(dir)/geo/geo.sqlite", points)
        let loadStart = ContinuousClock.now
        let geo = try GeoService(directory: "\(dir)/geo", graph: graph, publisher: nil, logger: quiet)
        let rebuild = BenchStack.seconds(loadStart.duration(to: .now))
        var rows: [LatencyStats] = []
        var commitLines: [String] = []
        if options.parts.contains("service") {
        rows.append(await offPool {
            threadLoad(name: "in-service nearby (GeoService.nearest)", threads: 1, count: options.queries, warmup: 1_000) { _, i in
                let caller = UInt64((i &* 7_919) % n + 1)
                return (try? geo.nearest(to: caller, radius: 1_500, limit: 50, excludeExchanged: false))?.isEmpty == false
            }
        })
        // Durable updates: many writers, group commit (one transaction and fsync per batch).
        // One millisecond per update, each newer than the seeded fixes (an hour old), so each
        // becomes its user's latest as a phone's would (until 2026-11-23 they started older than
        // the seeded fixes and went to history only: a cheaper path than real updates take), and
        // ending before now (later ones would be refused as from the future).
        precondition(2 * options.updates < 3_500_000, "--updates: at most 1,750,000 for the service part")
        let clock = Atomic<Int64>(WallClock.milliseconds() - 3_600_000 + 1)
        for writers in [64, 256] {
            let before = geo.commitStats
            defer {
                let after = geo.commitStats
                let batches = after.batches - before.batches, updates = after.updates - before.updates
                commitLines.append("- \(writers) writers: \(batches) commits, \(String(format: "%.1f", Double(updates) / Double(max(1, batches)))) updates per commit, mean commit \(String(format: "%.0f", after.meanCommitMicros)) µs (cumulative mean)")
            }
            rows.append(await drive(name: "in-service location updates, durable ack", inFlight: writers, count: options.updates, warmup: 0) {
                let i = BenchRandom.shared(below: n)
                let request = GeoV1.UpdateLocationRequest(latitude: points.lat[i], longitude: points.lon[i], accuracyM: 5,
                                                          deviceTimeMs: clock.add(1, ordering: .relaxed).newValue)
                return (try? await geo.record(request, user: UInt64(i + 1))) != nil
            })
        }

        // 3. Through the gateway, the internal hop in plain TCP and with CurveZMQ as a deployment runs it.
        for curve in [false, true] where options.planes.contains(curve ? "curve" : "plaintext") {
            rows += try await viaGateway(geo, graph: graph, points: points, directory: "\(dir)/\(curve ? "curve" : "plaintext")", curve: curve,
                                         options: options, logger: quiet)
        }
        }
        for suffix in ["", " (CURVE)"] {
            guard let ours = rows.first(where: { $0.name == "location updates via gateway, durable ack\(suffix)" }) else { continue }
            commitLines.append("- durable updates via gateway\(suffix), 64 in flight: \(Int(ours.throughput))/s, p99 \(Report.f(ours.micros(99))) µs (target ≥ 40,000/s)")
        }
        out += ["### Geo service (\(n) users, all findable; state rebuilt from SQLite in \(String(format: "%.1f", rebuild)) s)", "",
                Report.table(rows), ""] + commitLines + [""]
        report(&out)

        // 4. Redis, same points, same queries.
        guard options.parts.contains("redis") else { report(&out); return "" }
        guard let redis = RedisServer.start() else {
            out.append("Redis: `redis-server` not installed (apt-get install redis-server): no baseline in this run.")
            report(&out)
            return ""
        }
        defer { redis.stop() }
        var redisRows: [LatencyStats] = []
        let loaded = await offPool { () -> Bool in
            guard let client = RedisClient(port: redis.port) else { return false }
            for start in stride(from: 0, to: n, by: 10_000) {
                var commands: [[String]] = []
                for batch in stride(from: start, to: min(start + 10_000, n), by: 1_000) {
                    var command = ["GEOADD", "users"]
                    for i in batch..<min(batch + 1_000, n) { command += [String(points.lon[i]), String(points.lat[i]), String(i + 1)] }
                    commands.append(command)
                }
                guard (try? client.pipeline(commands)) != nil else { return false }
            }
            return true
        }
        guard loaded else {
            out.append("Redis: loading failed")
            report(&out)
            return ""
        }
        let redisMemory = await offPool { () -> String in
            guard let client = RedisClient(port: redis.port), case .integer(let bytes)? = try? client.command(["MEMORY", "USAGE", "users", "SAMPLES", "0"]) else { return "?" }
            return String(format: "%.1f", Double(bytes) / Double(n))
        }
        for threads in options.inFlight {
            let port = redis.port
            redisRows.append(await offPool {
                let connection = RedisConnections(port: port)
                return threadLoad(name: "Redis GEOSEARCH FROMLONLAT BYRADIUS 1.5 km ASC COUNT 50", threads: threads,
                                  count: min(options.queries, 20_000), warmup: 10) { t, i in
                    let client = connection(t)
                    let u = (i &* 7_919 &+ t &* 104_729) % n
                    guard case .array(let items?)? = try? client.command(["GEOSEARCH", "users", "FROMLONLAT", String(points.lon[u]), String(points.lat[u]),
                                                                          "BYRADIUS", "1.5", "km", "ASC", "COUNT", "50"]) else { return false }
                    return items.count == 50
                }
            })
        }
        let port = redis.port
        redisRows.append(await offPool {
            let connection = RedisConnections(port: port)
            return threadLoad(name: "Redis GEOADD (no durability: appendonly off)", threads: 50, count: options.updates, warmup: 0) { t, i in
                let client = connection(t)
                let u = (i &* 7_919 &+ t) % n
                return (try? client.command(["GEOADD", "users", String(points.lon[u]), String(points.lat[u]), String(u + 1)])) != nil
            }
        })
        out += ["### Redis \(redisVersion(port: redis.port)) on the same points (MEMORY USAGE: \(redisMemory) B per member)", "", Report.table(redisRows), ""]
        /// The first row whose name starts with `prefix` (is `prefix`, when `exactly`).
        func row(_ prefix: String, _ k: Int? = nil, exactly: Bool = false) -> LatencyStats? {
            (rows + redisRows).first { (exactly ? $0.name == prefix : $0.name.hasPrefix(prefix)) && (k == nil || $0.inFlight == k) }
        }
        for k in options.inFlight {
            for suffix in ["", " (CURVE)"] {
                guard let ours = row("nearby via gateway\(suffix)", k, exactly: true), let theirs = row("Redis GEOSEARCH", k) else { continue }
                out.append("- \(k) in flight: nearby via gateway\(suffix) \(Int(ours.throughput)) q/s vs Redis GEOSEARCH \(Int(theirs.throughput)) q/s: \(String(format: "%.1f", ours.throughput / max(1, theirs.throughput)))× (target ≥ 50× at 64), gateway p99 \(Report.f(ours.micros(99))) µs (target ≤ 2,000)")
            }
        }
        if let ours = row("in-service location updates"), let theirs = row("Redis GEOADD") {
            out.append("- durable updates in service \(Int(ours.throughput))/s vs Redis GEOADD (not durable) at 50 clients \(Int(theirs.throughput))/s (target ≥ 50,000/s and ≥ GEOADD)")
        }
        return out.joined(separator: "\n")
    }

    /// Nearby and durable location updates through a gateway: accounts, `geo`'s host and a
    /// gateway, each with its own reactor and context, and 64 users on a client reactor. With
    /// `curve`, the gateway reaches accounts and geo over CurveZMQ with a keyring each, and both
    /// check every request against the plane policy, as in a deployment (the client's own hop to
    /// the gateway is plain TCP in both, as `frienso-launch` runs it by default).
    static func viaGateway(_ geo: GeoService, graph: StaticGraph, points: Points, directory dir: String, curve: Bool,
                           options: Options, logger quiet: Logger) async throws -> [LatencyStats] {
        let n = options.users, suffix = curve ? " (CURVE)" : ""
        let keys = curve ? try BenchStack.keyrings(["gateway", "accounts", "geo"]) : [:]
        try FileManager.default.createDirectory(atPath: "\(dir)/accounts", withIntermediateDirectories: true)
        var accountsOptions = HostOptions(name: "accounts", endpoint: "tcp://127.0.0.1:*"), geoOptions = HostOptions(name: "geo", endpoint: "tcp://127.0.0.1:*")
        if curve {
            accountsOptions.security = keys["accounts"]!.server()
            geoOptions.security = keys["geo"]!.server()
        }
        var rows: [LatencyStats] = []
        let accounts = try AccountsService(directory: "\(dir)/accounts", config: BenchStack.accountsConfig()).makeHost(
            options: accountsOptions, logger: quiet, context: ZMQContext(), reactor: Reactor(name: "bench-accounts"))
        let geoHost = geo.makeHost(options: geoOptions, logger: quiet, context: ZMQContext(), reactor: Reactor(name: "bench-geo"))
        let clientContext = ZMQContext(), clientReactor = Reactor(name: "bench-client")
        try await withThrowingTaskGroup(of: Void.self) { tasks in
            let backends = ServiceGroup(configuration: .init(services: [.init(service: accounts), .init(service: geoHost)], logger: quiet))
            tasks.addTask { try await backends.run() }
            let (gateway, front) = BenchStack.gateway(services: [
                "accounts": try await accounts.boundEndpoint(), "geo": try await geoHost.boundEndpoint()], logger: quiet, keyring: keys["gateway"])
            tasks.addTask { try await front.run() }
            let gatewayEndpoint = try await gateway.boundEndpoint()
            // 64 users, each placed at a random point among the others.
            var clients: [FriensoClient] = []
            var rng = BenchRandom(seed: 5)
            for k in 0..<64 {
                let (client, id) = try await BenchStack.user("geo_bench_\(k)", number: k, gateway: gatewayEndpoint, logger: quiet,
                                                             context: clientContext, reactor: clientReactor)
                graph.apply(SocialV1.GraphEvent(change: .findableOn, userA: id))
                let u = Int(rng.unit() * Double(n))
                _ = try await client.call(GeoV1.GeoService.updateLocation, GeoV1.UpdateLocationRequest(
                    latitude: points.lat[u], longitude: points.lon[u], accuracyM: 5, deviceTimeMs: WallClock.milliseconds()))
                clients.append(client)
            }
            let all = clients
            await withTaskExecutorPreference(clientReactor) {
                for inFlight in options.inFlight {
                    rows.append(await drive(name: "nearby via gateway\(suffix)", inFlight: inFlight, count: options.queries, warmup: 500) {
                        let reply = try? await all[BenchRandom.shared(below: all.count)].call(GeoV1.GeoService.nearby, GeoV1.NearbyRequest(limit: 50))
                        return reply?.users.count == 50
                    })
                }
                rows.append(await drive(name: "location updates via gateway, durable ack\(suffix)", inFlight: 64, count: options.updates / 2, warmup: 0) {
                    let request = GeoV1.UpdateLocationRequest(latitude: 40.75, longitude: -73.99, accuracyM: 5,
                                                              deviceTimeMs: WallClock.milliseconds())
                    return (try? await all[BenchRandom.shared(below: all.count)].call(GeoV1.GeoService.updateLocation, request)) != nil
                })
            }
            for client in clients { await client.close() }
            await front.triggerGracefulShutdown()
            await backends.triggerGracefulShutdown()
            try await tasks.waitForAll()
        }
        return rows
    }

    /// Friends' locations in process at 64 in flight, with "who saw my location" counted and
    /// without, alternating twice, in one run: the audit's cost as a ratio (target: at most 10%).
    static func auditCost(_ options: Options, logger: Logger) async throws -> [String] {
        let n = min(options.users, 20_000), friendsEach = 50
        let points = uniform(n, seed: 7)
        var graphState = GraphState()
        for i in 0..<n {
            for k in 1...(friendsEach / 2) {
                let j = (i + k) % n
                graphState.apply(SocialV1.GraphEvent(change: .friendshipAdded, userA: UInt64(min(i, j) + 1), userB: UInt64(max(i, j) + 1)))
            }
        }
        let graph = StaticGraph(graphState)
        var services: [(String, GeoService, String)] = []
        for audit in [false, true] {
            let dir = BenchStack.scratchDirectory()
            try FileManager.default.createDirectory(atPath: "\(dir)/geo", withIntermediateDirectories: true)
            var config = GeoConfig()
            config.audit = audit
            _ = try GeoService(directory: "\(dir)/geo", graph: graph, publisher: nil, config: config, logger: logger)
            try seedLatest(path: "\(dir)/geo/geo.sqlite", points)
            services.append((audit ? "audit on" : "audit off", try GeoService(directory: "\(dir)/geo", graph: graph, publisher: nil, config: config, logger: logger), dir))
        }
        defer { for (_, _, dir) in services { try? FileManager.default.removeItem(atPath: dir) } }
        var rows: [LatencyStats] = []
        var rates: [String: [Double]] = [:]
        for round in 0..<2 {
            for (name, geo, _) in services {
                // The flush runs as in the service (every 2 s, on the same cores), so its
                // counting and writing are inside the measurement.
                let flusher = Task {
                    while !Task.isCancelled {
                        try? await Task.sleep(for: .seconds(2))
                        _ = try? await geo.flushAudit()
                    }
                }
                let stats = await drive(name: "friends' locations in process, \(name) (round \(round + 1))", inFlight: 64, count: options.queries,
                                        warmup: 1_000) {
                    geo.locations(seenBy: UInt64(BenchRandom.shared(below: n) + 1)).friends.count == friendsEach
                }
                flusher.cancel()
                rates[name, default: []].append(stats.throughput)
                rows.append(stats)
                _ = try? await geo.flushAudit()
            }
        }
        let on = (rates["audit on"] ?? []).reduce(0, +), off = (rates["audit off"] ?? []).reduce(0, +)
        return ["### Who saw my location: the audit's cost (\(n) users, \(friendsEach) friends each)", "", Report.table(rows), "",
                String(format: "- friends' locations with the audit on / off: %.3f× throughput (target ≥ 0.90×)", on / max(off, 1)), ""]
    }

    /// Prints what is ready (a long run keeps its first sections if stopped).
    static func report(_ lines: inout [String]) {
        FileHandle.standardOutput.write(Data((lines.joined(separator: "\n") + "\n").utf8))
        lines.removeAll()
    }

    /// Writes each point as its user's latest fix, `ageMs` old (an hour unless given).
    static func seedLatest(path: String, _ points: Points, ageMs: Int64 = 3_600_000) throws {
        let db = try DatabaseQueue(path: path)
        let now = WallClock.milliseconds() - ageMs
        try db.write { db in
            let insert = try db.makeStatement(sql: "INSERT INTO latest (user_id, lat, lon, accuracy, device_ms, received_ms) VALUES (?, ?, ?, 10, ?, ?)")
            for i in 0..<points.lat.count {
                try insert.execute(arguments: [i + 1, points.lat[i], points.lon[i], now, now])
            }
        }
    }

    static func redisVersion(port: Int) -> String {
        guard let client = RedisClient(port: port), case .bulk(let bytes?)? = try? client.command(["INFO", "server"]) else { return "" }
        let info = String(decoding: bytes, as: UTF8.self)
        return info.split(separator: "\r\n").first { $0.hasPrefix("redis_version:") }.map { String($0.dropFirst(14)) } ?? ""
    }
}
