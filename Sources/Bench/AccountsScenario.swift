import Accounts
import Foundation
import FriensoProto
public import Logging
import PostgresHarness
import ServiceKit
import ServiceLifecycle
import Storage
import Synchronization
import Wire

/// `accounts`: the same accounts service on SQLite and on PostgreSQL, in one run, behind its own
/// ZeroMQ host (no gateway): reads (ValidateSession, GetProfiles of 50 users) and durable writes
/// (EditProfile, which also publishes the profile event in commit order), at 1 and 64 in flight.
/// PostgreSQL is a real server (Debian's, on loopback, in a temp folder: `LocalPostgresServer`),
/// with its default durability (`synchronous_commit = on`).
public enum AccountsScenario {
    public typealias Options = EngineScenarioOptions

    public static func run(_ options: Options, logger: Logger) async throws -> String {
        try await EngineComparison.run(options, schema: "accounts", logger: logger, measure)
    }

    private static func measure(engine: String, storage: StorageEngine, options: Options, logger: Logger) async throws -> [LatencyStats] {
        try await EngineComparison.behindHost("accounts", engine: engine, logger: logger) { events, context, reactor in
            try await AccountsService.open(storage, config: BenchStack.accountsConfig(), events: events).makeHost(
                options: HostOptions(name: "accounts", endpoint: "tcp://127.0.0.1:*"), logger: logger, context: context, reactor: reactor)
        } load: { client, clientReactor in
            try await load(label: engine, client: client, clientReactor: clientReactor, options: options)
        }
    }

    /// The load: users with a session each (not measured), then the three operations at each
    /// level of in-flight requests; rows named "<label>: <operation>".
    static func load(label engine: String, client: WireClient, clientReactor: Reactor, options: Options) async throws -> [LatencyStats] {
        var rows: [LatencyStats] = []
        // Setup, not measured: users and one session each.
        var ids: [UInt64] = []
        var tokens: [String] = []
        for i in 0..<options.users {
            let name = "bench_\(engine.filter { $0.isLetter || $0.isNumber })_\(i)"
            let account = try await client.call(AccountsV1.AccountsService.register, AccountsV1.RegisterRequest(
                username: name, email: "\(name)@bench.example", phone: "+1555\(String(format: "%07d", 1_000_000 + i))",
                password: "bench password", firstName: "Bench", lastName: name)).account
            ids.append(account?.profile?.userId ?? 0)
            tokens.append(try await client.call(AccountsV1.AccountsService.login,
                                                AccountsV1.LoginRequest(login: name, password: "bench password")).sessionToken)
        }
        let fifty = Array(ids.prefix(50))
        let userIDs = ids, sessionTokens = tokens
        let counter = Counter()
        await withTaskExecutorPreference(clientReactor) {
            for n in options.inFlight {
                rows.append(await drive(name: "\(engine): ValidateSession", inFlight: n, count: options.requests, warmup: options.warmup) {
                    let token = sessionTokens[counter.next() % sessionTokens.count]
                    return (try? await client.call(AccountsV1.AccountsService.validateSession,
                                                   AccountsV1.ValidateSessionRequest(sessionToken: token)))?.userId != nil
                })
                rows.append(await drive(name: "\(engine): GetProfiles (50 users)", inFlight: n, count: options.requests, warmup: options.warmup) {
                    (try? await client.call(AccountsV1.AccountsService.getProfiles, AccountsV1.GetProfilesRequest(userIds: fifty)))?
                        .profiles.count == fifty.count
                })
                rows.append(await drive(name: "\(engine): EditProfile (durable write + event)", inFlight: n, count: options.requests / 4,
                                        warmup: options.warmup / 4) {
                    let i = counter.next()
                    return (try? await client.call(AccountsV1.AccountsService.editProfile,
                                                   AccountsV1.EditProfileRequest(fields: ["first_name"], firstName: "Edit \(i)"),
                                                   options: CallOptions(callerUserID: userIDs[i % userIDs.count]))) != nil
                })
            }
        }
        return rows
    }
}

/// What an engine comparison runs: the same load on each engine.
public struct EngineScenarioOptions: Sendable {
    public var requests: Int
    public var warmup: Int
    public var inFlight: [Int]
    /// Users (or callers) the load is spread over.
    public var users: Int
    public var engines: [String]

    public init(requests: Int, warmup: Int, inFlight: [Int], users: Int, engines: [String]) {
        self.requests = requests
        self.warmup = warmup
        self.inFlight = inFlight
        self.users = users
        self.engines = engines
    }
}

/// A number each call takes in turn, shared by a load's tasks (which user, which value).
final class Counter: Sendable {
    private let value = Atomic<Int>(0)
    func next() -> Int { value.add(1, ordering: .relaxed).newValue }
}

/// Runs a measurement on each engine in one run (PostgreSQL: a real server in a temp folder, a
/// fresh database), and compares them.
enum EngineComparison {
    /// Measures on each engine of `options` (the service's schema: `schema`), and compares.
    static func run(_ options: EngineScenarioOptions, schema: String, logger: Logger,
                    _ measure: (String, StorageEngine, EngineScenarioOptions, Logger) async throws -> [LatencyStats]) async throws -> String {
        var quiet = logger
        quiet.logLevel = .warning
        let rows = try await each(options.engines, schema: schema, logger: quiet) { engine, storage in
            try await measure(engine, storage, options, quiet)
        }
        return report(rows, inFlight: options.inFlight)
    }

    /// Runs the host `host` makes (with its publisher, on a context and reactor of their own, as a
    /// deployed process has), and `load` with a client of it on a reactor of its own; stops both.
    static func behindHost(_ name: String, engine: String, logger: Logger,
                           _ host: (Publisher, ZMQContext, Reactor) async throws -> ServiceHost,
                           load: (WireClient, Reactor) async throws -> [LatencyStats]) async throws -> [LatencyStats] {
        try await behindHosts(name, label: engine, count: 1, logger: logger, { _, events, context, reactor in
            try await host(events, context, reactor)
        }, load: load)
    }

    /// As `behindHost`, with `count` instances of the service (the n-th made by `host(n, …)`,
    /// each with its own context and reactor, as separate processes have), and a client given
    /// all of them (an endpoint list: it spreads the calls).
    static func behindHosts(_ name: String, label: String, count: Int, logger: Logger,
                            _ host: (Int, Publisher, ZMQContext, Reactor) async throws -> ServiceHost,
                            load: (WireClient, Reactor) async throws -> [LatencyStats]) async throws -> [LatencyStats] {
        var services: [any Service] = []
        var hosts: [ServiceHost] = []
        for index in 0..<count {
            let context = ZMQContext(), reactor = Reactor(name: "bench-\(name)-\(label)-\(index)")
            let events = Publisher(name: name, endpoint: "tcp://127.0.0.1:*", logger: logger, context: context, reactor: reactor)
            let made = try await host(index, events, context, reactor)
            hosts.append(made)
            services += [events, made]
        }
        let group = ServiceGroup(configuration: .init(services: services.map { .init(service: $0) }, logger: logger))
        let clientContext = ZMQContext(), clientReactor = Reactor(name: "bench-client-\(label)")
        return try await withThrowingTaskGroup(of: Void.self) { tasks in
            tasks.addTask { try await group.run() }
            var endpoints: [String] = []
            for host in hosts { endpoints.append(try await host.boundEndpoint()) }
            let client = WireClient(endpoint: EndpointList.join(endpoints), logger: logger, context: clientContext, reactor: clientReactor)
            do {
                let rows = try await load(client, clientReactor)
                await client.close()
                await group.triggerGracefulShutdown()
                try await tasks.waitForAll()
                return rows
            } catch {
                await client.close()
                await group.triggerGracefulShutdown()
                throw error
            }
        }
    }

    static func each(_ engines: [String], schema: String, logger: Logger,
                     _ measure: (String, StorageEngine) async throws -> [LatencyStats]) async throws -> [LatencyStats] {
        var server: LocalPostgresServer?
        if engines.contains("postgres") {
            server = try await Task.detached { try LocalPostgresServer.start(prefix: "frienso-bench-pg") }.value
        }
        defer { server?.stop() }
        var rows: [LatencyStats] = []
        for engine in engines {
            let dir = BenchStack.scratchDirectory()
            defer { try? FileManager.default.removeItem(atPath: dir) }
            let storage: StorageEngine
            if engine == "postgres", let server {
                let name = try server.createDatabase("bench")
                storage = .postgres(try await PostgresServiceDatabase.open(try PostgresSettings(url: server.url(database: name), schema: schema),
                                                                          logger: logger))
            } else {
                storage = .sqlite(directory: dir)
            }
            do {
                rows += try await measure(engine, storage)
            } catch {
                await storage.close()
                throw error
            }
            await storage.close()
        }
        return rows
    }

    /// The rows, then each operation's PostgreSQL/SQLite ratios (rows named "<engine>: <operation>").
    static func report(_ rows: [LatencyStats], inFlight: [Int]) -> String {
        var out = [Report.table(rows)]
        for name in Set(rows.map { $0.name.replacingOccurrences(of: "sqlite: ", with: "").replacingOccurrences(of: "postgres: ", with: "") }).sorted() {
            for n in inFlight {
                guard let sqlite = rows.first(where: { $0.name == "sqlite: \(name)" && $0.inFlight == n }),
                      let postgres = rows.first(where: { $0.name == "postgres: \(name)" && $0.inFlight == n }) else { continue }
                out.append("- \(name), \(n) in flight: PostgreSQL/SQLite throughput \(String(format: "%.2f", postgres.throughput / max(sqlite.throughput, 1)))×, "
                           + "p99 \(String(format: "%.2f", postgres.micros(99) / max(sqlite.micros(99), 1)))×")
            }
        }
        return out.joined(separator: "\n")
    }
}
