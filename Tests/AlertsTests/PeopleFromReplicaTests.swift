import Accounts
@testable import Alerts
import Foundation
import FriensoProto
import FriensoTesting
import SocialReplica
import Testing
import Wire

/// Alerts names a helpNow's circle from its replica of accounts' profiles: no call to accounts
/// for people it has, and accounts asked only for someone not replicated yet.
@Suite("alerts: names from the profile replica", .serialized, .timeLimit(.minutes(1)))
struct PeopleFromReplicaTests {
    @Test func replicatedPeople_needNoCall_andTheOthersAreAsked() async throws {
        let logs = CapturedLogs()
        let temp = try TemporaryDirectory("frienso-alerts-people")
        defer { temp.remove() }
        var config = AccountsConfig()
        config.hasher = PasswordHasher(opsLimit: TestHashing.opsLimit, memLimit: TestHashing.memLimit, lanes: TestHashing.lanes)
        let events = Publisher(name: "accounts", endpoint: "tcp://127.0.0.1:*", logger: logs.logger("accounts-pub"))
        let host = try AccountsService(directory: temp.path, config: config, events: events)
            .makeHost(options: HostOptions(name: "accounts", endpoint: "tcp://127.0.0.1:*"), logger: logs.logger("accounts"))
        try await withRunningServices([events, host], logger: logs.logger("group")) {
            let accounts = WireClient(endpoint: try await host.boundEndpoint(), options: .patient, logger: logs.logger("alerts→accounts"))
            defer { Task { await accounts.close() } }
            @Sendable func register(_ name: String, _ n: Int) async throws -> UInt64 {
                try await accounts.call(AccountsV1.AccountsService.register, AccountsV1.RegisterRequest(
                    username: name, email: "\(name)@example.org", phone: "+156255502\(n)0", password: "correct horse 1",
                    firstName: name.capitalized, lastName: "Test"), options: CallOptions()).account?.profile?.userId ?? 0
            }
            let ann = try await register("pp_ann", 1), bob = try await register("pp_bob", 2)
            // Social and geo are not reached by `people`: ports where nothing listens.
            let nowhere = try DeadPort()
            let replica = ProfileReplica.profiles(accounts: accounts, eventsEndpoint: try await events.boundEndpoint(),
                                                  logger: logs.logger("replica"), checkInterval: .seconds(60))
            let peers = RemotePeers(accounts: accounts, social: WireClient(endpoint: nowhere.endpoint, logger: logs.logger("social")),
                                    geo: WireClient(endpoint: nowhere.endpoint, logger: logs.logger("geo")), logger: logs.logger("peers"),
                                    profiles: replica, replicaCircle: { _ in [] })
            try await withRunningServices([replica], logger: logs.logger("group")) {
                await replica.ready()
                let before = host.counters.requests.load(ordering: .relaxed)
                let known = try await peers.people([ann, bob])
                #expect(known[ann]?.firstName == "Pp_Ann" && known[bob]?.username == "pp_bob")
                #expect(host.counters.requests.load(ordering: .relaxed) == before, "both names came from memory")
                // Registered after the snapshot: named from its event if it has arrived, else by accounts.
                let cat = try await register("pp_cat", 3)
                let all = try await peers.people([ann, cat])
                #expect(all[cat]?.username == "pp_cat" && all[ann]?.username == "pp_ann")
            }
        }
    }
}
