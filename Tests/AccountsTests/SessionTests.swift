import Foundation
@testable import Accounts
import FriensoProto
import FriensoTesting
import Testing
import ServiceKit
@testable import frienso_accounts
import Wire

@Suite("accounts: login, sessions, credentials", .timeLimit(.minutes(2)))
struct SessionTests {
    @Test("login works by username, email or phone", arguments: Engine.allCases)
    func loginByAnyIdentifier(engine: Engine) async throws {
        try await withAccounts(engine) { accounts in
            try await accounts.register("multi", email: "multi@example.org", phone: "+15625552222")
            for login in ["multi", "MULTI", "multi@example.org", "+1 562 555 2222"] {
                let token = try await accounts.login(login)
                #expect(token.hasPrefix("fs1_"))
                #expect(token.utf8.count == 47)
            }
        }
    }

    @Test(arguments: Engine.allCases) func wrongPassword_andUnknownUser_lookTheSame(engine: Engine) async throws {
        try await withAccounts(engine) { accounts in
            try await accounts.register("known")
            await expectError(.unauthenticated, containing: "wrong login or password") { _ = try await accounts.login("known", password: "nope nope") }
            await expectError(.unauthenticated, containing: "wrong login or password") { _ = try await accounts.login("unknown") }
            await expectError(.invalidArgument, containing: "password") { _ = try await accounts.login("known", password: "") }
            await expectError(.invalidArgument, containing: "login") { _ = try await accounts.login("") }
        }
    }

    @Test(arguments: Engine.allCases) func throttling_afterRepeatedFailures_refusesEvenTheRightPassword_untilTheLockoutPasses(engine: Engine) async throws {
        try await withAccounts(engine) { accounts in
            try await accounts.register("target")
            for _ in 0..<5 {
                await expectError(.unauthenticated) { _ = try await accounts.login("target", password: "guess guess") }
            }
            await expectError(.resourceExhausted, containing: "try again in") { _ = try await accounts.login("target") }
            accounts.clock.advance(seconds: 31)
            _ = try await accounts.login("target")
        }
    }

    @Test(arguments: Engine.allCases) func throttling_perClient_spansAccounts(engine: Engine) async throws {
        try await withAccounts(engine, configure: { $0.loginPolicy.client.maxFailures = 3 }) { accounts in
            try await accounts.register("victim")
            for name in ["a1", "a2", "a3"] {
                await expectError(.unauthenticated) { _ = try await accounts.login(name, password: "guess guess", from: "203.0.113.9") }
            }
            await expectError(.resourceExhausted) { _ = try await accounts.login("victim", from: "203.0.113.9") }
            // Another client is not affected.
            _ = try await accounts.login("victim", from: "198.51.100.1")
        }
    }

    @Test(arguments: Engine.allCases) func throttling_spraying_oneAddressFailingOnManyAccounts_isLockedOut_perAddress(engine: Engine) async throws {
        try await withAccounts(engine, configure: { $0.loginPolicy.spraying.maxFailures = 4 }) { accounts in
            try await accounts.register("victim")
            // Failing twice on one account counts once towards spraying.
            for name in ["s1", "s1", "s2", "s3"] {
                await expectError(.unauthenticated) { _ = try await accounts.login(name, password: "Summer2026!", from: "203.0.113.7") }
            }
            await expectError(.unauthenticated) { _ = try await accounts.login("s4", password: "Summer2026!", from: "203.0.113.7") }
            await expectError(.resourceExhausted, containing: "too many accounts") {
                _ = try await accounts.login("victim", from: "203.0.113.7")
            }
            _ = try await accounts.login("victim", from: "198.51.100.1")
            accounts.clock.advance(seconds: 301)
            _ = try await accounts.login("victim", from: "203.0.113.7")
        }
    }

    @Test(arguments: Engine.allCases) func throttles_surviveARestart(engine: Engine) async throws {
        let store = try await TestStore.fresh(engine)
        let clock = TestClock()
        try await withAccounts(store: store, clock: clock) { accounts in
            try await accounts.register("steady")
            for _ in 0..<5 {
                await expectError(.unauthenticated) { _ = try await accounts.login("steady", password: "guess guess", from: "203.0.113.1") }
            }
            for n in 0..<3 {
                await expectError(.unauthenticated) { _ = try await accounts.login("ghost\(n)", password: "guess guess", from: "203.0.113.2") }
            }
        }
        try await withAccounts(store: store, clock: clock, configure: { $0.loginPolicy.client.maxFailures = 4 }) { accounts in
            await expectError(.resourceExhausted, containing: "this account") { _ = try await accounts.login("steady", from: "198.51.100.1") }
            // The address's three failures are remembered: one more locks it.
            await expectError(.unauthenticated) { _ = try await accounts.login("ghost9", password: "guess guess", from: "203.0.113.2") }
            await expectError(.resourceExhausted, containing: "your address") { _ = try await accounts.login("anyone", from: "203.0.113.2") }
            accounts.clock.advance(seconds: 31)
            _ = try await accounts.login("steady", from: "198.51.100.1")
        }
        await store.remove()
    }

    @Test(arguments: Engine.allCases) func session_expires(engine: Engine) async throws {
        try await withAccounts(engine, configure: { $0.sessionTTL = 3_600 }) { accounts in
            try await accounts.register("mortal")
            let token = try await accounts.login("mortal")
            _ = try await accounts.caller(token)
            accounts.clock.advance(seconds: 3_601)
            await expectError(.unauthenticated, containing: "expired") { _ = try await accounts.caller(token) }
        }
    }

    @Test(arguments: Engine.allCases) func logout_revokesOnlyThatSession(engine: Engine) async throws {
        try await withAccounts(engine) { accounts in
            try await accounts.register("leaver")
            let phone = try await accounts.login("leaver")
            let laptop = try await accounts.login("leaver")
            _ = try await accounts.client.call(API.logout, AccountsV1.LogoutRequest(), options: try await accounts.caller(phone))
            await expectError(.unauthenticated, containing: "revoked") { _ = try await accounts.caller(phone) }
            let me = try await accounts.client.call(API.whoAmI, AccountsV1.WhoAmIRequest(), options: try await accounts.caller(laptop))
            #expect(me.account?.profile?.username == "leaver")
        }
    }

    @Test(arguments: Engine.allCases) func malformedOrUnknownTokens_areUnauthenticated(engine: Engine) async throws {
        try await withAccounts(engine) { accounts in
            for token in ["", "garbage", "fs1_" + String(repeating: "A", count: 43), String(repeating: "x", count: 10_000)] {
                await expectError(.unauthenticated) { _ = try await accounts.caller(token) }
            }
        }
    }

    @Test(arguments: Engine.allCases) func whoAmI_withoutALiveSession_isRefused(engine: Engine) async throws {
        try await withAccounts(engine) { accounts in
            let account = try await accounts.register("nosession")
            // A caller id with no session id, as a confused internal caller might send.
            let options = CallOptions(callerUserID: account.profile?.userId ?? 0)
            await expectError(.unauthenticated) { _ = try await accounts.client.call(API.whoAmI, AccountsV1.WhoAmIRequest(), options: options) }
        }
    }

    @Test(arguments: Engine.allCases) func changePassword_revokesOtherSessions_keepsThisOne_andSwapsTheCredential(engine: Engine) async throws {
        try await withAccounts(engine) { accounts in
            try await accounts.register("changer", password: "old password 1")
            let other = try await accounts.login("changer", password: "old password 1")
            let this = try await accounts.login("changer", password: "old password 1")
            let me = try await accounts.caller(this)
            await expectError(.permissionDenied) {
                _ = try await accounts.client.call(API.changePassword, AccountsV1.ChangePasswordRequest(currentPassword: "wrong one!", newPassword: "new password 2"), options: me)
            }
            await expectError(.invalidArgument, containing: "new_password") {
                _ = try await accounts.client.call(API.changePassword, AccountsV1.ChangePasswordRequest(currentPassword: "old password 1", newPassword: "short"), options: me)
            }
            let reply = try await accounts.client.call(API.changePassword,
                                                       AccountsV1.ChangePasswordRequest(currentPassword: "old password 1", newPassword: "new password 2"), options: me)
            #expect(reply.revokedSessions == 1)
            await expectError(.unauthenticated, containing: "revoked") { _ = try await accounts.caller(other) }
            _ = try await accounts.caller(this)
            await expectError(.unauthenticated) { _ = try await accounts.login("changer", password: "old password 1") }
            _ = try await accounts.login("changer", password: "new password 2")
        }
    }

    @Test(arguments: Engine.allCases) func changeEmail_needsThePassword_andAFreeAddress(engine: Engine) async throws {
        try await withAccounts(engine) { accounts in
            try await accounts.register("mover", email: "old@example.org", phone: "+15625553333")
            try await accounts.register("squatter", email: "taken@example.org", phone: "+15625554444")
            let me = try await accounts.caller(try await accounts.login("mover"))
            await expectError(.permissionDenied) {
                _ = try await accounts.client.call(API.changeEmail, AccountsV1.ChangeEmailRequest(newEmail: "new@example.org", password: "wrong wrong"), options: me)
            }
            await expectError(.alreadyExists, containing: "email") {
                _ = try await accounts.client.call(API.changeEmail, AccountsV1.ChangeEmailRequest(newEmail: "TAKEN@example.org", password: "correct horse 1"), options: me)
            }
            await expectError(.invalidArgument, containing: "email") {
                _ = try await accounts.client.call(API.changeEmail, AccountsV1.ChangeEmailRequest(newEmail: "nope", password: "correct horse 1"), options: me)
            }
            let moved = try await accounts.client.call(API.changeEmail, AccountsV1.ChangeEmailRequest(newEmail: "New@Example.org", password: "correct horse 1"), options: me)
            #expect(moved.account?.email == "new@example.org")
            _ = try await accounts.login("new@example.org")
        }
    }

    @Test(arguments: Engine.allCases) func editProfile_changesOnlyTheNamedFields_andRejectsUnknownOnes(engine: Engine) async throws {
        try await withAccounts(engine) { accounts in
            try await accounts.register("editor")
            let me = try await accounts.caller(try await accounts.login("editor"))
            let edited = try await accounts.client.call(API.editProfile, AccountsV1.EditProfileRequest(
                fields: ["first_name", "profile_picture_media_id"], firstName: "Edith", lastName: "ignored", profilePictureMediaId: "m_123-abc"), options: me)
            #expect(edited.account?.profile?.firstName == "Edith")
            #expect(edited.account?.profile?.lastName == "Last")
            #expect(edited.account?.profile?.profilePictureMediaId == "m_123-abc")
            await expectError(.invalidArgument, containing: "unknown field") {
                _ = try await accounts.client.call(API.editProfile, AccountsV1.EditProfileRequest(fields: ["email"]), options: me)
            }
            await expectError(.invalidArgument, containing: "fields") {
                _ = try await accounts.client.call(API.editProfile, AccountsV1.EditProfileRequest(), options: me)
            }
            await expectError(.invalidArgument, containing: "profile_picture_media_id") {
                _ = try await accounts.client.call(API.editProfile, AccountsV1.EditProfileRequest(fields: ["profile_picture_media_id"], profilePictureMediaId: "../etc/passwd"), options: me)
            }
            await expectError(.notFound) {
                _ = try await accounts.client.call(API.getProfile, AccountsV1.GetProfileRequest(userId: 999_999), options: me)
            }
        }
    }

    @Test(arguments: Engine.allCases) func data_andSessions_surviveARestart(engine: Engine) async throws {
        let store = try await TestStore.fresh(engine)
        let clock = TestClock()
        let token = try await withAccounts(store: store, clock: clock) { accounts in
            try await accounts.register("durable")
            return try await accounts.login("durable")
        }
        try await withAccounts(store: store, clock: clock) { accounts in
            let me = try await accounts.caller(token)
            let who = try await accounts.client.call(API.whoAmI, AccountsV1.WhoAmIRequest(), options: me)
            #expect(who.account?.profile?.username == "durable")
            _ = try await accounts.login("durable")
        }
        await store.remove()
    }

    @Test(arguments: Engine.allCases) func findUsers_byUsername_caseInsensitive_andCapsTheBatch(engine: Engine) async throws {
        try await withAccounts(engine) { accounts in
            try await accounts.register("finder_a")
            try await accounts.register("finder_b")
            let reply = try await accounts.client.call(API.findUsers, AccountsV1.FindUsersRequest(usernames: ["FINDER_B", " finder_a ", "nobody"]))
            #expect(reply.profiles.map(\.username) == ["finder_a", "finder_b"])
            await expectError(.invalidArgument) {
                _ = try await accounts.client.call(API.findUsers, AccountsV1.FindUsersRequest(usernames: (0...500).map { "u\($0)" }))
            }
        }
    }

    @Test(arguments: Engine.allCases) func getProfiles_returnsKnownUsers_andCapsTheBatch(engine: Engine) async throws {
        try await withAccounts(engine) { accounts in
            let a = try await accounts.register("batch_a")
            let b = try await accounts.register("batch_b")
            let ids = [a.profile?.userId ?? 0, 424_242, b.profile?.userId ?? 0]
            let reply = try await accounts.client.call(API.getProfiles, AccountsV1.GetProfilesRequest(userIds: ids))
            #expect(reply.profiles.map(\.username) == ["batch_a", "batch_b"])
            await expectError(.invalidArgument) {
                _ = try await accounts.client.call(API.getProfiles, AccountsV1.GetProfilesRequest(userIds: Array(1...501)))
            }
        }
    }
}

@Suite("login guard (pure)")
struct LoginGuardTests {
    @Test func eachLimit_lockoutsDouble_andReplayGivesTheSameState() {
        let policy = LoginGuard.Policy(account: .init(maxFailures: 2, window: 100, baseLockout: 10, maxLockout: 1_000),
                                       client: .init(maxFailures: 5, window: 100, baseLockout: 20, maxLockout: 1_000),
                                       spraying: .init(maxFailures: 3, window: 1_000, baseLockout: 50, maxLockout: 1_000))
        var live = LoginGuard(policy: policy)
        var events: [LoginGuard.Event] = []
        func apply(_ event: LoginGuard.Event) { live.apply(event); events.append(event) }
        apply(.failure(account: "a", client: "c", at: 0))
        #expect(live.check(account: "a", client: "c", now: 0) == nil)
        apply(.failure(account: "a", client: "c", at: 1))
        #expect(live.check(account: "a", client: "c", now: 1) == .account(wait: 10))
        #expect(live.check(account: "a", client: "", now: 1) == .account(wait: 10), "no address: the account limit still holds")
        #expect(live.check(account: "b", client: "c", now: 1) == nil)
        apply(.failure(account: "b", client: "c", at: 2))
        apply(.failure(account: "d", client: "c", at: 3))
        #expect(live.check(account: "e", client: "c", now: 3) == .spraying(wait: 50))
        #expect(live.check(account: "e", client: "other", now: 3) == nil)
        #expect(live.successMatters(for: "a") && !live.successMatters(for: "nobody"))
        apply(.success(account: "a", at: 60))
        #expect(live.check(account: "a", client: "", now: 60) == nil, "a success clears the account's count")
        #expect(!live.successMatters(for: "a"), "nothing left to clear: the next success need not be recorded")
        var replayed = LoginGuard(policy: policy)
        for event in events { replayed.apply(event) }
        for (account, client, now) in [("a", "c", 60.0), ("e", "c", 4), ("a", "", 2), ("x", "c", 10)] {
            #expect(replayed.check(account: account, client: client, now: now) == live.check(account: account, client: client, now: now))
        }
        #expect(LoginGuard.Refusal.client(wait: 12.2).message.contains("13 s"))
    }
}

@Suite("login throttle (pure)")
struct LoginThrottleTests {
    @Test func lockoutDoubles_andTheWindowForgets() {
        var throttle = LoginThrottle(policy: .init(maxFailures: 3, window: 100, baseLockout: 10, maxLockout: 35))
        for t in 0..<2 { throttle.recordFailure("k", now: Double(t)) }
        #expect(throttle.retryAfter("k", now: 2) == nil)
        throttle.recordFailure("k", now: 2)
        #expect(throttle.retryAfter("k", now: 2) == 10)
        throttle.recordFailure("k", now: 12)
        #expect(throttle.retryAfter("k", now: 12) == 20)
        throttle.recordFailure("k", now: 32)
        #expect(throttle.retryAfter("k", now: 32) == 35, "capped at maxLockout")
        throttle.recordSuccess("k")
        #expect(throttle.retryAfter("k", now: 33) == nil)
        // Failures older than the window do not count.
        throttle.recordFailure("old", now: 0)
        throttle.recordFailure("old", now: 1)
        throttle.recordFailure("old", now: 500)
        #expect(throttle.retryAfter("old", now: 500) == nil)
    }
}

/// The executable reads the config file (the domain never sees it): its mapping onto the domain's config.
@Suite("accounts: configuration")
struct AccountsConfigTests {
    @Test func everyLoginLimit_isConfigurable_fromTheConfigFile() throws {
        let directory = try TemporaryDirectory("frienso-accounts-config")
        defer { directory.remove() }
        let path = "\(directory.path)/frienso.json"
        try """
            {"accounts": {"maxFailedLoginsPerAccount": 7, "maxFailedLoginsPerClient": 40, "maxAccountsFailedPerClient": 12,
                          "failedLoginWindowSeconds": 600, "sprayWindowSeconds": 7200, "lockoutSeconds": 15, "maxLockoutSeconds": 900}}
            """.write(toFile: path, atomically: true, encoding: .utf8)
        let resolved = try ServiceOptions.parse(["--config", path]).resolve(service: "accounts", environment: [:])
        let policy = AccountsConfig(resolved: resolved).loginPolicy
        #expect(policy.account.maxFailures == 7 && policy.client.maxFailures == 40 && policy.spraying.maxFailures == 12)
        #expect(policy.account.window == 600 && policy.client.window == 600 && policy.spraying.window == 7_200)
        #expect(policy.account.baseLockout == 15 && policy.client.maxLockout == 900)
    }

    /// `emailRetentionDays`: read, 90 by default (and in the example config), at least a day.
    @Test func theEmailRetention_isRead_andAtLeastADay() throws {
        let directory = try TemporaryDirectory("frienso-accounts-config")
        defer { directory.remove() }
        let path = "\(directory.path)/frienso.json"
        for (given, days) in [("", 90), (#""emailRetentionDays": 30"#, 30), (#""emailRetentionDays": 0"#, 1), (#""emailRetentionDays": -5"#, 1)] {
            try #"{"accounts": {\#(given)}}"#.write(toFile: path, atomically: true, encoding: .utf8)
            let config = AccountsConfig(resolved: try ServiceOptions.parse(["--config", path]).resolve(service: "accounts", environment: [:]))
            #expect(config.emailRetention == .seconds(days * 86_400), "\(given)")
        }
        let example = Repository.root.appendingPathComponent("deploy/frienso.example.json").path
        let fromExample = AccountsConfig(resolved: try ServiceOptions.parse(["--config", example]).resolve(service: "accounts", environment: [:]))
        #expect(fromExample.emailRetention == AccountsConfig().emailRetention)
        try #"{"accounts": {"emailRetentionDays": "ninety"}}"#.write(toFile: path, atomically: true, encoding: .utf8)
        #expect(throws: (any Error).self, "a value that is not a number is refused, not ignored") {
            _ = try ServiceOptions.parse(["--config", path]).resolve(service: "accounts", environment: [:])
        }
    }
}

/// Throttles hold across instances: two accounts services on one PostgreSQL database (as issue
/// 21's many instances will run) refuse an account and an address after the failures both saw.
@Suite("accounts: throttles shared by instances", .timeLimit(.minutes(2)))
struct SharedThrottleTests {
    @Test func failuresSpreadOverTwoInstances_lockTheAccountAndTheAddressOnBoth() async throws {
        let store = try await TestStore.fresh(.postgres)
        let clock = TestClock()
        var config = testConfig(clock)
        config.loginPolicy.client.maxFailures = 8
        let (first, closeFirst) = try await store.open(config: config)
        let (second, closeSecond) = try await store.open(config: config)
        let logs = CapturedLogs()
        let instances = [RouterClient(first, name: "accounts", logger: logs.logger("a1")), RouterClient(second, name: "accounts", logger: logs.logger("a2"))]
        let one = AccountsHarness(client: instances[0], clock: clock, directory: store.directory)
        let two = AccountsHarness(client: instances[1], clock: clock, directory: store.directory)
        try await one.register("shared")
        // Five failures for the account, alternating instances (three on one, two on the other).
        for n in 0..<5 {
            let instance = n % 2 == 0 ? one : two
            await expectError(.unauthenticated) { _ = try await instance.login("shared", password: "guess guess", from: "203.0.113.\(n + 1)") }
        }
        // Each instance saw fewer than five; together they are five: both refuse, even the right password.
        await expectError(.resourceExhausted, containing: "this account") { _ = try await one.login("shared", from: "198.51.100.1") }
        await expectError(.resourceExhausted, containing: "this account") { _ = try await two.login("shared", from: "198.51.100.2") }
        clock.advance(seconds: 31)
        _ = try await two.login("shared", from: "198.51.100.2")

        // One address failing on other accounts, spread over both instances: eight failures lock it on both.
        for n in 0..<8 {
            let instance = n % 2 == 0 ? one : two
            await expectError(.unauthenticated) { _ = try await instance.login("nobody\(n % 3)", password: "guess guess", from: "192.0.2.9") }
        }
        await expectError(.resourceExhausted, containing: "your address") { _ = try await one.login("shared", from: "192.0.2.9") }
        await expectError(.resourceExhausted, containing: "your address") { _ = try await two.login("shared", from: "192.0.2.9") }
        _ = try await one.login("shared", from: "198.51.100.3")
        await closeFirst()
        await closeSecond()
        await store.remove()
    }
}
