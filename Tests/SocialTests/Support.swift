import Accounts
import Foundation
import FriensoClient
import FriensoProto
import FriensoTesting
import Gateway
import Logging
import ServiceLifecycle
import Social
import Storage
import Wire

typealias API = SocialV1.SocialService

/// Accounts and social in process (`RouterClient`s: their routers and durable reply caches, no
/// socket), with an in-process gateway that stamps each caller's user id as the real one does.
struct SocialStack: Sendable {
    let gateway: InProcessGateway
    /// Social as an internal member (alerts) calls it: no caller stamped.
    let social: RouterClient
    /// What social published (graph events, pokes, notice wake-ups).
    let events: EventRecorder
    let logs: CapturedLogs
    /// The service itself, for its periodic work (`pruneNotices`).
    let service: SocialService

    /// Registers `name` and signs them in.
    func user(_ name: String, phone explicitPhone: String? = nil) async throws -> (client: Person, id: UInt64) {
        _ = try await gateway.person(0).call(AccountsV1.AccountsService.register, registration(name, phone: explicitPhone))
        let person = try await login(name, password: "password \(name)")
        return (person, person.id)
    }

    func login(_ name: String, password: String) async throws -> Person {
        try await gateway.login(name, password: password)
    }

    /// A client with no session.
    var anonymous: Person { gateway.person(0) }
}

func registration(_ name: String, phone: String?) -> AccountsV1.RegisterRequest {
    let phone = phone ?? "+1562\(String(format: "%07d", abs(name.hashValue) % 10_000_000))"
    return AccountsV1.RegisterRequest(username: name, email: "\(name)@example.org", phone: phone, password: "password \(name)",
                                      firstName: name.capitalized, lastName: "Test")
}

func accountsService(_ directory: String, events: (any NumberedEventSink)? = nil) throws -> AccountsService {
    var config = AccountsConfig()
    config.hasher = PasswordHasher(opsLimit: TestHashing.opsLimit, memLimit: TestHashing.memLimit, lanes: TestHashing.lanes)
    return try AccountsService(directory: directory, config: config, events: events)
}

/// Runs `body` with social's storage on `engine` open: `storage` when given (a test that
/// restarts social on the same data), else a fresh one, removed after.
func withSocialStorage<T>(_ engine: Engine, _ given: TestStorage?, _ body: (StorageEngine) async throws -> T) async throws -> T {
    try await TestStorage.withOpen(engine, given: given, service: "social") { _, opened in try await body(opened) }
}

/// Social's clock held still: everything it records happens in the same millisecond (ties in
/// every order by time).
let stillClock: @Sendable () -> Int64 = { 1_790_000_000_000 }

/// Runs accounts and social in process, social on `engine` (on `storage` when given, so a test
/// can restart social on the same data; accounts on SQLite in `accountsDirectory`, new unless
/// given). `geo` stands in for geo's internal methods.
func withSocial<T: Sendable>(_ engine: Engine = .sqlite, storage: TestStorage? = nil, accountsDirectory: String? = nil,
                             snapshotPageSize: Int = 100_000, geo: (any RPCCalling)? = nil, now: (@Sendable () -> Int64)? = nil,
                             _ body: @Sendable (SocialStack) async throws -> T) async throws -> T {
    let logs = CapturedLogs()
    let temp = try TemporaryDirectory("frienso-social")
    defer { temp.remove() }
    let accountsDir = accountsDirectory ?? "\(temp.path)/accounts"
    try FileManager.default.createDirectory(atPath: accountsDir, withIntermediateDirectories: true)
    return try await withSocialStorage(engine, storage) { opened in
        let accounts = RouterClient(try accountsService(accountsDir), name: "accounts", logger: logs.logger("accounts"))
        let events = EventRecorder()
        let service = try await SocialService.open(opened, accounts: accounts, publisher: events, snapshotPageSize: snapshotPageSize, geo: geo,
                                                   now: now)
        let social = RouterClient(service, name: "social", logger: logs.logger("social"))
        let gateway = InProcessGateway(["accounts": accounts, "social": social])
        let result = try await body(SocialStack(gateway: gateway, social: social, events: events, logs: logs, service: service))
        await social.flush() // a graceful stop: replies being saved are in before a "restart"
        await accounts.flush()
        return result
    }
}

/// Accounts, social and a gateway over ZeroMQ, for what only sockets show: the graph stream a
/// replica follows, and live events through the gateway.
struct SocketStack: Sendable {
    let endpoint: String
    let logs: CapturedLogs
    /// Social's own request and event endpoints (for replicas, which use internal methods).
    let socialEndpoint: String
    let socialEvents: String

    func user(_ name: String) async throws -> (client: FriensoClient, id: UInt64) {
        let client = FriensoClient(gateway: endpoint, options: .patient, logger: logs.logger("client-\(name)"))
        _ = try await client.call(AccountsV1.AccountsService.register, registration(name, phone: nil))
        let login = try await client.login(name, password: "password \(name)")
        return (client, login.account?.profile?.userId ?? 0)
    }
}

/// Runs the stack over sockets, social on `engine`; `socialEndpoints` lets a test restart social
/// on the same request and event endpoints (and `storage` on the same data).
func withSocialOverSockets<T: Sendable>(_ engine: Engine = .sqlite, storage: TestStorage? = nil, accountsDirectory: String? = nil,
                                        socialEndpoints: (requests: String, events: String)? = nil, snapshotPageSize: Int = 100_000,
                                        _ body: @Sendable (SocketStack) async throws -> T) async throws -> T {
    let logs = CapturedLogs()
    let temp = try TemporaryDirectory("frienso-social")
    defer { temp.remove() }
    let accountsDir = accountsDirectory ?? "\(temp.path)/accounts"
    try FileManager.default.createDirectory(atPath: accountsDir, withIntermediateDirectories: true)
    return try await withSocialStorage(engine, storage) { opened in
        let accounts = try accountsService(accountsDir)
            .makeHost(options: HostOptions(name: "accounts", endpoint: "tcp://127.0.0.1:*"), logger: logs.logger("accounts"))
        return try await withRunningServices([accounts], logger: logs.logger("group")) {
            let accountsEndpoint = try await accounts.boundEndpoint()
            let toAccounts = WireClient(endpoint: accountsEndpoint, options: .patient, logger: logs.logger("social→accounts"))
            let publisher = Publisher(name: "social", endpoint: socialEndpoints?.events ?? "tcp://127.0.0.1:*", logger: logs.logger("social-pub"))
            let social = try await SocialService.open(opened, accounts: toAccounts, publisher: publisher, snapshotPageSize: snapshotPageSize)
                .makeHost(options: HostOptions(name: "social", endpoint: socialEndpoints?.requests ?? "tcp://127.0.0.1:*"), logger: logs.logger("social"))
            return try await withRunningServices([publisher, social], logger: logs.logger("group")) {
                var config = GatewayConfig(endpoint: "tcp://127.0.0.1:*", services: [
                    "accounts": accountsEndpoint, "social": try await social.boundEndpoint()])
                config.eventSources = ["social": try await publisher.boundEndpoint()]
                config.requestsPerSecond = 10_000
                config.burst = 10_000
                let gateway = Gateway(config: config, logger: logs.logger("gateway"))
                let result = try await withRunningServices([gateway], logger: logs.logger("group")) {
                    try await body(SocketStack(endpoint: try await gateway.boundEndpoint(), logs: logs,
                                               socialEndpoint: try await social.boundEndpoint(), socialEvents: try await publisher.boundEndpoint()))
                }
                await toAccounts.close()
                return result
            }
        }
    }
}

extension SocialStack {
    /// Waits until every graph event committed so far has reached `events`: at once on SQLite
    /// (the service numbers and sends them as it commits), just after the commit on PostgreSQL
    /// (relayed from the database's event log).
    func graphEventsRelayed() async throws {
        let head = try await social.call(SocialV1.SocialService.graphSnapshot, SocialV1.GraphSnapshotRequest(sequenceOnly: true)).sequence
        let events = events
        try await eventually("every graph event relayed") {
            events.lastSequence(stream: SocialService.graphStream) >= head
                || (events.relayed.last { $0.topic == SocialService.graphStream }?.sequence ?? 0) >= head
        }
    }
}
