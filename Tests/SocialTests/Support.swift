import Accounts
import FriensoClient
import FriensoProto
import FriensoTesting
import Gateway
import Logging
import ServiceLifecycle
import Social
import Wire

typealias API = SocialV1.SocialService

/// Accounts, social and a gateway, in process; `user(_:)` registers and logs someone in.
struct SocialStack: Sendable {
    let endpoint: String
    let logs: CapturedLogs
    /// Social's own request and event endpoints (for replicas, which use internal methods).
    let socialEndpoint: String
    let socialEvents: String

    func user(_ name: String, phone explicitPhone: String? = nil) async throws -> (client: FriensoClient, id: UInt64) {
        let client = FriensoClient(gateway: endpoint, logger: logs.logger("client-\(name)"))
        let phone = explicitPhone ?? "+1562\(String(format: "%07d", abs(name.hashValue) % 10_000_000))"
        _ = try await client.call(AccountsV1.AccountsService.register, AccountsV1.RegisterRequest(
            username: name, email: "\(name)@example.org", phone: phone, password: "password \(name)", firstName: name.capitalized, lastName: "Test"))
        let login = try await client.login(name, password: "password \(name)")
        return (client, login.account?.profile?.userId ?? 0)
    }
}

/// Runs the stack; `socialDirectory` lets a test restart social on the same data, and
/// `socialEndpoints` on the same request and event endpoints.
func withSocial<T: Sendable>(socialDirectory: String? = nil, accountsDirectory: String? = nil,
                             socialEndpoints: (requests: String, events: String)? = nil, snapshotPageSize: Int = 100_000,
                             geoEndpoint: String? = nil,
                             _ body: @Sendable (SocialStack) async throws -> T) async throws -> T {
    let logs = CapturedLogs()
    let temp = try TemporaryDirectory("frienso-social")
    defer { temp.remove() }
    let accountsDir = accountsDirectory ?? "\(temp.path)/accounts"
    let socialDir = socialDirectory ?? "\(temp.path)/social"
    for dir in [accountsDir, socialDir] { try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true) }
    var config = AccountsConfig()
    config.hasher = PasswordHasher(opsLimit: TestHashing.opsLimit, memLimit: TestHashing.memLimit, lanes: TestHashing.lanes)
    let accounts = try AccountsService(directory: accountsDir, config: config)
        .makeHost(options: HostOptions(name: "accounts", endpoint: "tcp://127.0.0.1:*"), logger: logs.logger("accounts"))
    return try await withRunningServices([accounts], logger: logs.logger("group")) {
        let accountsEndpoint = try await accounts.boundEndpoint()
        let toAccounts = WireClient(endpoint: accountsEndpoint, logger: logs.logger("social→accounts"))
        let publisher = Publisher(name: "social", endpoint: socialEndpoints?.events ?? "tcp://127.0.0.1:*", logger: logs.logger("social-pub"))
        let social = try SocialService(directory: socialDir, accounts: toAccounts, publisher: publisher,
                                   snapshotPageSize: snapshotPageSize,
                                   geo: geoEndpoint.map { WireClient(endpoint: $0, logger: logs.logger("social→geo")) })
            .makeHost(options: HostOptions(name: "social", endpoint: socialEndpoints?.requests ?? "tcp://127.0.0.1:*"), logger: logs.logger("social"))
        return try await withRunningServices([publisher, social], logger: logs.logger("group")) {
            var config = GatewayConfig(endpoint: "tcp://127.0.0.1:*", services: [
                "accounts": accountsEndpoint, "social": try await social.boundEndpoint()])
            config.eventSources = ["social": try await publisher.boundEndpoint()]
            config.requestsPerSecond = 10_000
            config.burst = 10_000
            let gateway = Gateway(config: config, logger: logs.logger("gateway"))
            let result = try await withRunningServices([gateway], logger: logs.logger("group")) {
                try await body(SocialStack(endpoint: try await gateway.boundEndpoint(), logs: logs,
                                           socialEndpoint: try await social.boundEndpoint(), socialEvents: try await publisher.boundEndpoint()))
            }
            await toAccounts.close()
            return result
        }
    }
}

import Foundation
