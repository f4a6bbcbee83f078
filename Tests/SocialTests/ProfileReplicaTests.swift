import Accounts
import Foundation
import FriensoProto
import FriensoTesting
import Social
import SocialReplica
import Synchronization
import Testing
import Wire

/// Social's replica of accounts' profiles (a Clone of the `profiles` stream), over real sockets:
/// the snapshot, then every registration and edit as an event; and social's friend lists served
/// from it without asking accounts.
@Suite("social: profiles replicated from accounts", .serialized, .timeLimit(.minutes(2)))
struct ProfileReplicaTests {
    @Test func snapshotThenEvents_keepEveryProfile_andFriendListsNeedNoAccountsCall() async throws {
        let logs = CapturedLogs()
        let temp = try TemporaryDirectory("frienso-profiles")
        defer { temp.remove() }
        let events = Publisher(name: "accounts", endpoint: "tcp://127.0.0.1:*", logger: logs.logger("accounts-pub"))
        let accountsHost = try accountsService("\(temp.path)/accounts", events: events)
            .makeHost(options: HostOptions(name: "accounts", endpoint: "tcp://127.0.0.1:*"), logger: logs.logger("accounts"))
        try await withRunningServices([events, accountsHost], logger: logs.logger("group")) {
            let accounts = WireClient(endpoint: try await accountsHost.boundEndpoint(), options: .patient, logger: logs.logger("social→accounts"))
            defer { Task { await accounts.close() } }
            @Sendable func register(_ name: String) async throws -> UInt64 {
                try await accounts.call(AccountsV1.AccountsService.register, registration(name, phone: nil), options: CallOptions())
                    .account?.profile?.userId ?? 0
            }
            // Before the replica starts: these come in its snapshot (pages of 2, so three pages).
            var registered: [String: UInt64] = [:]
            for name in ["pr_ann", "pr_bob", "pr_cat", "pr_dan", "pr_eve"] { registered[name] = try await register(name) }
            let ids = registered
            let ann = ids["pr_ann"] ?? 0, bob = ids["pr_bob"] ?? 0
            let replica = ProfileReplica.profiles(accounts: accounts, eventsEndpoint: try await events.boundEndpoint(),
                                                  logger: logs.logger("replica"), checkInterval: .seconds(60), pageSize: 2)
            try await withRunningServices([replica], logger: logs.logger("group")) {
                await replica.ready()
                #expect(replica.read { $0.count } == 5)
                #expect(replica.read { $0[ids["pr_cat"] ?? 0]?.username } == "pr_cat")
                // The SUB socket joins asynchronously (ZeroMQ's slow joiner): edit until one edit has
                // arrived; from then on the stream is unbroken and every change must come as an event.
                let dan = ids["pr_dan"] ?? 0
                let warmups = Atomic<Int>(0)
                try await eventually("the profiles stream is joined") {
                    let n = warmups.add(1, ordering: .relaxed).newValue
                    _ = try await accounts.call(AccountsV1.AccountsService.editProfile, AccountsV1.EditProfileRequest(
                        fields: ["last_name"], lastName: "Warm\(n)"), options: CallOptions(callerUserID: dan))
                    return replica.read { $0[dan]?.lastName.hasPrefix("Warm") ?? false }
                }
                let joined = replica.status.snapshots
                let fay = try await register("pr_fay")
                _ = try await accounts.call(AccountsV1.AccountsService.editProfile, AccountsV1.EditProfileRequest(
                    fields: ["first_name"], firstName: "Annabel"), options: CallOptions(callerUserID: ann))
                try await eventually("the new user and the edit replicated") {
                    replica.read { $0[fay]?.username == "pr_fay" && $0[ann]?.firstName == "Annabel" }
                }
                #expect(replica.status.snapshots == joined, "they came as events, not through a new snapshot")

                // Social with the replica: a friend list takes its names from memory.
                let social = RouterClient(try SocialService(directory: "\(temp.path)/social", accounts: accounts, publisher: EventRecorder(),
                                                            profiles: replica),
                                          name: "social", logger: logs.logger("social"))
                _ = try await social.call(API.sendFriendRequest, SocialV1.SendFriendRequestRequest(userId: bob), options: CallOptions(callerUserID: ann))
                _ = try await social.call(API.sendFriendRequest, SocialV1.SendFriendRequestRequest(userId: ann), options: CallOptions(callerUserID: bob))
                let asked = accountsHost.counters.requests.load(ordering: .relaxed)
                let friends = try await social.call(API.listFriends, SocialV1.ListFriendsRequest(), options: CallOptions(callerUserID: bob))
                #expect(friends.friends.map { $0.user?.firstName } == ["Annabel"])
                #expect(accountsHost.counters.requests.load(ordering: .relaxed) == asked, "no call to accounts for the list")

                // The list is cached now; a new friendship and a renamed friend both show at once.
                let cat = ids["pr_cat"] ?? 0
                @Sendable func names() async throws -> [String] {
                    try await social.call(API.listFriends, SocialV1.ListFriendsRequest(), options: CallOptions(callerUserID: bob))
                        .friends.map { "\($0.user?.firstName ?? "?") \($0.user?.username ?? "?")" }
                }
                #expect(try await names() == ["Annabel pr_ann"])
                _ = try await social.call(API.sendFriendRequest, SocialV1.SendFriendRequestRequest(userId: bob), options: CallOptions(callerUserID: cat))
                _ = try await social.call(API.sendFriendRequest, SocialV1.SendFriendRequestRequest(userId: cat), options: CallOptions(callerUserID: bob))
                #expect(try await names() == ["Annabel pr_ann", "Pr_Cat pr_cat"], "the friendship is in the next list, not a cached one")
                _ = try await accounts.call(AccountsV1.AccountsService.editProfile, AccountsV1.EditProfileRequest(
                    fields: ["first_name"], firstName: "Catalina"), options: CallOptions(callerUserID: cat))
                try await eventually("the renamed friend in the list") { try await names() == ["Annabel pr_ann", "Catalina pr_cat"] }
            }
        }
    }
}
