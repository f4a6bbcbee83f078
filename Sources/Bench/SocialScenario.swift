import Accounts
import Foundation
import FriensoClient
import FriensoProto
import Gateway
import GRDB
public import Logging
import ServiceLifecycle
import Social
import SocialReplica
import Wire

/// `social`: a 200-friend list through the gateway, and a large graph snapshot loaded by a replica.
public enum SocialScenario {
    public struct Options: Sendable {
        public var requests: Int
        public var warmup: Int
        public var inFlight: [Int]
        public var friends: Int
        public var edges: Int
        public var users: Int

        public init(requests: Int, warmup: Int, inFlight: [Int], friends: Int, edges: Int, users: Int) {
            self.requests = requests
            self.warmup = warmup
            self.inFlight = inFlight
            self.friends = friends
            self.edges = edges
            self.users = users
        }
    }

    public static func run(_ options: Options, logger: Logger) async throws -> String {
        let dir = BenchStack.scratchDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        for sub in ["accounts", "social"] { try FileManager.default.createDirectory(atPath: "\(dir)/\(sub)", withIntermediateDirectories: true) }
        var quiet = logger
        quiet.logLevel = .warning
        var out: [String] = []

        // Each would-be process gets its own reactor and libzmq context, as deployed.
        let accountsContext = ZMQContext(), accountsReactor = Reactor(name: "bench-accounts")
        let accountsEvents = Publisher(name: "accounts", endpoint: "tcp://127.0.0.1:*", logger: quiet, context: accountsContext, reactor: accountsReactor)
        let accounts = try AccountsService(directory: "\(dir)/accounts", config: BenchStack.accountsConfig(), events: accountsEvents).makeHost(
            options: HostOptions(name: "accounts", endpoint: "tcp://127.0.0.1:*"), logger: quiet,
            context: accountsContext, reactor: accountsReactor)
        let socialContext = ZMQContext(), socialReactor = Reactor(name: "bench-social")
        let publisher = Publisher(name: "social", endpoint: "tcp://127.0.0.1:*", logger: quiet, context: socialContext, reactor: socialReactor)
        let clientContext = ZMQContext(), clientReactor = Reactor(name: "bench-client")

        try await withThrowingTaskGroup(of: Void.self) { tasks in
            let accountsGroup = ServiceGroup(configuration: .init(services: [.init(service: accountsEvents), .init(service: accounts)], logger: quiet))
            tasks.addTask { try await accountsGroup.run() }
            let accountsEndpoint = try await accounts.boundEndpoint()
            let toAccounts = WireClient(endpoint: accountsEndpoint, logger: quiet, context: socialContext, reactor: socialReactor)
            // Social keeps profiles in memory from accounts' stream, as deployed.
            let profiles = ProfileReplica.profiles(accounts: toAccounts, eventsEndpoint: try await accountsEvents.boundEndpoint(),
                                                   logger: quiet, context: socialContext, reactor: socialReactor)
            let social = try SocialService(directory: "\(dir)/social", accounts: toAccounts, publisher: publisher, profiles: profiles)
                .makeHost(options: HostOptions(name: "social", endpoint: "tcp://127.0.0.1:*"), logger: quiet,
                          context: socialContext, reactor: socialReactor)
            let socialGroup = ServiceGroup(configuration: .init(services: [.init(service: publisher), .init(service: profiles),
                                                                           .init(service: social)], logger: quiet))
            tasks.addTask { try await socialGroup.run() }
            let socialEndpoint = try await social.boundEndpoint()
            let (gateway, gatewayGroup) = BenchStack.gateway(services: ["accounts": accountsEndpoint, "social": socialEndpoint], logger: quiet)
            tasks.addTask { try await gatewayGroup.run() }
            let gatewayEndpoint = try await gateway.boundEndpoint()

            // 1. A user with `friends` friends, made through the gateway like real users.
            func user(_ name: String, _ number: Int) async throws -> FriensoClient {
                try await BenchStack.user(name, number: number, gateway: gatewayEndpoint, logger: quiet,
                                          context: clientContext, reactor: clientReactor).client
            }
            let main = try await user("bench_main", 0)
            for i in 0..<options.friends {
                let friend = try await user("bench_f\(i)", i + 1)
                _ = try await main.call(SocialV1.SocialService.sendFriendRequest, SocialV1.SendFriendRequestRequest(username: "bench_f\(i)"))
                _ = try await friend.call(SocialV1.SocialService.sendFriendRequest, SocialV1.SendFriendRequestRequest(username: "bench_main"))
                await friend.close()
            }
            let check = try await main.call(SocialV1.SocialService.listFriends, SocialV1.ListFriendsRequest())
            guard check.friends.count == options.friends else { throw RPCError.internal("setup made \(check.friends.count) friends") }
            let mainID = try await main.call(AccountsV1.AccountsService.whoAmI, AccountsV1.WhoAmIRequest()).account?.profile?.userId ?? 0
            let friendIDs = check.friends.compactMap { $0.user?.userId }
            // Setup, not measured: every profile has reached social's replica (bounded wait).
            for _ in 0..<300 where profiles.read({ $0.count }) < options.friends + 1 {
                try await Task.sleep(for: .milliseconds(10))
            }
            // The same work without the front hops, to show where the time goes.
            let directAccounts = WireClient(endpoint: accountsEndpoint, logger: quiet, context: clientContext, reactor: clientReactor)
            let directSocial = WireClient(endpoint: socialEndpoint, logger: quiet, context: clientContext, reactor: clientReactor)
            var rows: [LatencyStats] = []
            await withTaskExecutorPreference(clientReactor) {
                rows.append(await drive(name: "GetProfiles (\(options.friends) ids) → accounts", inFlight: 1,
                                        count: options.requests / 4, warmup: options.warmup) {
                    (try? await directAccounts.call(AccountsV1.AccountsService.getProfiles, AccountsV1.GetProfilesRequest(userIds: friendIDs)))?
                        .profiles.count == options.friends
                })
                rows.append(await drive(name: "ListFriends → social (profiles replicated)", inFlight: 1, count: options.requests / 4, warmup: options.warmup) {
                    (try? await directSocial.call(SocialV1.SocialService.listFriends, SocialV1.ListFriendsRequest(),
                                                  options: CallOptions(callerUserID: mainID)))?.friends.count == options.friends
                })
                for n in options.inFlight {
                    rows.append(await drive(name: "ListFriends (\(options.friends) friends) via gateway", inFlight: n,
                                            count: options.requests, warmup: options.warmup) {
                        (try? await main.call(SocialV1.SocialService.listFriends, SocialV1.ListFriendsRequest()))?.friends.count == options.friends
                    })
                }
            }
            await main.close()
            await directAccounts.close()
            await directSocial.close()
            out.append(Report.table(rows))
            for row in rows where row.name.hasSuffix("via gateway") {
                out.append("- \(row.inFlight) in flight: p99 \(Report.f(row.micros(99))) µs (target at 64 in flight: ≤ 2,000 µs)")
            }

            // 2. A large graph, written straight into social's database (setup, not measured), then
            //    loaded by a replica from the running service: transfer and load timed, memory measured.
            let seeded = try seed(path: "\(dir)/social/social.sqlite", edges: options.edges, users: options.users)
            let toSocial = WireClient(endpoint: socialEndpoint, logger: quiet, context: clientContext, reactor: clientReactor)
            var loads: [Double] = []
            var bytesPerEdge = 0.0
            var friendships = 0
            for _ in 0..<3 {
                let before = BenchStack.heapInUse()
                let start = ContinuousClock.now
                let (state, _) = try await SocialGraphReplica.fetchSnapshot(from: toSocial)
                loads.append(BenchStack.seconds(start.duration(to: .now)))
                let after = BenchStack.heapInUse()
                friendships = state.friendshipCount
                bytesPerEdge = Double(after - before) / Double(friendships)
                withExtendedLifetime(state) {}
            }
            await toSocial.close()
            out.append("")
            out.append("| snapshot | friendships | users | load s (best of 3) | load s (each) | replica heap B/edge |")
            out.append("|---|---:|---:|---:|---:|---:|")
            out.append("| GraphSnapshot pages → GraphState | \(friendships) | \(seeded.users) | \(String(format: "%.2f", loads.min() ?? 0)) | \(loads.map { String(format: "%.2f", $0) }.joined(separator: ", ")) | \(String(format: "%.1f", bytesPerEdge)) |")
            out.append("- targets: load ≤ 2 s, ≤ 24 B/edge")

            await toAccounts.close()
            await gatewayGroup.triggerGracefulShutdown()
            await socialGroup.triggerGracefulShutdown()
            await accountsGroup.triggerGracefulShutdown()
            try await tasks.waitForAll()
        }
        return out.joined(separator: "\n")
    }

    /// Writes `edges` distinct random friendships among `users` ids above the ones in use.
    static func seed(path: String, edges: Int, users: Int) throws -> (edges: Int, users: Int) {
        let db = try DatabaseQueue(path: path)
        var rng = SystemRandomNumberGenerator()
        let base: UInt64 = 1_000_000
        var made = Set<UInt64>()
        made.reserveCapacity(edges)
        try db.write { db in
            let insert = try db.makeStatement(sql: "INSERT OR IGNORE INTO friendships (user_a, user_b, since_ms) VALUES (?, ?, 0)")
            while made.count < edges {
                let x = UInt64.random(in: 0..<UInt64(users), using: &rng), y = UInt64.random(in: 0..<UInt64(users), using: &rng)
                guard x != y else { continue }
                let (a, b) = (min(x, y), max(x, y))
                guard made.insert(a << 32 | b).inserted else { continue }
                try insert.execute(arguments: [base + a, base + b])
            }
        }
        return (made.count, users)
    }
}
