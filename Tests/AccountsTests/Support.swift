@testable import Accounts
import Foundation
import FriensoProto
import FriensoTesting
import Logging
import Synchronization
import Storage
import Wire

typealias API = AccountsV1.AccountsService

/// Time the tests move by hand (milliseconds since 1970).
final class TestClock: Sendable {
    private let ms = Atomic<Int64>(1_800_000_000_000)
    var now: Int64 { ms.load(ordering: .relaxed) }
    func advance(seconds: Double) { ms.add(Int64(seconds * 1000), ordering: .relaxed) }
}

/// Where one test's accounts data lives, across "restarts" (`TestStorage`).
typealias TestStore = TestStorage

extension TestStorage {
    static func fresh(_ engine: Engine) async throws -> TestStorage {
        try await fresh(engine, service: "accounts")
    }

    /// Opens an accounts service on this store; `close` ends its connections.
    func open(config: AccountsConfig, events: (any ServiceEventSink)? = nil,
              blocks: AccountsService.BlockCheck? = nil) async throws -> (service: AccountsService, close: @Sendable () async -> Void) {
        let storage = try await open()
        do {
            let service = try await AccountsService.open(storage, config: config, events: events, blocks: blocks)
            return (service, { await storage.close() })
        } catch {
            await storage.close()
            throw error
        }
    }
}

/// Opens an accounts service on a fresh store of `engine` for `body`; closes and removes it after.
func withOpenStore<T>(_ engine: Engine, config: AccountsConfig, events: (any ServiceEventSink)? = nil,
                      _ body: (TestStore, AccountsService) async throws -> T) async throws -> T {
    let store = try await TestStore.fresh(engine)
    do {
        let (service, close) = try await store.open(config: config, events: events)
        do {
            let result = try await body(store, service)
            await close()
            await store.remove()
            return result
        } catch {
            await close()
            throw error
        }
    } catch {
        await store.remove()
        throw error
    }
}

/// An accounts service called in process (`RouterClient`: its router and its durable reply
/// cache, no socket), with a client that can act as the gateway.
struct AccountsHarness: Sendable {
    let client: RouterClient
    let clock: TestClock
    let directory: String
    var store: TestStore? = nil
    var service: AccountsService? = nil

    /// What the gateway would stamp for a token.
    func caller(_ token: String) async throws -> CallOptions {
        let session = try await client.call(API.validateSession, AccountsV1.ValidateSessionRequest(sessionToken: token))
        return CallOptions(callerUserID: session.userId, sessionID: session.sessionId)
    }

    @discardableResult
    func register(_ username: String, email: String? = nil, phone: String? = nil, password: String = "correct horse 1") async throws -> AccountsV1.Account {
        let request = AccountsV1.RegisterRequest(
            username: username, email: email ?? "\(username)@example.org",
            phone: phone ?? "+1562555\(String(format: "%04d", abs(username.hashValue) % 10_000))",
            password: password, firstName: "First", lastName: "Last")
        return try await client.call(API.register, request).account ?? AccountsV1.Account()
    }

    func login(_ login: String, password: String = "correct horse 1", from address: String = "10.0.0.1") async throws -> String {
        try await client.call(API.login, AccountsV1.LoginRequest(login: login, password: password),
                              options: CallOptions(clientAddress: address)).sessionToken
    }
}

/// Cheap argon2 (see `TestHashing`): the production hasher has one lane on two cores, and the
/// whole suite's registrations queued behind it past the 5 s deadline in a fresh-clone CI run.
/// The test of the stored parameters uses `.owasp` explicitly.
func testConfig(_ clock: TestClock) -> AccountsConfig {
    var config = AccountsConfig()
    config.hasher = PasswordHasher(opsLimit: TestHashing.opsLimit, memLimit: TestHashing.memLimit, lanes: TestHashing.lanes)
    config.now = { clock.now }
    return config
}

/// Runs an accounts service on `store` (a fresh one on `engine` unless given) for `body`.
func withAccounts<T: Sendable>(
    _ engine: Engine = .sqlite, store given: TestStore? = nil, clock: TestClock = TestClock(),
    configure: (inout AccountsConfig) -> Void = { _ in },
    _ body: @Sendable (AccountsHarness) async throws -> T
) async throws -> T {
    let fresh = given == nil ? try await TestStore.fresh(engine) : nil
    let store = given ?? fresh!
    let logs = CapturedLogs()
    var config = testConfig(clock)
    configure(&config)
    let (service, close) = try await store.open(config: config)
    do {
        let client = RouterClient(service, name: "accounts", logger: logs.logger("accounts"))
        let result = try await body(AccountsHarness(client: client, clock: clock, directory: store.directory, store: store, service: service))
        await client.flush() // a graceful stop: replies being saved are in before a "restart"
        await close()
        await fresh?.remove()
        return result
    } catch {
        await close()
        await fresh?.remove()
        throw error
    }
}

import Testing
