import Accounts
import Alerts
import Foundation
import FriensoClient
import FriensoProto
import Geo
public import Logging
import Gateway
import ServiceLifecycle
import Social
import Synchronization
import Wire

/// helpNow end to end (raise through the gateway → delivery records delivered for a 3-member
/// circle and the live event at a connected circle member), and many concurrent watch sessions
/// with location updates, counting every event the watchers should get.
public enum AlertsScenario {
    public struct Options: Sendable {
        public var alerts = 1_000
        public var sessions = 1_000
        /// Distinct watcher clients; each session draws 3 of them.
        public var watchers = 100
        public var seconds = 10
        public var parts: Set<String> = AlertsScenario.parts
        public init(alerts: Int = 1_000, sessions: Int = 1_000, watchers: Int = 100, seconds: Int = 10, parts: Set<String> = AlertsScenario.parts) {
            self.alerts = alerts
            self.sessions = sessions
            self.watchers = watchers
            self.seconds = seconds
            self.parts = parts
        }
    }

    /// What `--parts` may name.
    public static let parts: Set<String> = ["helpnow", "raises", "watch"]

    /// Who got which location event: (viewer, subject, device time).
    private final class EventTally: Sendable {
        let seen = Mutex<[UInt64: Int]>([:])
        let duplicates = Atomic<Int>(0)
        private let keys = Mutex<Set<String>>([])
        func record(viewer: UInt64, subject: UInt64, deviceMs: Int64) {
            let fresh = keys.withLock { $0.insert("\(viewer)|\(subject)|\(deviceMs)").inserted }
            if fresh { seen.withLock { $0[viewer, default: 0] += 1 } } else { duplicates.add(1, ordering: .relaxed) }
        }
        var total: Int { seen.withLock { $0.values.reduce(0, +) } }
    }

    public static func run(_ options: Options, logger: Logger) async throws -> String {
        let dir = BenchStack.scratchDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        for sub in ["accounts", "social", "geo", "alerts"] {
            try FileManager.default.createDirectory(atPath: "\(dir)/\(sub)", withIntermediateDirectories: true)
        }
        var quiet = logger
        quiet.logLevel = .warning
        var out: [String] = []

        // Each would-be process has its own libzmq context and reactor, as deployed.
        func place(_ name: String) -> (ZMQContext, Reactor) { (ZMQContext(), Reactor(name: "bench-\(name)")) }
        let (ac, ar) = place("accounts"), (sc, sr) = place("social"), (gc, gr) = place("geo"), (lc, lr) = place("alerts")
        let (cc, cr) = place("clients")
        let accounts = try AccountsService(directory: "\(dir)/accounts", config: BenchStack.accountsConfig())
            .makeHost(options: HostOptions(name: "accounts", endpoint: "tcp://127.0.0.1:*"), logger: quiet, context: ac, reactor: ar)
        let socialPub = Publisher(name: "social", endpoint: "tcp://127.0.0.1:*", logger: quiet, context: sc, reactor: sr)
        let geoPub = Publisher(name: "geo", endpoint: "tcp://127.0.0.1:*", logger: quiet, context: gc, reactor: gr)
        let alertsPub = Publisher(name: "alerts", endpoint: "tcp://127.0.0.1:*", logger: quiet, context: lc, reactor: lr)
        let graph = StaticGraph() // nobody is friends in geo's eyes: only grants make a location visible
        let geo = try GeoService(directory: "\(dir)/geo", graph: graph, publisher: geoPub, logger: quiet)
        let geoHost = geo.makeHost(options: HostOptions(name: "geo", endpoint: "tcp://127.0.0.1:*"), logger: quiet, context: gc, reactor: gr)

        try await withThrowingTaskGroup(of: Void.self) { tasks in
            var groups: [ServiceGroup] = []
            func launch(_ services: [any Service]) {
                let group = ServiceGroup(configuration: .init(services: services.map { .init(service: $0) }, logger: quiet))
                groups.append(group)
                tasks.addTask { try await group.run() }
            }
            launch([accounts, geoPub, geoHost, alertsPub])
            let accountsEndpoint = try await accounts.boundEndpoint()
            let social = try SocialService(directory: "\(dir)/social", accounts: WireClient(endpoint: accountsEndpoint, logger: quiet, context: sc, reactor: sr),
                                           publisher: socialPub)
                .makeHost(options: HostOptions(name: "social", endpoint: "tcp://127.0.0.1:*"), logger: quiet, context: sc, reactor: sr)
            launch([socialPub, social])
            let socialEndpoint = try await social.boundEndpoint(), geoEndpoint = try await geoHost.boundEndpoint()
            let peers = RemotePeers(accounts: WireClient(endpoint: accountsEndpoint, logger: quiet, context: lc, reactor: lr),
                                    social: WireClient(endpoint: socialEndpoint, logger: quiet, context: lc, reactor: lr),
                                    geo: WireClient(endpoint: geoEndpoint, logger: quiet, context: lc, reactor: lr), logger: quiet,
                                    replicaCircle: { _ in [] })
            var config = AlertsConfig()
            config.minWatch = .seconds(60)
            let alerts = try AlertsService(directory: "\(dir)/alerts", peers: peers, events: alertsPub, config: config, logger: quiet)
            let alertsHost = alerts.makeHost(options: HostOptions(name: "alerts", endpoint: "tcp://127.0.0.1:*"), logger: quiet, context: lc, reactor: lr)
            let worker = AlertsWorker(service: alerts, socialEvents: try await socialPub.boundEndpoint(), logger: quiet, context: lc, reactor: lr)
            launch([alertsHost, worker])
            let alertsEndpoint = try await alertsHost.boundEndpoint()
            launch([GrantConsumer(service: geo, endpoint: try await alertsPub.boundEndpoint(), logger: quiet, context: gc, reactor: gr)])
            var gatewayConfig = GatewayConfig(endpoint: "tcp://127.0.0.1:*", services: [
                "accounts": accountsEndpoint, "social": socialEndpoint, "geo": geoEndpoint, "alerts": alertsEndpoint])
            gatewayConfig.eventSources = ["geo": try await geoPub.boundEndpoint(), "alerts": try await alertsPub.boundEndpoint()]
            gatewayConfig.requestsPerSecond = 1e9
            gatewayConfig.burst = 1e9
            let gateway = Gateway(config: gatewayConfig, logger: quiet, context: ZMQContext(), reactor: Reactor(name: "bench-gateway"))
            launch([gateway])
            let gatewayEndpoint = try await gateway.boundEndpoint()

            // Setup through the services' own request sockets (not measured): users, friendships, circles.
            let toAccounts = WireClient(endpoint: accountsEndpoint, logger: quiet, context: cc, reactor: cr)
            let toSocial = WireClient(endpoint: socialEndpoint, logger: quiet, context: cc, reactor: cr)
            let toAlerts = WireClient(endpoint: alertsEndpoint, logger: quiet, context: cc, reactor: cr)
            let toGeo = WireClient(endpoint: geoEndpoint, logger: quiet, context: cc, reactor: cr)
            var number = 0
            func register(_ name: String) async throws -> UInt64 {
                number += 1
                return try await toAccounts.call(AccountsV1.AccountsService.register, AccountsV1.RegisterRequest(
                    username: name, email: "\(name)@bench.example", phone: "+1555\(String(format: "%07d", 1_000_000 + number))",
                    password: "bench password", firstName: "Bench", lastName: name)).account?.profile?.userId ?? 0
            }
            func circle(_ owner: UInt64, _ members: [UInt64]) async throws {
                for m in members {
                    for (a, b) in [(owner, m), (m, owner)] {
                        _ = try await toSocial.call(SocialV1.SocialService.sendFriendRequest, SocialV1.SendFriendRequestRequest(userId: b),
                                                    options: CallOptions(callerUserID: a))
                    }
                    _ = try await toSocial.call(SocialV1.SocialService.addToCircle, SocialV1.AddToCircleRequest(userId: m), options: CallOptions(callerUserID: owner))
                    _ = try await toSocial.call(SocialV1.SocialService.respondToCircleRequest, SocialV1.RespondToCircleRequestRequest(
                        ownerUserId: owner, action: .accept), options: CallOptions(callerUserID: m))
                }
            }
            func login(_ name: String) async throws -> FriensoClient {
                let client = FriensoClient(gateway: gatewayEndpoint, logger: quiet, context: cc, reactor: cr)
                _ = try await client.login(name, password: "bench password")
                return client
            }

            if options.parts.contains("helpnow") {
                let initiator = try await register("bench_ana")
                var members: [UInt64] = []
                for i in 0..<3 {
                    let m = try await register("bench_m\(i)")
                    members.append(m)
                    _ = try await toAlerts.call(AlertsV1.AlertsService.registerDevice, AlertsV1.RegisterDeviceRequest(
                        token: "bench-device-\(i)-token", platform: .ios), options: CallOptions(callerUserID: m))
                }
                try await circle(initiator, members)
                _ = try await toGeo.call(GeoV1.GeoService.updateLocation, GeoV1.UpdateLocationRequest(
                    latitude: 33.78, longitude: -118.11, accuracyM: 5, deviceTimeMs: WallClock.milliseconds()), options: CallOptions(callerUserID: initiator))
                let ana = try await login("bench_ana")
                let watcher = try await login("bench_m0")
                let stream = try await watcher.events()
                // Each alert: when its last delivery is recorded, and when the watcher's event arrived.
                // Deliveries finished, by source ("help_now:7", "help_now_resolved:7"), and when the last one did.
                let delivered = Mutex<[String: (count: Int, at: ContinuousClock.Instant)]>([:])
                alerts.observeDeliveries { deliveries in
                    let now = ContinuousClock.now
                    delivered.withLock { d in
                        for x in deliveries where x.status == .delivered {
                            d[x.source, default: (0, now)].count += 1
                            d[x.source]!.at = now
                        }
                    }
                }
                let arrived = Mutex<[UInt64: ContinuousClock.Instant]>([:])
                let listener = Task {
                    for await e in stream where e.method == "alerts.Event" {
                        guard let event = try? AlertsV1.AlertEvent(serializedBytes: e.payload), event.kind == .helpNow else { continue }
                        let now = ContinuousClock.now
                        arrived.withLock { $0[event.requestId] = now }
                    }
                }
                var reply = LatencyStats(name: "helpNow raise → reply (via gateway)", inFlight: 1)
                var event = LatencyStats(name: "helpNow raise → event at a circle member", inFlight: 1)
                var records = LatencyStats(name: "helpNow raise → 6 deliveries recorded", inFlight: 1)
                var whole = LatencyStats(name: "helpNow end to end (both)", inFlight: 1)
                var lost = 0
                let started = ContinuousClock.now
                for i in 0..<(options.alerts + 20) {
                    let t0 = ContinuousClock.now
                    guard let raised = try? await ana.call(AlertsV1.AlertsService.raiseHelpNow, AlertsV1.RaiseHelpNowRequest(message: "bench \(i)"),
                                                           mutation: true), let id = raised.alert?.alertId else { reply.errors += 1; continue }
                    let t1 = ContinuousClock.now
                    let done: (ContinuousClock.Instant, ContinuousClock.Instant)? = await {
                        let until = ContinuousClock.now.advanced(by: .seconds(5))
                        while ContinuousClock.now < until {
                            let e = arrived.withLock { $0[id] }
                            let d = delivered.withLock { $0["help_now:\(id)"] }
                            if let e, let d, d.count == 6 { return (e, d.at) } // 3 pushes + 3 SMS
                            await Task.yield()
                        }
                        return nil
                    }()
                    if i >= 20 { // the first 20 warm up
                        reply.record(t0.duration(to: t1))
                        if let (e, d) = done {
                            event.record(t0.duration(to: e))
                            records.record(t0.duration(to: d))
                            whole.record(t0.duration(to: max(e, d)))
                        } else { lost += 1 }
                    }
                    _ = try await ana.call(AlertsV1.AlertsService.resolveHelpNow, AlertsV1.ResolveHelpNowRequest(), mutation: true)
                    // Let the resolution's deliveries finish before the next alert.
                    let until = ContinuousClock.now.advanced(by: .seconds(5))
                    while ContinuousClock.now < until, (delivered.withLock { $0["help_now_resolved:\(id)"]?.count } ?? 0) < 6 {
                        await Task.yield()
                    }
                }
                let elapsed = started.duration(to: .now)
                (reply.elapsed, event.elapsed, records.elapsed, whole.elapsed) = (elapsed, elapsed, elapsed, elapsed)
                listener.cancel()
                out.append(Report.table([reply, event, records, whole]))
                out.append("- \(options.alerts) alerts, one at a time; \(lost) without both the event and all 6 deliveries within 5 s")
                out.append("- target: end to end p99 ≤ 20,000 µs (this run: \(Report.f(whole.micros(99))) µs)")
                await ana.close()
                await watcher.close()
            }

            if options.parts.contains("raises") {
                // 64 initiators, each with the same 3 circle members (with devices and phones):
                // each loop raises, then resolves (one active alert per person), 64 loops at once.
                let n = 64
                var members: [UInt64] = []
                for i in 0..<3 {
                    let m = try await register("bench_rm\(i)")
                    members.append(m)
                    _ = try await toAlerts.call(AlertsV1.AlertsService.registerDevice, AlertsV1.RegisterDeviceRequest(
                        token: "bench-raise-device-\(i)", platform: .android), options: CallOptions(callerUserID: m))
                }
                var free: [FriensoClient] = []
                for i in 0..<n {
                    let initiator = try await register("bench_ri\(i)")
                    try await circle(initiator, members)
                    free.append(try await login("bench_ri\(i)"))
                }
                let clients = free
                let pool = Mutex(free)
                let raises = max(options.alerts, n * 4)
                let pair = await drive(name: "helpNow raise + resolve (via gateway)", inFlight: n, count: raises, warmup: 0) {
                    guard let client = pool.withLock({ $0.popLast() }) else { return false }
                    defer { pool.withLock { $0.append(client) } }
                    guard (try? await client.call(AlertsV1.AlertsService.raiseHelpNow, AlertsV1.RaiseHelpNowRequest(message: "load"), mutation: true)) != nil,
                          (try? await client.call(AlertsV1.AlertsService.resolveHelpNow, AlertsV1.ResolveHelpNowRequest(), mutation: true)) != nil
                    else { return false }
                    return true
                }
                out.append(Report.table([pair]))
                out.append("- \(Int(pair.throughput)) raises/s (each with its resolution; 12 deliveries per pair go out behind them) at \(n) in flight; target ≥ 500 raises/s")
                for client in clients { await client.close() }
            }

            if options.parts.contains("watch") {
                // Watchers (logged in through the gateway, streaming events), and initiators with 3 of them each.
                var watcherIDs: [UInt64] = [], watcherClients: [FriensoClient] = []
                for i in 0..<options.watchers {
                    watcherIDs.append(try await register("bench_w\(i)"))
                    watcherClients.append(try await login("bench_w\(i)"))
                }
                let tally = EventTally()
                var listeners: [Task<Void, Never>] = []
                for (id, client) in zip(watcherIDs, watcherClients) {
                    let stream = try await client.events()
                    listeners.append(Task {
                        for await e in stream where e.method == "geo.Location" {
                            guard let m = try? GeoV1.LocationEvent(serializedBytes: e.payload) else { continue }
                            tally.record(viewer: id, subject: m.userId, deviceMs: m.fix?.deviceTimeMs ?? 0)
                        }
                    })
                }
                var initiators: [UInt64] = []
                let setupStart = ContinuousClock.now
                for s in 0..<options.sessions {
                    let me = try await register("bench_i\(s)")
                    let mine = (0..<3).map { watcherIDs[(s * 3 + $0) % watcherIDs.count] }
                    try await circle(me, mine)
                    let session = try await toAlerts.call(AlertsV1.AlertsService.startWatch, AlertsV1.StartWatchRequest(durationSeconds: 3600),
                                                          options: CallOptions(callerUserID: me)).session?.sessionId ?? 0
                    for w in mine {
                        _ = try await toAlerts.call(AlertsV1.AlertsService.respondInbox, AlertsV1.RespondInboxRequest(
                            kind: .watch, requestId: session, action: .accept), options: CallOptions(callerUserID: w))
                    }
                    initiators.append(me)
                }
                // Every grant has reached geo: each watcher sees all the initiators it watches.
                for (s, me) in initiators.enumerated() {
                    _ = try await toGeo.call(GeoV1.GeoService.updateLocation, GeoV1.UpdateLocationRequest(
                        latitude: 33.7 + Double(s) * 1e-4, longitude: -118.1, accuracyM: 5, deviceTimeMs: WallClock.milliseconds() - 60_000),
                        options: CallOptions(callerUserID: me))
                }
                // Counted in a loop: as one grouping expression this took the type checker 2 s.
                var expectedViews: [UInt64: Int] = [:]
                for s in initiators.indices {
                    for k in 0..<3 { expectedViews[watcherIDs[(s * 3 + k) % watcherIDs.count], default: 0] += 1 }
                }
                for (w, count) in expectedViews {
                    let until = ContinuousClock.now.advanced(by: .seconds(30))
                    while ContinuousClock.now < until {
                        let seen = try await toGeo.call(GeoV1.GeoService.friendsLocations, GeoV1.FriendsLocationsRequest(),
                                                        options: CallOptions(callerUserID: w)).friends.count
                        if seen >= count { break }
                        try await Task.sleep(for: .milliseconds(20))
                    }
                }
                let setup = BenchStack.seconds(setupStart.duration(to: .now))
                let before = tally.total
                // 1 update a second per initiator, spread evenly.
                // Updates overlap (each waits for geo's group commit): one task per update, started on time.
                let start = ContinuousClock.now
                let toGeoNow = toGeo, everyone = initiators, ticks = options.seconds
                var updateLatency = await withTaskGroup(of: LatencySamples.self) { group in
                    for tick in 0..<ticks {
                        for (s, me) in everyone.enumerated() {
                            let due = start.advanced(by: .milliseconds(tick * 1_000 + s * 1_000 / everyone.count))
                            if due > .now { try? await Task.sleep(until: due) }
                            group.addTask {
                                var one = LatencySamples(capacity: 1)
                                let t0 = ContinuousClock.now
                                let ok = (try? await toGeoNow.call(GeoV1.GeoService.updateLocation, GeoV1.UpdateLocationRequest(
                                    latitude: 33.7 + Double(s) * 1e-4, longitude: -118.1 + Double(tick) * 1e-5, accuracyM: 5,
                                    deviceTimeMs: WallClock.milliseconds()), options: CallOptions(callerUserID: me)))?.becameLatest == true
                                one.record(t0.duration(to: .now))
                                if !ok { one.errors += 1 }
                                return one
                            }
                        }
                    }
                    var all = LatencyStats(name: "location update (watch load) → geo", inFlight: everyone.count)
                    for await one in group { all.merge(one) }
                    return all
                }
                let sent = Int(updateLatency.count) - updateLatency.errors
                updateLatency.elapsed = start.duration(to: .now)
                let expected = sent * 3
                let until = ContinuousClock.now.advanced(by: .seconds(10))
                while ContinuousClock.now < until, tally.total - before < expected { try await Task.sleep(for: .milliseconds(50)) }
                let received = tally.total - before
                for l in listeners { l.cancel() }
                for c in watcherClients { await c.close() }
                out.append("")
                out.append(Report.table([updateLatency]))
                out.append("")
                out.append("| watch sessions | watchers each | watcher clients | updates | events expected | received | lost | duplicates | setup s |")
                out.append("|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
                out.append("| \(initiators.count) | 3 | \(watcherIDs.count) | \(sent) | \(expected) | \(received) | \(expected - received) | \(tally.duplicates.load(ordering: .relaxed)) | \(String(format: "%.0f", setup)) |")
                out.append("- target: no event lost")
            }

            for client in [toAccounts, toSocial, toAlerts, toGeo] { await client.close() }
            for group in groups.reversed() { await group.triggerGracefulShutdown() }
            try await tasks.waitForAll()
        }
        return out.joined(separator: "\n")
    }
}
