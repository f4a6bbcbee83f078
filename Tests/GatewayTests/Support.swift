import Accounts
import FriensoClient
import FriensoProto
import FriensoTesting
import Gateway
import Logging
import ServiceLifecycle
import Wire

typealias API = AccountsV1.AccountsService

/// Accounts and a gateway in process, on ephemeral ports.
struct Stack: Sendable {
    let gateway: Gateway
    let endpoint: String
    let logs: CapturedLogs

    func client(token: String = "") -> FriensoClient {
        FriensoClient(gateway: endpoint, token: token, options: .patient, logger: logs.logger("client"))
    }

    /// Registers and logs in `name`, returning a client that carries the session.
    func user(_ name: String, phone: String) async throws -> FriensoClient {
        let client = client()
        _ = try await client.call(API.register, AccountsV1.RegisterRequest(
            username: name, email: "\(name)@example.org", phone: phone, password: "password \(name)", firstName: "F", lastName: "L"))
        _ = try await client.login(name, password: "password \(name)")
        return client
    }
}

/// Runs accounts (or `accountsHandler` in its place) and a gateway configured by `configure`.
func withStack<T: Sendable>(
    accountsHandler: (any RequestHandler)? = nil,
    extraServices: [any Service] = [],
    configure: @Sendable (inout GatewayConfig) async throws -> Void = { _ in },
    _ body: @Sendable (Stack) async throws -> T
) async throws -> T {
    let logs = CapturedLogs()
    let dir = try TemporaryDirectory("frienso-gateway")
    defer { dir.remove() }
    let accountsHost: ServiceHost
    let hostOptions = HostOptions(name: "accounts", endpoint: "tcp://127.0.0.1:*")
    if let accountsHandler {
        accountsHost = ServiceHost(options: hostOptions, handler: accountsHandler, logger: logs.logger("accounts"))
    } else {
        accountsHost = try AccountsService(directory: dir.path, config: cheapAccountsConfig()).makeHost(options: hostOptions, logger: logs.logger("accounts"))
    }
    return try await withRunningServices([accountsHost] + extraServices, logger: logs.logger("group")) {
        var config = GatewayConfig(endpoint: "tcp://127.0.0.1:*", services: ["accounts": try await accountsHost.boundEndpoint()])
        try await configure(&config)
        let gateway = Gateway(config: config, logger: logs.logger("gateway"))
        return try await withRunningServices([gateway], logger: logs.logger("group")) {
            try await body(Stack(gateway: gateway, endpoint: try await gateway.boundEndpoint(), logs: logs))
        }
    }
}

import Testing

/// Accounts with cheap password hashing (`TestHashing`).
func cheapAccountsConfig() -> AccountsConfig {
    var config = AccountsConfig()
    config.hasher = PasswordHasher(opsLimit: TestHashing.opsLimit, memLimit: TestHashing.memLimit, lanes: TestHashing.lanes)
    return config
}
