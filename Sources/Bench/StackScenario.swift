import Foundation
import FriensoClient
import FriensoProto
import Glibc
import Launcher
import PostgresHarness
public import Logging
import ServiceKit
import Synchronization
import Wire

/// The whole deployment as `deploy/up` runs it (`frienso-launch` and six processes), driven
/// through the gateway by a mixed workload: location updates, nearby, friends' locations,
/// check-ins and helpNow (raised and resolved). Reports latency per operation, CPU and RSS per
/// service, and Redis GEOADD/GEOSEARCH on the same users in the same run.
public enum StackScenario {
    public struct Options: Sendable {
        public var users = 120
        public var inFlight = 64
        public var seconds = 20
        /// Folder holding `frienso-launch` and the services.
        public var binDirectory: String
        /// Mix in percent: update, nearby, friends' locations, check-in, helpNow.
        public var mix: [Int] = [50, 15, 20, 10, 5]
        /// The internal planes to run, one deployment each, in order: `curve` (as deployed) and
        /// `plaintext` (`--insecure-plaintext`), to measure what CurveZMQ costs.
        public var planes: [String] = ["curve", "plaintext"]
        /// Where the services keep their data, one deployment each per plane: `sqlite` (as
        /// `deploy/up`), `postgres` (one instance each, on a PostgreSQL server the bench starts),
        /// `postgres-x2` (two instances of each on it), `postgres-socket` (one instance each,
        /// connected through the server's Unix socket instead of TCP on the loopback).
        public var storages: [String] = ["sqlite"]
        public static let knownStorages = ["sqlite", "postgres", "postgres-x2", "postgres-socket"]
        /// - Parameter binDirectory: nil for the folder of the running executable.
        public init(binDirectory: String?) { self.binDirectory = binDirectory ?? Executables.folder }
    }

    /// Each kind of operation's name in the report and the method it calls (`perform`).
    static let kinds = [("location update", GeoV1.GeoService.updateLocation.fullName), ("nearby", GeoV1.GeoService.nearby.fullName),
                        ("friends' locations", GeoV1.GeoService.friendsLocations.fullName), ("check-in", GeoV1.GeoService.checkIn.fullName),
                        ("helpNow raise", AlertsV1.AlertsService.raiseHelpNow.fullName),
                        ("helpNow resolve", AlertsV1.AlertsService.resolveHelpNow.fullName)]
    static let operations = kinds.map(\.0)

    public static func run(_ options: Options, logger: Logger) async throws -> String {
        var out: [String] = []
        var rates: [(plane: String, storage: String, rate: Double, p99: [String: Double])] = []
        let postgres = options.storages.contains { $0 != "sqlite" }
            ? try await Task.detached { try LocalPostgresServer.start(prefix: "frienso-bench-stack-pg") }.value : nil
        defer { postgres?.stop() }
        for (index, plane) in options.planes.enumerated() {
            for (storageIndex, storage) in options.storages.enumerated() {
                let run = try await run(options, plane: plane, storage: storage, postgres: postgres, redis: index == 0 && storageIndex == 0, logger: logger)
                out.append(run.report)
                rates.append((plane, storage, run.rate, run.p99))
            }
        }
        if let curve = rates.first(where: { $0.plane == "curve" })?.rate, let plain = rates.first(where: { $0.plane == "plaintext" })?.rate, plain > 0 {
            out += ["", "- CURVE on every internal hop: \(Int(curve)) ops/s vs \(Int(plain)) plaintext in the same run: \(String(format: "%.1f", (1 - curve / plain) * 100))% fewer (target: within 15%)"]
        }
        if options.storages.count > 1 {
            out += ["", "| storage (\(options.planes[0])) | ops/s | vs the first | " + operations.map { "p99 \($0) ms" }.joined(separator: " | ") + " |",
                    "|---|---:|---:|" + String(repeating: "---:|", count: operations.count)]
            let first = rates.first?.rate ?? 1
            for r in rates where r.plane == options.planes[0] {
                out.append("| \(r.storage) | \(Int(r.rate)) | \(String(format: "%.2f", r.rate / max(first, 1)))× | "
                           + operations.map { String(format: "%.1f", (r.p99[$0] ?? 0) / 1_000) }.joined(separator: " | ") + " |")
            }
        }
        return out.joined(separator: "\n")
    }

    /// One deployment on `plane` and `storage` under the load.
    /// - Returns: the report, the operations a second and each operation's p99 (µs).
    static func run(_ options: Options, plane: String, storage: String, postgres: LocalPostgresServer?, redis: Bool,
                    logger: Logger) async throws -> (report: String, rate: Double, p99: [String: Double]) {
        let dir = BenchStack.scratchDirectory()
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        var database: StorageSection?
        if storage != "sqlite", let postgres {
            let name = try postgres.createDatabase("stack")
            try postgres.password.write(toFile: "\(dir)/postgres-password", atomically: true, encoding: .utf8)
            chmod("\(dir)/postgres-password", 0o600)
            let socket = storage == "postgres-socket" ? "&host=\(postgres.socketDirectory)" : ""
            database = StorageSection(kind: "postgres", url: "postgres://\(LocalPostgresServer.user)@127.0.0.1:\(postgres.port)/\(name)?sslmode=disable\(socket)",
                                      passwordFile: "\(dir)/postgres-password")
        }
        let deployment = try Deployment.start(in: dir, binDirectory: options.binDirectory, plaintext: plane == "plaintext", storage: database,
                                              instances: storage == "postgres-x2" ? 2 : 1, postgres: storage == "sqlite" ? nil : postgres)
        defer { deployment.stop() }
        let storageText = switch storage {
        case "postgres": "every service on PostgreSQL"
        case "postgres-x2": "two instances of every service, on PostgreSQL"
        case "postgres-socket": "every service on PostgreSQL, through its Unix socket"
        default: "SQLite"
        }
        var out = ["## frienso-bench stack (\(plane == "plaintext" ? "plaintext internal plane" : "CurveZMQ on every internal hop"), \(storageText)): \(options.users) users, \(options.inFlight) in flight, \(options.seconds) s, mix \(options.mix) (update, nearby, friends, check-in, helpNow)", ""]
        try await deployment.awaitReady(logger: logger)

        // Setup (not measured): users, friendships (each with the next five), circles, first fixes.
        let points = GeoScenario.uniform(options.users, seed: 7, scale: 0.05) // about 1.7 × 1.3 km: a campus
        let people = try await setUp(options.users, gateway: deployment.gateway, points: points, logger: logger)

        // Measured: a closed loop per worker, each owning every inFlight-th user (so one user's
        // helpNow is never raised twice at once).
        let before = deployment.counters()
        let metricsBefore = deployment.metricsText()
        let started = ContinuousClock.now
        let until = started.advanced(by: .seconds(options.seconds))
        let weights = options.mix
        // The workers run on the clients' reactor, as the other scenarios' load loops do (a
        // client built on Wire would): a call is sent and its reply resumes the worker on the
        // reactor's thread, with no hop to the cooperative pool and back. `FRIENSO_BENCH_LOAD=pool`
        // runs them on the pool, as before 2026-11-25 (A/B: the load generator's own CPU).
        let executor: (any TaskExecutor)? = ProcessInfo.processInfo.environment["FRIENSO_BENCH_LOAD"] == "pool" ? nil : Reactor.shared
        let parts = await withTaskExecutorPreference(executor) { await withTaskGroup(of: [LatencySamples].self) { group in
            for worker in 0..<options.inFlight {
                group.addTask {
                    var stats = operations.map { _ in LatencySamples() }
                    let mine = stride(from: worker % people.count, to: people.count, by: options.inFlight).map { people[$0] }
                    var random = BenchRandom(seed: UInt64(worker) &+ 1)
                    var openAlerts: [Int: UInt64] = [:]
                    var n = 0
                    while ContinuousClock.now < until {
                        let person = mine[n % mine.count]
                        n += 1
                        let pick = Int(random.next() % 100)
                        var kind = 0, acc = weights[0]
                        while pick >= acc && kind < weights.count - 1 { kind += 1; acc += weights[kind] }
                        await perform(kind, person, &stats, &random, &openAlerts, points)
                    }
                    return stats
                }
            }
            var merged = operations.map { LatencyStats(name: $0, inFlight: options.inFlight) }
            for await part in group { for i in merged.indices { merged[i].merge(part[i]) } }
            return merged
        } }
        let elapsed = started.duration(to: .now)
        let after = deployment.counters()
        let metricsAfter = metricsBefore == nil ? nil : deployment.metricsText()
        let commits = metricsBefore.flatMap { before in
            metricsAfter.map { CommitCounts.window(before: CommitCounts.parse(before), after: CommitCounts.parse($0)) }
        }
        let calls = metricsBefore.flatMap { before in
            metricsAfter.map { PeerCallTimes.window(before: PeerCallTimes.parse(before), after: PeerCallTimes.parse($0)) }
        }
        var rows = parts
        for i in rows.indices { rows[i].elapsed = elapsed }
        let total = rows.reduce(0) { $0 + Int($1.count) }, errors = rows.reduce(0) { $0 + $1.errors }
        out += [Report.table(rows, record: false), "",
                "- all operations: \(Int(Double(total) / BenchStack.seconds(elapsed))) ops/s, \(errors) errors (target: 10,000 ops/s with p99 ≤ 10 ms for every type, 0 errors)", ""]
        let resources = deployment.resources(before: before, after: after, seconds: BenchStack.seconds(elapsed), operations: total)
        out += resources.lines
        out += ["", Self.commitLine(commits, operations: total)]
        out += ["", calls?.line ?? "- calls between services: not read (the launcher's metrics did not answer)"]
        if let calls { out.append(calls.failureLine) }
        let stages = zip(rows, kinds).map { row, kind in
            PeerCallTimes.Operation(name: row.name, method: kind.1, clientMilliseconds: row.histogram.mean / 1e6)
        }
        if let calls { out.append(calls.stageLine(stages.filter { $0.clientMilliseconds > 0 })) }
        let perOperation = { (seconds: Double) in seconds / Double(max(1, total)) * 1e6 }
        var metrics = [
            "ops_per_second": Double(total) / BenchStack.seconds(elapsed),
            "cpu_us_per_op_services": perOperation(resources.windows["all services"]?.cpuSeconds ?? 0),
            "cpu_us_per_op_with_load_generator": perOperation((resources.windows["all services"]?.cpuSeconds ?? 0)
                                                              + (resources.windows["bench client"]?.cpuSeconds ?? 0)),
        ]
        // Each service's share, so that a chart shows where a change moved the CPU.
        for service in deployment.members + ["postgresql"] {
            metrics["cpu_us_per_op_\(service)"] = perOperation(resources.windows[service]?.cpuSeconds ?? 0)
            if service != "postgresql" {
                metrics["cpu_us_per_op_\(service)_reactor"] = perOperation(resources.windows[service]?.reactorSeconds ?? 0)
                metrics["cpu_us_per_op_\(service)_zmq_io"] = perOperation(resources.windows[service]?.zmqIOSeconds ?? 0)
            }
        }
        // Counts the VM's speed does not scale: context switches per operation, and the faults
        // that read from disk in the window (a run with many was stalled by the VM's paging).
        for (name, window) in resources.windows {
            let key = name.replacingOccurrences(of: " ", with: "_")
            metrics["wakeups_per_op_\(key)"] = Double(window.voluntary) / Double(max(1, total))
            metrics["preemptions_per_op_\(key)"] = Double(window.involuntary) / Double(max(1, total))
            metrics["major_faults_\(key)"] = Double(window.majorFaults)
            metrics["kib_written_per_op_\(key)"] = Double(window.writtenBytes) / 1_024 / Double(max(1, total))
            metrics["write_calls_per_op_\(key)"] = Double(window.writeCalls) / Double(max(1, total))
        }
        metrics["peer_calls_not_ok"] = calls.map { $0.failed.values.reduce(0, +) }
        for (key, timed) in calls?.calls ?? [:] {
            metrics["peer_call_ms_\(key.service)_\(key.method)"] = timed.meanMilliseconds
            if let inService = calls?.answeredMilliseconds(key.method) { metrics["peer_answer_ms_\(key.service)_\(key.method)"] = inService }
        }
        // Each operation's mean at each stage (the line above), for charts.
        for op in stages where op.clientMilliseconds > 0 {
            let key = op.method.replacingOccurrences(of: ".", with: "_")
            metrics["op_ms_client_\(key)"] = op.clientMilliseconds
            if let gateway = calls?.answeredMilliseconds(op.method, in: "gateway") { metrics["op_ms_gateway_\(key)"] = gateway }
            if let service = calls?.answeredMilliseconds(op.method) { metrics["op_ms_service_\(key)"] = service }
        }
        for (service, c) in commits ?? [:] {
            metrics["commits_per_op_\(service)"] = c.perOperation(total)
            metrics["items_per_commit_\(service)"] = c.itemsPerCommit
            metrics["commit_ms_\(service)"] = c.meanMilliseconds
        }
        Results.shared.record(section: storage == "sqlite" ? "stack \(plane)" : "stack \(plane) \(storage)", rows: rows, metrics: metrics)
        for person in people { await person.client.close() }
        if redis { out += [""] + (await redisBaseline(points, threads: options.inFlight, seconds: options.seconds)) }
        let p99 = Dictionary(rows.map { ($0.name, $0.micros(99)) }, uniquingKeysWith: { a, _ in a })
        return (out.joined(separator: "\n"), Double(total) / BenchStack.seconds(elapsed), p99)
    }

    /// The window's group commits per operation, by service: each one transaction and (on SQLite)
    /// one `fdatasync`, with the items it carried (a mutation, a reply's save, a delivery pass's
    /// record, or one batch of geo's location updates) and how long it took on average.
    static func commitLine(_ commits: [String: CommitCounts]?, operations: Int) -> String {
        guard let commits else { return "- group commits: not read (the launcher's metrics did not answer)" }
        guard !commits.isEmpty else { return "- group commits: none in the window" }
        let parts = commits.sorted { $0.key < $1.key }.map { service, c in
            "\(service) \(String(format: "%.3f", c.perOperation(operations))) (\(String(format: "%.2f", c.itemsPerCommit)) items each, "
                + "\(String(format: "%.2f", c.meanMilliseconds)) ms)"
        }
        return "- group commits per operation (each service's `frienso_group_commit_*`): " + parts.joined(separator: ", ")
    }

    struct Person: Sendable {
        let id: UInt64
        let index: Int
        let client: FriensoClient
    }

    /// One operation of `kind` as `person`. `openAlerts`: the alerts the worker's people raised
    /// and have not resolved (by person index; only the owning worker touches them). Runs where
    /// its worker runs (`nonisolated(nonsending)`): no hop to the generic executor a call, each
    /// of which costs a look at the task's executor preference under its lock (item 143).
    static nonisolated(nonsending) func perform(_ kind: Int, _ person: Person, _ stats: inout [LatencySamples], _ random: inout BenchRandom,
                        _ openAlerts: inout [Int: UInt64], _ points: GeoScenario.Points) async {
        let c = person.client
        let i = person.index
        let t0 = Moment.now
        var slot = kind
        let ok: Bool
        do {
            switch kind {
            case 0:
                _ = try await c.call(GeoV1.GeoService.updateLocation, GeoV1.UpdateLocationRequest(
                    latitude: points.lat[i] + (random.unit() - 0.5) * 1e-3, longitude: points.lon[i] + (random.unit() - 0.5) * 1e-3,
                    accuracyM: 10, deviceTimeMs: Int64(Date().timeIntervalSince1970 * 1000)))
            case 1:
                _ = try await c.call(GeoV1.GeoService.nearby, GeoV1.NearbyRequest(radiusM: 1_500, limit: 50))
            case 2:
                _ = try await c.call(GeoV1.GeoService.friendsLocations, GeoV1.FriendsLocationsRequest())
            case 3:
                _ = try await c.call(GeoV1.GeoService.checkIn, GeoV1.CheckInRequest(placeName: "Bench place \(random.next() % 50)"), mutation: true)
            default:
                if let open = openAlerts[i] {
                    slot = 5
                    _ = try await c.call(AlertsV1.AlertsService.resolveHelpNow, AlertsV1.ResolveHelpNowRequest(alertId: open), mutation: true)
                    openAlerts[i] = nil
                } else {
                    // With the phone's own fix, as the web app and the CLI send it (geo names its place).
                    let fix = AlertsV1.DeviceFix(latitude: points.lat[i], longitude: points.lon[i], accuracyM: 10,
                                                 deviceTimeMs: Int64(Date().timeIntervalSince1970 * 1000))
                    let raised = try await c.call(AlertsV1.AlertsService.raiseHelpNow, AlertsV1.RaiseHelpNowRequest(message: "bench", fix: fix),
                                                  mutation: true)
                    openAlerts[i] = raised.alert?.alertId
                }
            }
            ok = true
        } catch {
            ok = false
        }
        stats[slot].record(nanoseconds: t0.nanoseconds(to: .now))
        if !ok { stats[slot].errors += 1 }
    }

    static func setUp(_ n: Int, gateway: String, points: GeoScenario.Points, logger: Logger) async throws -> [Person] {
        let people = try await withThrowingTaskGroup(of: Person.self) { group in
            var people: [Person] = []
            for i in 0..<n {
                if i >= 8 { if let p = try await group.next() { people.append(p) } }
                group.addTask {
                    let (client, id) = try await BenchStack.user("bench_\(i)", number: i, gateway: gateway, logger: logger,
                                                                 context: .shared, reactor: .shared)
                    return Person(id: id, index: i, client: client)
                }
            }
            for try await p in group { people.append(p) }
            return people.sorted { $0.index < $1.index }
        }
        try await concurrently(people, width: 16) { p in
            for k in 1...5 where p.index + k < n {
                let other = people[p.index + k]
                let sent = try await p.client.call(SocialV1.SocialService.sendFriendRequest, SocialV1.SendFriendRequestRequest(userId: other.id), mutation: true)
                _ = try await other.client.call(SocialV1.SocialService.respondToFriendRequest, SocialV1.RespondToFriendRequestRequest(
                    requestId: sent.request?.requestId ?? 0, action: .accept), mutation: true)
            }
        }
        try await concurrently(people, width: 16) { p in
            if p.index + 1 < n {
                let member = people[p.index + 1]
                _ = try await p.client.call(SocialV1.SocialService.addToCircle, SocialV1.AddToCircleRequest(userId: member.id), mutation: true)
                _ = try await member.client.call(SocialV1.SocialService.respondToCircleRequest, SocialV1.RespondToCircleRequestRequest(
                    ownerUserId: p.id, action: .accept), mutation: true)
            }
            _ = try await p.client.call(SocialV1.SocialService.setFindable, SocialV1.SetFindableRequest(findable: true), mutation: true)
            _ = try await p.client.call(GeoV1.GeoService.updateLocation, GeoV1.UpdateLocationRequest(
                latitude: points.lat[p.index], longitude: points.lon[p.index], accuracyM: 10, deviceTimeMs: Int64(Date().timeIntervalSince1970 * 1000)))
        }
        return people
    }

    static func concurrently(_ people: [Person], width: Int, _ body: @escaping @Sendable (Person) async throws -> Void) async throws {
        try await withThrowingTaskGroup(of: Void.self) { group in
            for (i, p) in people.enumerated() {
                if i >= width { try await group.next() }
                group.addTask { try await body(p) }
            }
            try await group.waitForAll()
        }
    }

    /// Redis on the same users: GEOADD for updates and GEOSEARCH for nearby, in the same mix
    /// proportions, from as many blocking connections as we had in flight.
    static func redisBaseline(_ points: GeoScenario.Points, threads: Int, seconds: Int) async -> [String] {
        guard let redis = RedisServer.start() else { return ["Redis: `redis-server` not installed (apt-get install redis-server): no baseline in this run."] }
        defer { redis.stop() }
        let n = points.lat.count, port = redis.port
        guard let loader = RedisClient(port: port) else { return ["Redis: cannot connect"] }
        var add = ["GEOADD", "users"]
        for i in 0..<n { add += [String(points.lon[i]), String(points.lat[i]), String(i + 1)] }
        _ = try? loader.command(add)
        let count = 20_000
        let rows = await offPool { () -> [LatencyStats] in
            let connection = RedisConnections(port: port)
            let adds = threadLoad(name: "Redis GEOADD (appendonly off)", threads: threads, count: count) { t, i in
                let u = (i &* 7_919 &+ t) % n
                return (try? connection(t).command(["GEOADD", "users", String(points.lon[u]), String(points.lat[u]), String(u + 1)])) != nil
            }
            let searches = threadLoad(name: "Redis GEOSEARCH 1.5 km ASC COUNT 50", threads: threads, count: count) { t, i in
                let u = (i &* 7_919 &+ t &* 104_729) % n
                return (try? connection(t).command(["GEOSEARCH", "users", "FROMLONLAT", String(points.lon[u]), String(points.lat[u]),
                                                     "BYRADIUS", "1.5", "km", "ASC", "COUNT", "50"])) != nil
            }
            return [adds, searches]
        }
        return ["### Redis \(GeoScenario.redisVersion(port: port)) baseline, same users, \(threads) connections", "", Report.table(rows)]
    }
}
