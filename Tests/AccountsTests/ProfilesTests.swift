@testable import Accounts
import Foundation
import FriensoProto
import FriensoTesting
import Testing
import Wire

/// What social's profile replica is fed: a `profiles` event per registration and edit, after the
/// commit and in order, and `ProfilesSnapshot` pages by user id with the stream's head.
@Suite("accounts: profiles for social's replica")
struct ProfilesTests {
    @Test(arguments: Engine.allCases) func everyChangeIsAnEvent_inOrder_andTheSnapshotPagesByID_withItsHead(engine: Engine) async throws {
        let events = EventRecorder()
        try await withOpenStore(engine, config: testConfig(TestClock()), events: events) { _, service in
            let accounts = RouterClient(service, name: "accounts", logger: CapturedLogs().logger("accounts"))
            var ids: [UInt64] = []
            for name in ["pf_ann", "pf_bob", "pf_cat"] {
                let account = try await accounts.call(API.register, AccountsV1.RegisterRequest(
                    username: name, email: "\(name)@example.org", phone: "+156255501\(ids.count)0", password: "correct horse 1",
                    firstName: "First", lastName: "Last")).account
                ids.append(account?.profile?.userId ?? 0)
            }
            _ = try await accounts.call(API.editProfile, AccountsV1.EditProfileRequest(fields: ["first_name"], firstName: "Annabel"),
                                        options: CallOptions(callerUserID: ids[0]))
            // A refused registration (the name is taken) and a refused edit announce nothing.
            await expectError(.alreadyExists) {
                _ = try await accounts.call(API.register, AccountsV1.RegisterRequest(
                    username: "pf_ann", email: "other@example.org", phone: "+15625550199", password: "correct horse 1", firstName: "A", lastName: "B"))
            }
            await expectError(.invalidArgument) {
                _ = try await accounts.call(API.editProfile, AccountsV1.EditProfileRequest(fields: ["first_name"], firstName: ""),
                                            options: CallOptions(callerUserID: ids[1]))
            }
            // On PostgreSQL the events are relayed from the database's log, just after the commit.
            try await eventually("four profile events") { events.all.filter { $0.topic == "profiles" }.count >= 4 }
            let changes = events.all.filter { $0.topic == "profiles" }
            #expect(changes.allSatisfy { $0.method == "accounts.ProfileChanged" })
            let profiles = changes.compactMap { try? AccountsV1.ProfileChanged(serializedBytes: $0.payload).profile }
            #expect(profiles.map(\.username) == ["pf_ann", "pf_bob", "pf_cat", "pf_ann"])
            #expect(profiles.last?.firstName == "Annabel")

            let first = try await accounts.call(API.profilesSnapshot, AccountsV1.ProfilesSnapshotRequest(limit: 2))
            #expect(first.epoch == events.announcedEpoch && first.sequence == 4)
            #expect(first.profiles.map(\.userId) == Array(ids.prefix(2)) && first.more)
            #expect(first.profiles.first?.firstName == "Annabel")
            let second = try await accounts.call(API.profilesSnapshot, AccountsV1.ProfilesSnapshotRequest(afterUserId: ids[1], limit: 2))
            #expect(second.profiles.map(\.userId) == [ids[2]] && !second.more)
            let head = try await accounts.call(API.profilesSnapshot, AccountsV1.ProfilesSnapshotRequest(sequenceOnly: true))
            #expect(head.profiles.isEmpty && head.sequence == 4 && head.epoch == events.announcedEpoch)
            await expectError(.invalidArgument, containing: "limit") {
                _ = try await accounts.call(API.profilesSnapshot, AccountsV1.ProfilesSnapshotRequest(limit: 10_001))
            }
        }
    }
}
