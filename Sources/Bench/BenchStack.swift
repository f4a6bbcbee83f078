import Accounts
import CLinuxShims
import Foundation
import FriensoClient
import FriensoProto
import Gateway
import Logging
import ServiceLifecycle
import Wire

/// What the scenarios set up the same way: accounts with cheap hashing, an unthrottled
/// gateway, users registered and logged in through it.
enum BenchStack {
    /// A new folder for a run's databases (the caller removes it).
    static func scratchDirectory() -> String {
        FileManager.default.temporaryDirectory.appendingPathComponent("frienso-bench-\(UUID().uuidString)").path
    }

    /// Bytes the heap has handed out (glibc `mallinfo2`): before and after building a structure.
    static func heapInUse() -> Int { Int(frienso_heap_in_use()) }

    static func seconds(_ d: Duration) -> Double {
        Double(d.components.seconds) + Double(d.components.attoseconds) / 1e18
    }

    /// Registration is setup, not measured: cheap hashing keeps it quick.
    static func accountsConfig() -> AccountsConfig {
        var config = AccountsConfig()
        config.hasher = PasswordHasher(opsLimit: 1, memLimit: 8_192, lanes: 1)
        return config
    }

    /// A gateway over `services` with no rate limit, and the group that runs it.
    static func gateway(services: [String: String], logger: Logger, keyring: Keyring? = nil, context: ZMQContext = ZMQContext(),
                        reactor: Reactor = Reactor(name: "bench-gateway")) -> (gateway: Gateway, group: ServiceGroup) {
        var config = GatewayConfig(endpoint: "tcp://127.0.0.1:*", services: services)
        config.keyring = keyring
        config.requestsPerSecond = 1e9
        config.burst = 1e9
        let gateway = Gateway(config: config, logger: logger, context: context, reactor: reactor)
        return (gateway, ServiceGroup(configuration: .init(services: [.init(service: gateway)], logger: logger)))
    }

    /// One deployment's internal plane in memory: a keyring for each of `members` (a key pair of
    /// its own, every member's public key), as `frienso-launch` makes them on disk.
    static func keyrings(_ members: [String]) throws -> [String: Keyring] {
        let pairs = try members.map { ($0, try CurveKeys.generate()) }
        let publicKeys = Dictionary(uniqueKeysWithValues: pairs.map { ($0.0, $0.1.publicKey) })
        return try Dictionary(uniqueKeysWithValues: pairs.map { ($0.0, try Keyring(member: $0.0, keys: $0.1, members: publicKeys)) })
    }

    /// Registers `name` through the gateway and logs in. `number` makes the phone unique in the run.
    static func user(_ name: String, number: Int, gateway: String, logger: Logger, context: ZMQContext,
                     reactor: Reactor) async throws -> (client: FriensoClient, id: UInt64) {
        let client = FriensoClient(gateway: gateway, logger: logger, context: context, reactor: reactor)
        _ = try await client.call(AccountsV1.AccountsService.register, AccountsV1.RegisterRequest(
            username: name, email: "\(name)@bench.example", phone: "+1555\(String(format: "%07d", 1_000_000 + number))",
            password: "bench password", firstName: "Bench", lastName: name))
        let login = try await client.login(name, password: "bench password")
        return (client, login.account?.profile?.userId ?? 0)
    }
}

/// A scenario's parts as the commands take them: "index,service".
public enum ScenarioParts {
    /// nil unless every item is one of `known`.
    public static func parse(_ text: String, known: Set<String>) -> Set<String>? {
        let parts = Set(text.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) })
        return !parts.isEmpty && parts.isSubset(of: known) ? parts : nil
    }
}

/// Requests in flight as the commands take them: "1,64".
public enum LoadLevels {
    /// nil unless every item is a number from 1 to `max`.
    public static func parse(_ text: String, max: Int = 4_096) -> [Int]? {
        let items = text.split(separator: ",").map { Int($0.trimmingCharacters(in: .whitespaces)) }
        guard !items.isEmpty, items.allSatisfy({ $0.map { (1...max).contains($0) } ?? false }) else { return nil }
        return items.compactMap { $0 }
    }
}
