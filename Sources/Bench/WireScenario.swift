import Accounts
import Foundation
import FriensoClient
import FriensoProto
import Gateway
public import Logging
import ServiceLifecycle
import Synchronization
import Wire

/// The method every Wire row calls, made once: a loop that built it per call (the name is
/// concatenated) spent about 800 instructions a request of the load generator's own
/// (`docs/benchmarks.md`, item 62); a raw row builds nothing per request.
private let accountsPing = CommonMethods.ping("accounts")

/// `wire`: raw libzmq vs the Wire library vs the full gateway path, same payload, one run.
public enum WireScenario {
    public struct Options: Sendable {
        public var requests: Int
        public var warmup: Int
        public var inFlight: [Int]
        /// One libzmq context (and I/O thread) per simulated process, as in a deployment; or one
        /// shared by all, as one process would.
        public var separateContexts: Bool
        /// raw, proxy (libzmq's own forwarding), host, gateway; plain, curve (the internal hop's
        /// security). Subsets run fewer rows.
        public var paths: Set<String>
        /// At 1 in flight, the raw REQ/REP, raw REQ → host and Wire client → host rows run in
        /// this many rounds, taking turns (each a round's share of the requests), so the VM's
        /// drift between minutes falls on all three alike; at more in flight, raw DEALER/ROUTER and
        /// Wire client → host take turns so. 1: each row in one go, one after the other.
        public var rounds: Int
        /// Connections the gateway and proxy rows spread their requests over (each request on the
        /// next in turn), as many phones would; 1: one connection carries them all.
        public var clients: Int

        public init(requests: Int, warmup: Int, inFlight: [Int], separateContexts: Bool,
                    paths: Set<String> = ["raw", "proxy", "host", "gateway", "plain", "curve"], rounds: Int = 1, clients: Int = 1) {
            self.paths = paths
            self.clients = max(1, clients)
            self.rounds = max(1, rounds)
            self.requests = requests
            self.warmup = warmup
            self.inFlight = inFlight
            self.separateContexts = separateContexts
        }
    }

    public static func run(_ options: Options, logger: Logger) async throws -> String {
        let ping = CommonV1.PingRequest(echo: Array("frienso-bench".utf8))
        let payload = Envelope.request(method: "accounts.Ping", payload: ping.serializedBytes(), requestID: 1).serializedBytes()
        var rows: [LatencyStats] = []
        var turns: [Turn] = []
        var rateTurns: [RateTurn] = []
        var forwarding: [Forwarding] = []

        // 1. libzmq alone.
        func context() -> ZMQContext { options.separateContexts ? ZMQContext() : .shared }
        if options.paths.contains("raw") {
            if options.inFlight.contains(1) && !options.takesTurns {
                rows.append(RawZMQ.reqRep(payload: payload, count: options.requests, warmup: options.warmup,
                                          contexts: (context(), context())))
            }
            for n in options.inFlight where n > 1 && !options.takesTurnsInFlight {
                rows.append(RawZMQ.pipelined(payload: payload, count: options.requests, window: n, contexts: (context(), context())))
            }
        }
        // libzmq forwarding on its own (`zmq_proxy` between a raw client and a raw echo): the floor
        // under the gateway's row, with the proxy's CPU per request beside the gateway's.
        if options.paths.contains("proxy") {
            for curve in [false, true] where options.paths.contains(curve ? "curve" : "plain") {
                for n in options.inFlight {
                    let prefix = options.separateContexts ? Int32(10 + forwarding.count) : nil
                    let (row, micros) = RawZMQ.proxied(payload: payload, count: options.requests, warmup: options.warmup, window: n, clients: options.clients,
                                                       curve: curve, contexts: (context(), context(), context()), proxyPrefix: prefix)
                    rows.append(row)
                    if prefix != nil { forwarding.append(Forwarding(forwarder: "zmq_proxy", curve: curve, inFlight: n, micros: micros)) }
                }
            }
        }

        // 2 and 3. Accounts host in process; a Wire client straight to it, and a client through a
        // gateway: plain TCP, then CurveZMQ on the internal hop as deployed (client → gateway
        // stays plain, as the default client socket is).
        for curve in [false, true] where options.paths.contains(curve ? "curve" : "plain") && !options.paths.isDisjoint(with: ["host", "gateway", "session"]) {
            let (more, taken, rates, forwarded) = try await hostAndGateway(options, payload: payload, ping: ping, curve: curve, context: context, logger: logger)
            rows += more
            turns += taken
            rateTurns += rates
            forwarding += forwarded
        }
        return report(rows, turns: turns, rateTurns: rateTurns, forwarding: forwarding)
    }

    /// CPU per request of the process in the middle (the gateway, or `zmq_proxy` for the floor):
    /// its own threads (the reactor, or the proxy's thread) and its libzmq I/O thread, over the
    /// row's measured requests.
    struct Forwarding {
        var forwarder: String
        var curve: Bool
        var inFlight: Int
        var micros: Double
        /// The gateway's reactor thread alone (our code; the rest is libzmq's I/O thread, whose
        /// share swings with how many messages each wake-up finds).
        var reactorMicros: Double? = nil
    }

    /// One round of the 1-in-flight rows taking turns: their p50s, µs.
    struct Turn {
        var raw: Double, rawToHost: Double, wire: Double
    }

    /// One round of raw DEALER/ROUTER and Wire client → host at `inFlight`, taking turns: their
    /// requests per second.
    struct RateTurn {
        var inFlight: Int, raw: Double, wire: Double
    }

    /// One deployment's keys in memory: the gateway (which the direct client also uses: every
    /// member may Ping) and accounts.
    static func keyrings() throws -> (gateway: Keyring, accounts: Keyring) {
        let keys = try BenchStack.keyrings(["gateway", "accounts"])
        return (keys["gateway"]!, keys["accounts"]!)
    }

    static func hostAndGateway(_ options: Options, payload: [UInt8], ping: CommonV1.PingRequest, curve: Bool,
                               context: () -> ZMQContext, logger: Logger) async throws -> ([LatencyStats], [Turn], [RateTurn], [Forwarding]) {
        var rows: [LatencyStats] = []
        var turns: [Turn] = []
        var rateTurns: [RateTurn] = []
        var forwarding: [Forwarding] = []
        // The raw pair's own contexts when the rows take turns (made once: a context is an I/O thread).
        let rawContexts = !curve && (options.takesTurns || options.takesTurnsInFlight) ? (context(), context()) : nil
        let suffix = curve ? " (CURVE)" : ""
        let keys = curve ? try keyrings() : nil
        let dir = BenchStack.scratchDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        var quiet = logger
        quiet.logLevel = .warning
        // One reactor and one libzmq context (own I/O thread) per would-be process: client, gateway, accounts.
        let clientReactor = Reactor(name: "bench-client"), gatewayReactor = Reactor(name: "bench-gateway")
        let clientContext = context(), gatewayContext = context()
        // The gateway's I/O thread named, to tell its CPU from the other contexts' (separate ones only).
        let gatewayIOThread = options.separateContexts ? ThreadCPU.nameIOThread(of: gatewayContext, prefix: curve ? 3 : 2) : nil
        var hostOptions = HostOptions(name: "accounts", endpoint: "tcp://127.0.0.1:*")
        if let keys { hostOptions.security = keys.accounts.server() }
        let accounts = try AccountsService(directory: dir, config: BenchStack.accountsConfig()).makeHost(
            options: hostOptions, logger: quiet, context: context(), reactor: Reactor(name: "bench-accounts"))
        let group = ServiceGroup(configuration: .init(services: [.init(service: accounts)], logger: quiet))
        try await withThrowingTaskGroup(of: Void.self) { tasks in
            tasks.addTask { try await group.run() }
            let accountsEndpoint = try await accounts.boundEndpoint()
            let (gateway, gatewayGroup) = BenchStack.gateway(services: ["accounts": accountsEndpoint], logger: quiet, keyring: keys?.gateway,
                                                             context: gatewayContext, reactor: gatewayReactor)
            tasks.addTask { try await gatewayGroup.run() }
            let gatewayEndpoint = try await gateway.boundEndpoint()

            let takingTurns = !curve && options.takesTurns
            if !curve && options.paths.contains("raw") && options.inFlight.contains(1) && !takingTurns {
                // The host's share: a raw C REQ client against the Wire host (runs on its own thread).
                let rawToHost = await Task.detached {
                    RawZMQ.reqClient(name: "raw REQ → Wire host Ping", endpoint: accountsEndpoint, payload: payload,
                                     count: options.requests, warmup: options.warmup, context: clientContext)
                }.value
                rows.append(rawToHost)
            }
            var directOptions = ClientOptions()
            if let keys { directOptions.security = try keys.gateway.client(of: "accounts") }
            let direct = WireClient(endpoint: accountsEndpoint, options: directOptions, logger: quiet, context: clientContext, reactor: clientReactor)
            let viaGateway = (0..<options.clients).map { _ in FriensoClient(gateway: gatewayEndpoint, logger: quiet, context: clientContext, reactor: clientReactor) }
            // Path `session`: a user per client, registered and logged in through the gateway
            // (setup, not measured), whose calls carry the session token: the gateway's session
            // cache and per-session rate limit on every request, as a phone's requests take them.
            var users: [FriensoClient] = []
            if options.paths.contains("session") {
                for number in 0..<options.clients {
                    users.append(try await BenchStack.user("wire\(number)", number: number, gateway: gatewayEndpoint, logger: quiet,
                                                           context: clientContext, reactor: clientReactor).client)
                }
            }
            let withSessions = users
            let turn = Atomic<Int>(0)
            if let rawContexts, options.takesTurns {
                let (taken, rounds) = await takeTurns(options, payload: payload, ping: ping, rawContexts: rawContexts, host: accountsEndpoint,
                                                      hostClientContext: clientContext, direct: direct, reactor: clientReactor)
                rows += taken
                turns = rounds
            }
            // The load loops run on the client's reactor, as a client built on Wire would.
            await withTaskExecutorPreference(clientReactor) {
                for n in options.inFlight {
                    if let rawContexts, n > 1, options.takesTurnsInFlight {
                        let (taken, rounds) = await takeTurns(inFlight: n, options, payload: payload, ping: ping, rawContexts: rawContexts, direct: direct)
                        rows += taken
                        rateTurns += rounds
                    } else if options.paths.contains("host") && !(takingTurns && n == 1) {
                        rows.append(await drive(name: "Wire client → host Ping" + suffix, inFlight: n, count: options.requests, warmup: options.warmup) {
                            (try? await direct.call(accountsPing, ping))?.echo == ping.echo
                        })
                    }
                    if options.paths.contains("session") {
                        rows.append(await drive(name: "client → gateway → accounts WhoAmI, with a session" + suffix, inFlight: n,
                                                count: options.requests, warmup: options.warmup) {
                            let client = withSessions[turn.add(1, ordering: .relaxed).oldValue % withSessions.count]
                            return (try? await client.call(AccountsV1.AccountsService.whoAmI, AccountsV1.WhoAmIRequest())) != nil
                        })
                    }
                    guard options.paths.contains("gateway") else { continue }
                    let cpu = gatewayIOThread.map { ThreadCPU(named: ["bench-gateway", $0]) }
                    let reactorCPU = ThreadCPU(named: ["bench-gateway"])
                    var before: [pid_t: UInt64] = [:]
                    let name = "client → gateway → accounts Ping" + (options.clients > 1 ? ", \(options.clients) clients" : "") + suffix
                    let row = await drive(name: name, inFlight: n, count: options.requests, warmup: options.warmup,
                                          measuring: { before = cpu?.read() ?? [:] }) {
                        let client = viaGateway[turn.add(1, ordering: .relaxed).oldValue % viaGateway.count]
                        return (try? await client.call(accountsPing, ping))?.echo == ping.echo
                    }
                    rows.append(row)
                    if let cpu {
                        let after = cpu.read(), requests = Double(max(1, row.count))
                        let micros = Double(ThreadCPU.spent(from: before, to: after)) / 1_000 / requests
                        let onReactor = after.filter { reactorCPU.threads.contains($0.key) }
                        let reactorMicros = Double(ThreadCPU.spent(from: before, to: onReactor)) / 1_000 / requests
                        forwarding.append(Forwarding(forwarder: "gateway", curve: curve, inFlight: n, micros: micros, reactorMicros: reactorMicros))
                    }
                }
            }
            await direct.close()
            for client in viaGateway + withSessions { await client.close() }
            await gatewayGroup.triggerGracefulShutdown()
            await group.triggerGracefulShutdown()
            try await tasks.waitForAll()
        }
        return (rows, turns, rateTurns, forwarding)
    }

    /// Raw DEALER/ROUTER and Wire client → host at `n` in flight, in `options.rounds` rounds
    /// taking turns (each a round's share of the requests): the raw pair moved by a quarter
    /// between runs of the same build, and the ratio of two rows run minutes apart moved with it
    /// (`docs/benchmarks.md`, item 145). Called on the client's reactor (the Wire loop's
    /// executor); the C loop runs on a thread of its own.
    static func takeTurns(inFlight n: Int, _ options: Options, payload: [UInt8], ping: CommonV1.PingRequest,
                          rawContexts: (ZMQContext, ZMQContext), direct: WireClient) async -> ([LatencyStats], [RateTurn]) {
        let count = max(n, options.requests / options.rounds), warmup = options.warmup / options.rounds
        var raw = LatencyStats(name: "raw libzmq DEALER/ROUTER", inFlight: n)
        var wire = LatencyStats(name: "Wire client → host Ping", inFlight: n)
        var turns: [RateTurn] = []
        for _ in 0..<options.rounds {
            let r = await Task.detached { RawZMQ.pipelined(payload: payload, count: count, window: n, contexts: rawContexts) }.value
            let w = await drive(name: wire.name, inFlight: n, count: count, warmup: warmup) {
                (try? await direct.call(accountsPing, ping))?.echo == ping.echo
            }
            turns.append(RateTurn(inFlight: n, raw: r.throughput, wire: w.throughput))
            raw.merge(r); raw.elapsed += r.elapsed
            wire.merge(w); wire.elapsed += w.elapsed
        }
        return ([raw, wire], turns)
    }

    /// The three 1-in-flight rows in `options.rounds` rounds, taking turns: raw REQ/REP, a raw REQ
    /// client against the host, the Wire client against the host. The C loops run on a thread of
    /// their own (never on the reactor); the Wire loop on the client's reactor, as above.
    static func takeTurns(_ options: Options, payload: [UInt8], ping: CommonV1.PingRequest, rawContexts: (ZMQContext, ZMQContext),
                          host: String, hostClientContext: ZMQContext, direct: WireClient, reactor: Reactor) async -> ([LatencyStats], [Turn]) {
        let count = max(1, options.requests / options.rounds), warmup = options.warmup / options.rounds
        var raw = LatencyStats(name: "raw libzmq REQ/REP", inFlight: 1)
        let rawToHostName = "raw REQ → Wire host Ping"
        var rawToHost = LatencyStats(name: rawToHostName, inFlight: 1)
        var wire = LatencyStats(name: "Wire client → host Ping", inFlight: 1)
        var turns: [Turn] = []
        for _ in 0..<options.rounds {
            let r = await Task.detached { RawZMQ.reqRep(payload: payload, count: count, warmup: warmup, contexts: rawContexts) }.value
            let h = await Task.detached {
                RawZMQ.reqClient(name: rawToHostName, endpoint: host, payload: payload, count: count, warmup: warmup, context: hostClientContext)
            }.value
            let w = await withTaskExecutorPreference(reactor) {
                await drive(name: wire.name, inFlight: 1, count: count, warmup: warmup) {
                    (try? await direct.call(accountsPing, ping))?.echo == ping.echo
                }
            }
            turns.append(Turn(raw: r.micros(50), rawToHost: h.micros(50), wire: w.micros(50)))
            raw.merge(r); raw.elapsed += r.elapsed
            rawToHost.merge(h); rawToHost.elapsed += h.elapsed
            wire.merge(w); wire.elapsed += w.elapsed
        }
        return ([raw, rawToHost, wire], turns)
    }

    static func report(_ rows: [LatencyStats], turns: [Turn] = [], rateTurns: [RateTurn] = [], forwarding: [Forwarding] = []) -> String {
        var out = [Report.table(rows), ""]
        var metrics: [String: Double] = [:]
        for f in forwarding {
            metrics["forwarding_cpu_us_\(f.forwarder)_\(f.inFlight)\(f.curve ? "_curve" : "")"] = f.micros
            if let reactor = f.reactorMicros { metrics["forwarding_cpu_us_\(f.forwarder)_reactor_\(f.inFlight)\(f.curve ? "_curve" : "")"] = reactor }
        }
        if !metrics.isEmpty { Results.shared.record(section: "forwarding CPU", rows: [], metrics: metrics) }
        for f in forwarding where f.forwarder == "gateway" {
            let floor = forwarding.first { $0.forwarder == "zmq_proxy" && $0.curve == f.curve && $0.inFlight == f.inFlight }
            out.append("- \(f.inFlight) in flight\(f.curve ? ", CURVE behind" : ""): the forwarding process's CPU per request (its thread and its libzmq I/O thread): "
                + "gateway \(Report.f(f.micros)) µs" + (f.reactorMicros.map { " (its reactor thread \(Report.f($0)) µs)" } ?? "") + (floor.map { ", zmq_proxy \(Report.f($0.micros)) µs (\(ratio(f.micros, $0.micros))×; the gateway's goal: ≤ 20 µs)" } ?? ""))
        }
        func median(_ values: [Double]) -> Double {
            let sorted = values.sorted()
            return sorted.count % 2 == 1 ? sorted[sorted.count / 2] : (sorted[sorted.count / 2 - 1] + sorted[sorted.count / 2]) / 2
        }
        for n in Set(rateTurns.map(\.inFlight)).sorted() {
            let shares = rateTurns.filter { $0.inFlight == n }.map { $0.raw > 0 ? $0.wire / $0.raw * 100 : 0 }
            Results.shared.record(section: "wire rounds", rows: [], metrics: ["wire_share_of_raw_percent_median_\(n)": median(shares)])
            out.append("- \(n) in flight, \(shares.count) rounds taking turns: Wire client → host / raw DEALER/ROUTER req/s per round, median "
                + "\(String(format: "%.0f", median(shares)))% (\(String(format: "%.0f", shares.min() ?? 0))–\(String(format: "%.0f", shares.max() ?? 0))%; target ≥ 60%)")
        }
        if !turns.isEmpty {
            let wire = turns.map { $0.wire / $0.raw }, host = turns.map { $0.rawToHost / $0.raw }
            out.append("- 1 in flight, \(turns.count) rounds taking turns: Wire / raw libzmq p50 per round median \(String(format: "%.2f", median(wire)))× "
                + "(\(String(format: "%.2f", wire.min() ?? 0))–\(String(format: "%.2f", wire.max() ?? 0))×; target ≤ 1.3×); "
                + "the host's share, raw REQ → host / raw, median \(String(format: "%.2f", median(host)))×")
        }
        func row(_ prefix: String, _ n: Int, curve: Bool = false) -> LatencyStats? {
            rows.first { $0.name.hasPrefix(prefix) && $0.inFlight == n && $0.name.hasSuffix("(CURVE)") == curve }
        }
        for n in Set(rows.map(\.inFlight)).sorted() {
            guard let wire = row("Wire", n), let gateway = row("client", n) else { continue }
            let raw = row("raw", n)
            if let raw {
                out.append("- \(n) in flight: Wire / raw libzmq p50 \(ratio(wire.micros(50), raw.micros(50)))×, p99 \(ratio(wire.micros(99), raw.micros(99)))× (target p50 ≤ 1.3×)")
            }
            out.append("- \(n) in flight: gateway path / Wire p50 \(ratio(gateway.micros(50), wire.micros(50)))× (target ≤ 3×), p99 \(ratio(gateway.micros(99), wire.micros(99)))× (target ≤ 5×)")
            if let wireCurve = row("Wire", n, curve: true), let gatewayCurve = row("client", n, curve: true) {
                out.append("- \(n) in flight: CURVE / plain, Wire p50 \(ratio(wireCurve.micros(50), wire.micros(50)))×, gateway path p50 \(ratio(gatewayCurve.micros(50), gateway.micros(50)))×, gateway path rate \(ratio(gatewayCurve.throughput, gateway.throughput))×")
            }
        }
        return out.joined(separator: "\n")
    }

    static func ratio(_ a: Double, _ b: Double) -> String { b > 0 ? String(format: "%.2f", a / b) : "-" }
}

extension WireScenario.Options {
    /// Whether the 1-in-flight rows take turns in rounds (all three of them are asked for).
    var takesTurns: Bool {
        rounds > 1 && inFlight.contains(1) && paths.isSuperset(of: ["raw", "host", "plain"])
    }

    /// Whether the rows at more than 1 in flight take turns in rounds (raw and host, plain, asked for).
    var takesTurnsInFlight: Bool {
        rounds > 1 && inFlight.contains { $0 > 1 } && paths.isSuperset(of: ["raw", "host", "plain"])
    }
}
