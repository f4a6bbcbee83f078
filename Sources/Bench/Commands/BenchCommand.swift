public import ArgumentParser
import Foundation
import Logging
import ServiceKit
import Wire

/// `frienso-bench`'s commands (the executable only calls `BenchCommand.start()`).
public struct BenchCommand: AsyncParsableCommand {
    public static let configuration = CommandConfiguration(
        commandName: "frienso-bench",
        abstract: "Frienso benchmarks. Build with -c release before measuring.",
        subcommands: [WireBench.self, AccountsBench.self, SocialBench.self, SocialStorageBench.self, InstancesBench.self, GeoBench.self, AlertsBench.self, MediaBench.self, StackBench.self, EdgeBench.self, ReportCommand.self])

    public init() {}

    /// Parses the command line and runs the command it names, with the allocator set up as the
    /// services run (`ServiceRunner`): the executable's whole body.
    public static func start() async {
        MemoryTuning.keepLargeBuffers()
        await main(nil)
    }
}

struct WireBench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "wire",
        abstract: "Raw libzmq vs the Wire library vs client → gateway → accounts Ping, in one run.")

    @Option(help: "Measured requests per row.") var requests = 20_000
    @Option(help: "Unmeasured requests first.") var warmup = 2_000
    @Option(help: "Requests in flight, comma-separated.") var inFlight = "1,64"
    @Option(help: "separate: a libzmq context (I/O thread) per simulated process, as deployed; shared: one for all.")
    var contexts = "separate"
    @Option(help: "Which paths to run, comma-separated: raw (libzmq alone), proxy (libzmq's zmq_proxy in the gateway's place: its floor), host (Wire client → host), gateway (client → gateway → accounts Ping), session (client → gateway → accounts WhoAmI with a session token: the gateway's session cache and per-session rate limit; not in the default); with plain and/or curve for the internal hop. Default: all but session. Narrow it to profile one path.")
    var paths = "raw,proxy,host,gateway,plain,curve"
    @Option(help: "Connections the gateway and proxy rows spread their requests over, each request on the next in turn (stack's load generator has one per user: 120).")
    var clients = 1
    @Option(help: "At 1 in flight, run raw REQ/REP, raw REQ → host and Wire client → host in this many rounds, taking turns (each a round's share of --requests), and report the median of the rounds' p50 ratios: the VM's drift then falls on all three alike. At more in flight, raw DEALER/ROUTER and Wire client → host take turns so, and the median of the rounds' rate ratios is reported. 1: each row in one go.")
    var rounds = 1

    var pathSet: Set<String> { Set(paths.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }) }

    func validate() throws {
        guard requests > 0, warmup >= 0 else { throw ValidationError("--requests must be positive and --warmup not negative") }
        guard (1...1_000).contains(rounds), rounds <= requests else { throw ValidationError("--rounds takes 1 to 1,000, and no more than --requests") }
        guard ["separate", "shared"].contains(contexts) else { throw ValidationError("--contexts is separate or shared") }
        guard pathSet.isSubset(of: ["raw", "proxy", "host", "gateway", "session", "plain", "curve"]), !pathSet.isEmpty else {
            throw ValidationError("--paths takes raw, proxy, host, gateway, session, plain, curve")
        }
        guard LoadLevels.parse(inFlight) != nil else { throw ValidationError("--in-flight takes numbers from 1 to 4096") }
        guard (1...1_000).contains(clients) else { throw ValidationError("--clients takes 1 to 1,000") }
    }

    var levels: [Int] { LoadLevels.parse(inFlight) ?? [] }

    @OptionGroup var results: ResultsOptions

    func run() async throws {
        let logger = Logger(label: "bench")
        // The hosts record their metrics as deployed ones do (FRIENSO_METRICS=off: not at all).
        ServiceMetrics.bootstrap(service: "bench")
        print(try await WireScenario.run(.init(requests: requests, warmup: warmup, inFlight: levels,
                                               separateContexts: contexts == "separate", paths: pathSet, rounds: rounds, clients: clients), logger: logger))
        try results.write("wire")
    }
}

/// What the engine-comparison scenarios (`accounts`, `social-storage`) take besides their users.
struct EngineRunOptions: ParsableArguments {
    @OptionGroup var load: LoadRunOptions
    @Option(help: "Engines, comma-separated: sqlite, postgres.") var engines = "sqlite,postgres"

    func validate() throws {
        guard !engineList.isEmpty, engineList.allSatisfy({ ["sqlite", "postgres"].contains($0) }) else {
            throw ValidationError("--engines takes sqlite and postgres")
        }
    }

    var engineList: [String] { engines.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) } }

    func scenario(users: Int) -> EngineScenarioOptions {
        load.scenario(users: users, engines: engineList)
    }
}

/// How much load the service-level scenarios (`accounts`, `social-storage`, `instances`) send.
struct LoadRunOptions: ParsableArguments {
    @Option(help: "Measured requests per read row (writes: a quarter).") var requests = 20_000
    @Option(help: "Unmeasured requests first.") var warmup = 1_000
    @Option(help: "Requests in flight, comma-separated.") var inFlight = "1,64"

    func validate() throws {
        guard requests > 0, warmup >= 0 else { throw ValidationError("--requests > 0, --warmup ≥ 0") }
        guard LoadLevels.parse(inFlight) != nil else { throw ValidationError("--in-flight takes numbers from 1 to 4096") }
    }

    func scenario(users: Int, engines: [String]) -> EngineScenarioOptions {
        EngineScenarioOptions(requests: requests, warmup: warmup, inFlight: LoadLevels.parse(inFlight) ?? [], users: users, engines: engines)
    }
}

struct AccountsBench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "accounts",
        abstract: "Accounts on SQLite and on PostgreSQL (a real server, started in a temp folder) in one run: reads and durable writes.")

    @OptionGroup var options: EngineRunOptions
    @Option(help: "Registered users (sessions and profiles to read).") var users = 200
    @OptionGroup var results: ResultsOptions

    func validate() throws {
        guard users >= 50 else { throw ValidationError("--users ≥ 50") }
    }

    func run() async throws {
        print(try await AccountsScenario.run(options.scenario(users: users), logger: Logger(label: "bench")))
        try results.write("accounts")
    }
}

struct InstancesBench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "instances",
        abstract: "Accounts on PostgreSQL as one instance and as two on one database, in one run, the client spreading calls over them.")

    @OptionGroup var load: LoadRunOptions
    @Option(help: "Instance counts to compare, comma-separated (the first is the base).") var instances = "1,2"
    @Option(help: "Registered users (sessions and profiles to read).") var users = 200
    @OptionGroup var results: ResultsOptions

    var counts: [Int] { instances.split(separator: ",").compactMap { Int($0.trimmingCharacters(in: .whitespaces)) } }

    func validate() throws {
        guard users >= 50 else { throw ValidationError("--users ≥ 50") }
        guard !counts.isEmpty, counts.allSatisfy({ (1...8).contains($0) }) else { throw ValidationError("--instances takes counts from 1 to 8") }
    }

    func run() async throws {
        print(try await InstancesScenario.run(load.scenario(users: users, engines: ["postgres"]), counts: counts, logger: Logger(label: "bench")))
        try results.write("instances")
    }
}

struct SocialStorageBench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "social-storage",
        abstract: "Social on SQLite and on PostgreSQL (a real server, started in a temp folder) in one run: reads and durable writes with graph events.")

    @OptionGroup var options: EngineRunOptions
    @Option(help: "Callers (distinct user ids).") var users = 1_000
    @OptionGroup var results: ResultsOptions

    func validate() throws {
        guard users >= 1 else { throw ValidationError("--users ≥ 1") }
    }

    func run() async throws {
        print(try await SocialStorageScenario.run(options.scenario(users: users), logger: Logger(label: "bench")))
        try results.write("social-storage")
    }
}

struct SocialBench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "social",
        abstract: "ListFriends of a 200-friend user through the gateway; a large graph snapshot loaded by a replica.")

    @Option(help: "Measured requests per row.") var requests = 20_000
    @Option(help: "Unmeasured requests first.") var warmup = 1_000
    @Option(help: "Requests in flight, comma-separated.") var inFlight = "1,64"
    @Option(help: "Friends of the listed user.") var friends = 200
    @Option(help: "Friendships in the snapshot graph.") var edges = 1_000_000
    @Option(help: "Users the snapshot graph's friendships are spread over.") var users = 100_000

    func validate() throws {
        guard requests > 0, warmup >= 0, friends > 0, friends <= 1_000 else { throw ValidationError("--requests > 0, --warmup ≥ 0, --friends 1-1000") }
        guard users > 1, edges > 0, edges <= users * (users - 1) / 4 else { throw ValidationError("--edges must be well under users² / 2") }
        guard LoadLevels.parse(inFlight) != nil else { throw ValidationError("--in-flight takes numbers from 1 to 4096") }
    }

    var levels: [Int] { LoadLevels.parse(inFlight) ?? [] }

    @OptionGroup var results: ResultsOptions

    func run() async throws {
        print(try await SocialScenario.run(.init(requests: requests, warmup: warmup, inFlight: levels, friends: friends,
                                                 edges: edges, users: users), logger: Logger(label: "bench")))
        try results.write("social")
    }
}

struct GeoBench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "geo",
        abstract: "Spatial index, nearby and durable location updates in service and through the gateway, beside Redis GEO.")

    @Option(help: "Users in the data set.") var users = 1_000_000
    @Option(help: "Measured nearby queries per row.") var queries = 20_000
    @Option(help: "Measured location updates per row.") var updates = 200_000
    @Option(help: "Requests in flight (threads for Redis), comma-separated.") var inFlight = "1,64"
    @Option(help: "Parts to run, comma-separated: index, service, redis, audit (who saw my location), places (zones and place alerts), fold (the history fold's period).") var parts = "index,service,redis"
    @Option(help: "The internal hop of the rows through the gateway, one gateway each: plaintext, curve (comma-separated).") var planes = "plaintext,curve"

    func validate() throws {
        guard ScenarioParts.parse(parts, known: GeoScenario.parts) != nil else { throw ValidationError("--parts takes index, service, redis, audit, places, fold") }
        guard ScenarioParts.parse(planes, known: ["plaintext", "curve"]) != nil else { throw ValidationError("--planes takes plaintext, curve") }
        guard users >= 1_000, queries > 0, updates > 0 else { throw ValidationError("--users ≥ 1000, --queries and --updates > 0") }
        guard LoadLevels.parse(inFlight, max: 1_024) != nil else { throw ValidationError("--in-flight takes numbers from 1 to 1024") }
    }

    var levels: [Int] { LoadLevels.parse(inFlight) ?? [] }

    @OptionGroup var results: ResultsOptions

    func run() async throws {
        var options = GeoScenario.Options(users: users, queries: queries, updates: updates, inFlight: levels)
        options.parts = ScenarioParts.parse(parts, known: GeoScenario.parts) ?? []
        options.planes = ScenarioParts.parse(planes, known: ["plaintext", "curve"]) ?? []
        print(try await GeoScenario.run(options, logger: Logger(label: "bench")))
        try results.write("geo")
    }
}

struct AlertsBench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "alerts",
        abstract: "helpNow through the gateway to delivery records and a circle member's live event; concurrent watch sessions under location updates.")

    @Option(help: "helpNow alerts measured, one at a time.") var alerts = 1_000
    @Option(help: "Concurrent watch sessions (3 watchers each).") var sessions = 1_000
    @Option(help: "Distinct watcher clients the sessions draw from.") var watchers = 100
    @Option(help: "Seconds of 1 update a second per session.") var seconds = 10
    @Option(help: "Parts to run, comma-separated: helpnow (one at a time, end to end), raises (64 in flight), watch.") var parts = "helpnow,raises,watch"

    func validate() throws {
        guard ScenarioParts.parse(parts, known: AlertsScenario.parts) != nil else { throw ValidationError("--parts takes helpnow, raises, watch") }
        guard alerts > 0, sessions > 0, watchers >= 3, seconds > 0 else { throw ValidationError("--alerts, --sessions, --seconds > 0; --watchers ≥ 3") }
    }

    @OptionGroup var results: ResultsOptions

    func run() async throws {
        let options = AlertsScenario.Options(alerts: alerts, sessions: sessions, watchers: watchers, seconds: seconds,
                                             parts: ScenarioParts.parse(parts, known: AlertsScenario.parts) ?? [])
        print(try await AlertsScenario.run(options, logger: Logger(label: "bench")))
        try results.write("alerts")
    }
}

struct MediaBench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "media",
        abstract: "Photos through the gateway: 1 MiB upload+download throughput in flight, small-request latency beside 8 MiB downloads.")

    @Option(help: "Clients moving photos at once.") var inFlight = 8
    @Option(help: "Upload+download pairs per client.") var rounds = 32
    @Option(help: "Small requests measured, with and without a big download in flight.") var smallRequests = 2_000
    @Option(help: "The media service's chunk size in KiB (at most 1024: the service's default and cap).") var chunkKib = 1_024
    @Option(help: "Parts to run, comma-separated: throughput, isolation.") var parts = "throughput,isolation"
    @Option(help: "Where media keeps photos, one run each, comma-separated: sqlite (files), postgres (bytes in a PostgreSQL server the bench starts).")
    var storages = "sqlite"

    func validate() throws {
        guard ScenarioParts.parse(parts, known: MediaScenario.parts) != nil else { throw ValidationError("--parts takes throughput, isolation") }
        guard ScenarioParts.parse(storages, known: Set(MediaScenario.Options.knownStorages)) != nil else {
            throw ValidationError("--storages takes sqlite, postgres")
        }
        guard inFlight >= 2, rounds > 0, smallRequests > 0 else { throw ValidationError("--in-flight ≥ 2; --rounds, --small-requests > 0") }
        guard (16...1_024).contains(chunkKib) else { throw ValidationError("--chunk-kib: 16 to 1024") }
    }

    @OptionGroup var results: ResultsOptions

    func run() async throws {
        let options = MediaScenario.Options(inFlight: inFlight, rounds: rounds, smallRequests: smallRequests, chunkBytes: chunkKib << 10,
                                            parts: ScenarioParts.parse(parts, known: MediaScenario.parts) ?? [],
                                            storages: storages.split(separator: ",").map(String.init))
        print(try await MediaScenario.run(options, logger: Logger(label: "bench")))
        try results.write("media")
    }
}

struct StackBench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "stack",
        abstract: "The real deployment (frienso-launch, six processes) under a mixed workload through the gateway; Redis in the same run.")

    @Option(help: "Users (registered, befriended, located before measuring).") var users = 120
    @Option(help: "Requests in flight (closed loop).") var inFlight = 64
    @Option(help: "Measured seconds.") var seconds = 20
    @Option(help: "Percent of location updates, nearby, friends' locations, check-ins, helpNow (raise or resolve).") var mix = "50,15,20,10,5"
    @Option(help: "Folder with frienso-launch and the services (default: beside this executable).") var binDir: String?
    @Option(help: "Internal planes to run, one deployment each: curve, plaintext (comma-separated).") var planes = "curve,plaintext"
    @Option(help: "Where accounts, social and alerts keep their data, one deployment each per plane: sqlite, postgres, postgres-x2 (two instances of each), postgres-socket (through the server's Unix socket, not TCP; comma-separated). PostgreSQL is started by the bench.") var storages = "sqlite"

    func validate() throws {
        guard users >= 2, inFlight >= 1, seconds >= 1 else { throw ValidationError("--users ≥ 2, --in-flight ≥ 1, --seconds ≥ 1") }
        guard let parts = percentages, parts.count == 5, parts.allSatisfy({ $0 >= 0 }), parts.reduce(0, +) == 100 else {
            throw ValidationError("--mix is five percentages adding up to 100")
        }
        guard !planeList.isEmpty, planeList.allSatisfy({ ["curve", "plaintext"].contains($0) }) else {
            throw ValidationError("--planes takes curve, plaintext")
        }
        guard !storageList.isEmpty, storageList.allSatisfy({ StackScenario.Options.knownStorages.contains($0) }) else {
            throw ValidationError("--storages takes \(StackScenario.Options.knownStorages.joined(separator: ", "))")
        }
    }

    var planeList: [String] { planes.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) } }
    var storageList: [String] { storages.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) } }

    /// The mix's numbers; nil when one is not a number.
    var percentages: [Int]? {
        let parts = mix.split(separator: ",", omittingEmptySubsequences: false).map { Int($0.trimmingCharacters(in: .whitespaces)) }
        return parts.contains(nil) ? nil : parts.compactMap { $0 }
    }

    @OptionGroup var results: ResultsOptions

    func run() async throws {
        var options = StackScenario.Options(binDirectory: binDir)
        options.users = users
        options.inFlight = inFlight
        options.seconds = seconds
        options.mix = percentages ?? options.mix
        options.planes = planeList
        options.storages = storageList
        var logger = Logger(label: "bench")
        logger.logLevel = .warning
        print(try await StackScenario.run(options, logger: logger))
        try results.write("stack")
    }
}

struct EdgeBench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "edge",
        abstract: "The HTTP edge beside the ZeroMQ gateway in one deployment: nearby through each (wrk for HTTP), and live events to many WebSocket clients.")

    @Option(help: "Users with a fix (nearby's population; at least watchers + movers).") var users = 2_000
    @Option(help: "Connections (HTTP) and requests in flight (ZeroMQ) for nearby.") var connections = 64
    @Option(help: "Measured seconds of wrk.") var seconds = 10
    @Option(help: "WebSocket clients, each watching 3 movers.") var watchers = 1_000
    @Option(help: "People who move once a second.") var movers = 300
    @Option(help: "Moves each (one a second).") var moves = 10
    @Option(help: "Parts to run: nearby, events (comma-separated).") var parts = "nearby,events"
    @Option(help: "Folder with frienso-launch and the services (default: beside this executable).") var binDir: String?

    func validate() throws {
        guard users >= 2, connections >= 1, seconds >= 1, watchers >= 1, movers >= 3, moves >= 1 else {
            throw ValidationError("--users ≥ 2, --connections ≥ 1, --seconds ≥ 1, --watchers ≥ 1, --movers ≥ 3, --moves ≥ 1")
        }
        guard ScenarioParts.parse(parts, known: ["nearby", "events"]) != nil else { throw ValidationError("--parts takes nearby, events") }
    }

    @OptionGroup var results: ResultsOptions

    func run() async throws {
        var logger = Logger(label: "bench")
        logger.logLevel = .warning
        let options = EdgeScenario.Options(users: users, connections: connections, seconds: seconds, watchers: watchers, movers: movers,
                                           moves: moves, binDirectory: binDir)
        print(try await EdgeScenario.run(options, parts: ScenarioParts.parse(parts, known: ["nearby", "events"]) ?? [], logger: logger))
        try results.write("edge")
    }
}

/// Where a scenario's results go as JSON, beside the printed tables.
struct ResultsOptions: ParsableArguments {
    @Option(help: "Folder for the run's JSON results (frienso-bench report draws them).") var resultsDir = "bench-results"
    @Option(help: "A name for this run in charts (e.g. before, after); default: its start time.") var label: String?

    func write(_ scenario: String) throws {
        let path = try Results.shared.write(scenario: scenario, label: label, to: resultsDir)
        FileHandle.standardError.write(Data("results: \(path)\n".utf8))
    }
}

struct ReportCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "report",
        abstract: "Draws JSON results as one SVG chart per scenario (runs of one scenario side by side: before/after).")

    @Argument(help: "JSON files written by frienso-bench runs.") var files: [String]
    @Option(help: "Folder for the SVG files.") var out = "docs/benchmarks"

    func run() throws {
        for file in try ReportChart.write(files, to: out) { print(file) }
    }
}
