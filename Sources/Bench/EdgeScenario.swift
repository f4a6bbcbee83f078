import Foundation
import FriensoClient
import FriensoProto
import HTTPTypes
import HummingbirdWSClient
public import Logging
import ServiceKit
import Synchronization
import Wire

/// `frienso-bench edge`: the HTTP edge beside the ZeroMQ gateway, in one deployment.
/// - nearby through each front door at the same number of connections (wrk for HTTP, the
///   ZeroMQ client for the gateway), as ratios within the run;
/// - live events over WebSocket: `watchers` clients, each watching 3 of `movers` people who move
///   once a second; every event accounted for (lost, duplicated), and the edge's memory per
///   connection.
public enum EdgeScenario {
    public struct Options: Sendable {
        public var users: Int
        public var connections: Int
        public var seconds: Int
        public var watchers: Int
        public var movers: Int
        public var moves: Int
        public var binDirectory: String

        /// - Parameter binDirectory: nil for the folder of the running executable.
        public init(users: Int, connections: Int, seconds: Int, watchers: Int, movers: Int, moves: Int, binDirectory: String?) {
            self.users = users
            self.connections = connections
            self.seconds = seconds
            self.watchers = watchers
            self.movers = movers
            self.moves = moves
            self.binDirectory = binDirectory ?? Executables.folder
        }
    }

    public static func run(_ options: Options, parts: Set<String>, logger: Logger) async throws -> String {
        let dir = BenchStack.scratchDirectory()
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let deployment = try Deployment.start(in: dir, binDirectory: options.binDirectory)
        defer { deployment.stop() }
        try await deployment.awaitReady(logger: logger)
        var out = ["## frienso-bench edge: the HTTP edge beside the ZeroMQ gateway, one deployment (CurveZMQ inside)", ""]
        let count = max(options.users, options.watchers + options.movers)
        let points = GeoScenario.uniform(count, seed: 11, scale: 0.05)
        let people = try await StackScenario.setUp(count, gateway: deployment.gateway, points: points, logger: logger)
        if parts.contains("nearby") {
            out += try await nearby(options, people: people, deployment: deployment, directory: dir)
        }
        if parts.contains("events") {
            out += ["", try await events(options, people: people, deployment: deployment, logger: logger)]
        }
        for p in people { await p.client.close() }
        return out.joined(separator: "\n")
    }

    // MARK: nearby

    static func nearby(_ options: Options, people: [StackScenario.Person], deployment: Deployment, directory: String) async throws -> [String] {
        let asker = people[0]
        let request = GeoV1.NearbyRequest(radiusM: 1_500, limit: 50)
        // ZeroMQ: one client per connection, each its own user (as wrk's connections share one).
        let clients = Array(people.prefix(options.connections))
        let perLoop = 2_000
        let zmq = await drive(name: "nearby via the gateway (ZeroMQ)", inFlight: clients.count, count: perLoop * clients.count, warmup: 200) {
            let c = clients[BenchRandom.shared(below: clients.count)].client
            return (try? await c.call(GeoV1.GeoService.nearby, request)) != nil
        }
        let before = deployment.counters()
        guard let http = try await Wrk.run(url: "\(deployment.edge)/v1/geo/Nearby", body: request.jsonValue.rendered(),
                                           token: asker.client.token, connections: options.connections, seconds: options.seconds,
                                           directory: directory) else {
            return ["", Report.table([zmq]), "", "wrk is not installed (`deploy/install-deps --for-bench`, or apt-get install wrk): no HTTP figures in this run."]
        }
        let after = deployment.counters()
        let edgeSeconds = Double((after["edge"]?.ticks ?? 0) - (before["edge"]?.ticks ?? 0)) / Double(sysconf(Int32(_SC_CLK_TCK)))
        let throughput = http.requestsPerSecond / max(1, zmq.throughput)
        let tail = http.p99Us / max(1, zmq.micros(99))
        Results.shared.record(section: "nearby", rows: [zmq], metrics: [
            "http_requests_per_second": http.requestsPerSecond, "http_p50_us": http.p50Us, "http_p99_us": http.p99Us,
            "http_errors": Double(http.errors), "ratio_throughput": throughput, "ratio_p99": tail,
            "edge_cpu_us_per_request": edgeSeconds / max(1, http.requestsPerSecond * Double(options.seconds)) * 1e6,
        ])
        return [
            "### nearby (radius 1.5 km, limit 50) at \(options.connections) connections", "",
            "| front door | requests | p50 µs | p99 µs | req/s | errors |", "|---|---:|---:|---:|---:|---:|",
            "| gateway (ZeroMQ, FriensoClient) | \(zmq.count) | \(Report.f(zmq.micros(50))) | \(Report.f(zmq.micros(99))) | \(Int(zmq.throughput)) | \(zmq.errors) |",
            "| edge (HTTP/1.1 JSON, wrk) | \(http.requests) | \(Report.f(http.p50Us)) | \(Report.f(http.p99Us)) | \(Int(http.requestsPerSecond)) | \(http.errors) |",
            "",
            "- edge ÷ gateway: \(String(format: "%.2f", throughput))× the requests a second (target ≥ 0.66), \(String(format: "%.2f", tail))× the p99 (target ≤ 1.5)",
            "- the edge's CPU per HTTP request: \(String(format: "%.0f", edgeSeconds / max(1, http.requestsPerSecond * Double(options.seconds)) * 1e6)) µs",
        ]
    }

    // MARK: events

    /// Counts what each watcher received: per mover, the device times seen (each move has its own).
    final class Tally: Sendable {
        struct State {
            var received: [Int: [UInt64: [Int64]]] = [:] // watcher → mover → device times
            var gaps = 0
            var connected = 0
            /// Sockets the edge closed before the run ended (a watcher does not reconnect: all it
            /// would have received after is counted lost).
            var closed = 0
        }
        let state = Mutex(State())
    }

    static func events(_ options: Options, people: [StackScenario.Person], deployment: Deployment, logger: Logger) async throws -> String {
        let movers = Array(people.prefix(options.movers))
        let watchers = Array(people.dropFirst(options.movers).prefix(options.watchers))
        // Watcher i follows movers 3i, 3i+1, 3i+2 (mod movers): friends, so each sees their moves.
        @Sendable func followed(_ i: Int) -> [StackScenario.Person] { (0..<3).map { movers[(3 * i + $0) % movers.count] } }
        try await StackScenario.concurrently(watchers, width: 32) { w in
            let i = w.index - options.movers
            for m in followed(i) {
                let sent = try await w.client.call(SocialV1.SocialService.sendFriendRequest, SocialV1.SendFriendRequestRequest(userId: m.id), mutation: true)
                if sent.becameFriends { continue }
                _ = try await m.client.call(SocialV1.SocialService.respondToFriendRequest, SocialV1.RespondToFriendRequestRequest(
                    requestId: sent.request?.requestId ?? 0, action: .accept), mutation: true)
            }
        }
        let edgePID = deployment.pid(of: "edge").map { String($0) } ?? "?"
        let rssBefore = Double(Deployment.status(edgePID, "VmRSS")) ?? 0
        let tally = Tally()
        let url = deployment.edge.replacingOccurrences(of: "http://", with: "ws://") + "/v1/events"
        let moverIDs = Set(movers.map(\.id))
        let sockets = Task {
            await withTaskGroup(of: Void.self) { group in
                for w in watchers {
                    group.addTask { await watch(url: url, token: w.client.token, watcher: w.index, movers: moverIDs, tally: tally, logger: logger) }
                }
            }
        }
        defer { sockets.cancel() }
        let until = ContinuousClock.now.advanced(by: .seconds(60))
        while tally.state.withLock({ $0.connected }) < watchers.count, ContinuousClock.now < until {
            try await Task.sleep(for: .milliseconds(50)) // waiting for connections, not measuring
        }
        let connected = tally.state.withLock { $0.connected }
        let rssAfter = Double(Deployment.status(edgePID, "VmRSS")) ?? 0
        // Subscriptions reach the publishers, and the new friendships geo's graph replica,
        // asynchronously: rounds of moves, not counted, until every watcher has heard from each
        // of its three movers. Device times after the fixes people were made with (a move older
        // than a person's latest fix is history, not news: nobody hears of it), the measured
        // moves' after every round's.
        let start = Int64(Date().timeIntervalSince1970 * 1000)
        let measured = start + 10_000
        var round: Int64 = 0
        var warmed = 0
        while ContinuousClock.now < until {
            round += 1
            try await moveAll(movers, deviceMs: start + round, points: 0.001 * Double(round))
            try await Task.sleep(for: .milliseconds(300))
            let heard = tally.state.withLock { s in
                watchers.filter { w in followed(w.index - options.movers).allSatisfy { !(s.received[w.index]?[$0.id]?.isEmpty ?? true) } }.count
            }
            warmed = heard
            if heard == watchers.count { break }
        }
        tally.state.withLock { $0.received = [:]; $0.gaps = 0 }
        // Measured: each mover moves once a second, `moves` times, with device times start + k.
        let moved = ContinuousClock.now
        for k in 1...options.moves {
            let tick = moved.advanced(by: .seconds(k - 1))
            try await Task.sleep(until: tick, clock: .continuous)
            try await moveAll(movers, deviceMs: measured + Int64(k), points: 0.0001 * Double(k))
        }
        // Then until every expected event arrived, or 10 s of nothing more. Only the expected
        // ones count: a watcher also hears from movers it is not counted for (people are made
        // friends in a chain), and counting those ended this wait before the last move's events
        // were in (reported lost).
        let lastMove = ContinuousClock.now
        let expected = watchers.count * 3 * options.moves
        let wanted = Set((1...options.moves).map { measured + Int64($0) })
        @Sendable func expectedIn(_ s: Tally.State) -> Int {
            watchers.reduce(0) { sum, w in
                sum + followed(w.index - options.movers).reduce(0) { $0 + (s.received[w.index]?[$1.id] ?? []).count { wanted.contains($0) } }
            }
        }
        var last = -1, quietSince = ContinuousClock.now, lastArrival = lastMove
        while ContinuousClock.now < quietSince.advanced(by: .seconds(10)) {
            let got = tally.state.withLock { expectedIn($0) }
            if got != last { last = got; quietSince = .now; lastArrival = .now }
            if got >= expected { break }
            try await Task.sleep(for: .milliseconds(100))
        }
        let tailMs = (lastArrival - lastMove).wholeMilliseconds
        let state = tally.state.withLock { $0 }
        var lost = 0, duplicated = 0, delivered = 0
        var lossesByWatcher: [Int: Int] = [:], lossesByMove: [Int64: Int] = [:]
        for w in watchers {
            for m in followed(w.index - options.movers) {
                let times = state.received[w.index]?[m.id] ?? []
                let seen = times.filter { wanted.contains($0) }
                delivered += seen.count
                duplicated += seen.count - Set(seen).count
                let missed = wanted.subtracting(seen)
                lost += missed.count
                if !missed.isEmpty { lossesByWatcher[w.index, default: 0] += missed.count }
                for time in missed { lossesByMove[time - measured, default: 0] += 1 }
            }
        }
        let losses = lost == 0 ? "" : "; the \(lost) lost were \(lossesByWatcher.count) watchers', by move: "
            + lossesByMove.keys.sorted().map { "\($0): \(lossesByMove[$0]!)" }.joined(separator: ", ")
        let perConnection = (rssAfter - rssBefore) * 1_024 / Double(max(1, connected))
        Results.shared.record(section: "events", rows: [], metrics: [
            "connections": Double(connected), "expected": Double(expected), "delivered": Double(delivered), "lost": Double(lost),
            "duplicated": Double(duplicated), "sequence_gaps": Double(state.gaps), "edge_kib_per_connection": perConnection,
            "warmed_up": Double(warmed), "closed_by_edge": Double(state.closed),
        ])
        return [
            "### live events over WebSocket: \(connected) of \(watchers.count) clients connected, each watching 3 of \(movers.count) people moving once a second for \(options.moves) s",
            "",
            "| expected | delivered | lost | duplicated | sequence gaps | edge RSS before → after connecting | per connection |",
            "|---:|---:|---:|---:|---:|---:|---:|",
            "| \(expected) | \(delivered) | \(lost) | \(duplicated) | \(state.gaps) | \(String(format: "%.1f", rssBefore)) → \(String(format: "%.1f", rssAfter)) MiB | \(String(format: "%.1f", perConnection)) KiB |",
            "",
            "- before the measured moves, \(warmed) of \(watchers.count) watchers had heard from all three of their movers (a friendship not yet in geo's graph replica publishes nothing: its events count lost); sockets the edge closed during the run: \(state.closed); the last event counted arrived \(tailMs) ms after the last move was acknowledged\(losses)",
        ].joined(separator: "\n")
    }

    static func moveAll(_ movers: [StackScenario.Person], deviceMs: Int64, points offset: Double) async throws {
        try await StackScenario.concurrently(movers, width: 32) { m in
            _ = try await m.client.call(GeoV1.GeoService.updateLocation, GeoV1.UpdateLocationRequest(
                latitude: 33.70 + offset, longitude: -118.11 + Double(m.index) * 1e-5, accuracyM: 10, deviceTimeMs: deviceMs))
        }
    }

    /// One watcher's socket until cancelled: hello, then every event counted.
    static func watch(url: String, token: String, watcher: Int, movers: Set<UInt64>, tally: Tally, logger: Logger) async {
        var configuration = WebSocketClientConfiguration()
        configuration.additionalHeaders[.authorization] = "Bearer \(token)"
        configuration.maxFrameSize = 1 << 20
        _ = try? await WebSocketClient.connect(url: url, configuration: configuration, logger: logger) { inbound, _, _ in
            defer { if !Task.isCancelled { tally.state.withLock { $0.closed += 1 } } }
            var sequence: Double?
            for try await message in inbound.messages(maxSize: 1 << 20) {
                guard case .text(let text) = message, let frame = try? JSONParser.parse(text) else { continue }
                switch frame["type"] {
                case .string("hello"):
                    if case .number(let s)? = frame["sequence"] { sequence = s }
                    tally.state.withLock { $0.connected += 1 }
                case .string("event"):
                    guard case .number(let s)? = frame["sequence"] else { continue }
                    let gap = sequence.map { s != $0 + 1 } ?? false
                    sequence = s
                    guard case .string(let user)? = frame["data"]?["userId"], let mover = UInt64(user), movers.contains(mover),
                          case .string(let time)? = frame["data"]?["fix"]?["deviceTimeMs"], let ms = Int64(time) else { continue }
                    tally.state.withLock { state in
                        if gap { state.gaps += 1 }
                        state.received[watcher, default: [:]][mover, default: []].append(ms)
                    }
                default: break
                }
            }
        }
    }
}

/// wrk (Debian's) against one URL with a POST body, its latency distribution parsed.
enum Wrk {
    struct Outcome {
        var requests: Int
        var requestsPerSecond: Double
        var p50Us: Double
        var p99Us: Double
        var errors: Int
    }

    static func run(url: String, body: String, token: String, connections: Int, seconds: Int, directory: String) async throws -> Outcome? {
        guard let wrk = ["/usr/bin/wrk", "/usr/local/bin/wrk"].first(where: { FileManager.default.isExecutableFile(atPath: $0) }) else { return nil }
        let script = "\(directory)/post.lua"
        let escaped = body.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"")
        try """
        wrk.method = "POST"
        wrk.body = "\(escaped)"
        wrk.headers["Content-Type"] = "application/json"
        wrk.headers["Authorization"] = "Bearer \(token)"
        """.write(toFile: script, atomically: true, encoding: .utf8)
        // posix_spawn (`Spawn`), as for every other child the benchmark starts: not Foundation's `Process`.
        let output = await offPool { () -> String in
            Spawn.run([wrk, "-t", "2", "-c", String(connections), "-d", "\(seconds)s", "--latency", "-s", script, url]).output
        }
        return parse(output)
    }

    /// "Requests/sec: 1234.5", "  50%  1.23ms", "  99%  4.56ms", "12345 requests in 10.0s",
    /// "Non-2xx or 3xx responses: 3".
    static func parse(_ text: String) -> Outcome? {
        var outcome = Outcome(requests: 0, requestsPerSecond: 0, p50Us: 0, p99Us: 0, errors: 0)
        for raw in text.split(separator: "\n") {
            let line = raw.trimmingCharacters(in: .whitespaces)
            let words = line.split(separator: " ", omittingEmptySubsequences: true)
            if line.hasPrefix("Requests/sec:"), let v = words.last.flatMap({ Double($0) }) { outcome.requestsPerSecond = v }
            if line.hasPrefix("50%"), let v = words.last.flatMap(micros) { outcome.p50Us = v }
            if line.hasPrefix("99%"), let v = words.last.flatMap(micros) { outcome.p99Us = v }
            if words.count >= 2, words[1] == "requests", let v = Int(words[0]) { outcome.requests = v }
            if line.hasPrefix("Non-2xx"), let v = words.last.flatMap({ Int($0) }) { outcome.errors += v }
            if line.hasPrefix("Socket errors:") {
                for part in line.dropFirst("Socket errors:".count).split(separator: ",") {
                    outcome.errors += Int(part.split(separator: " ").last ?? "") ?? 0
                }
            }
        }
        return outcome.requestsPerSecond > 0 ? outcome : nil
    }

    static func micros(_ text: Substring) -> Double? {
        for (unit, scale) in [("us", 1.0), ("ms", 1_000.0), ("s", 1_000_000.0)] where text.hasSuffix(unit) {
            return Double(text.dropLast(unit.count)).map { $0 * scale }
        }
        return nil
    }
}
