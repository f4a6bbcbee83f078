@testable import Accounts
import Foundation
import FriensoProto
import FriensoTesting
import Synchronization
import Testing
import Wire

/// The erasers a test hands the worker: each records the users it erased and can be told to fail.
final class FakeErasers: Sendable {
    let calls = Mutex<[(service: String, user: UInt64, traces: ErasureTraces)]>([])
    let failing = Mutex<Set<String>>([])

    var erasers: [String: AccountsService.Eraser] {
        Dictionary(uniqueKeysWithValues: ["social", "geo", "alerts", "media"].map { name in
            (name, { @Sendable (user: UInt64, traces: ErasureTraces) async throws in
                if self.failing.withLock({ $0.contains(name) }) { throw RPCError.unavailable("\(name) is down") }
                self.calls.withLock { $0.append((name, user, traces)) }
            })
        })
    }

    func count(_ service: String) -> Int { calls.withLock { $0.filter { $0.service == service }.count } }
}

@Suite("accounts: deleting an account", .timeLimit(.minutes(2)))
struct DeleteAccountTests {
    struct Setup {
        let service: AccountsService
        let harness: AccountsHarness
        let events: EventRecorder
        let clock: TestClock
    }

    func withService(_ engine: Engine, _ body: (Setup) async throws -> Void) async throws {
        let clock = TestClock()
        var config = testConfig(clock)
        config.erasureTargets = ["alerts", "geo", "media", "social"]
        config.erasureRecheck = .seconds(30)
        let events = EventRecorder()
        try await withOpenStore(engine, config: config, events: events) { store, service in
            let client = RouterClient(service, name: "accounts", logger: CapturedLogs().logger("accounts"))
            try await body(Setup(service: service, harness: AccountsHarness(client: client, clock: clock, directory: store.directory, store: store,
                                                                            service: service), events: events, clock: clock))
        }
    }

    @Test("the password is asked again; a wrong one deletes nothing", arguments: Engine.allCases)
    func wrongPassword(engine: Engine) async throws {
        try await withService(engine) { s in
            try await s.harness.register("keepme", email: "keepme@example.org", phone: "+15625550101")
            let caller = try await s.harness.caller(try await s.harness.login("keepme"))
            await expectError(.permissionDenied, containing: "password is wrong") {
                _ = try await s.harness.client.call(API.deleteAccount, AccountsV1.DeleteAccountRequest(password: "not it at all"), options: caller)
            }
            _ = try await s.harness.login("keepme")
            #expect(try await s.service.pendingErasures() == 0)
        }
    }

    @Test("deleting ends every session, frees the username, tells the replicas, and erases through every service, twice, then itself", arguments: Engine.allCases)
    func deleteAndErase(engine: Engine) async throws {
        try await withService(engine) { s in
            let account = try await s.harness.register("leaving", email: "leaving.person@example.org", phone: "+15625550177")
            let id = account.profile?.userId ?? 0
            let token = try await s.harness.login("leaving")
            let other = try await s.harness.login("leaving.person@example.org")
            await expectError(.unauthenticated) { _ = try await s.harness.login("leaving", password: "wrong guess 1") } // a login record
            let caller = try await s.harness.caller(token)
            _ = s.events.take()

            let reply = try await s.harness.client.call(API.deleteAccount, AccountsV1.DeleteAccountRequest(password: "correct horse 1"),
                                                        options: withKey(caller, "delete-1"))
            #expect(reply.userId == id)
            #expect(reply.erasing == ["alerts", "geo", "media", "social"])
            // Sessions: gone, both of them, and the gateways are told.
            for t in [token, other] {
                await expectError(.unauthenticated) { _ = try await s.harness.client.call(API.validateSession, AccountsV1.ValidateSessionRequest(sessionToken: t)) }
            }
            // On PostgreSQL, events are relayed from the database's log just after the commit.
            let published = try await eventuallyValue("the revocation and the deletion announced") { () -> [EventRecorder.Event]? in
                let all = s.events.all
                let deleted = all.contains {
                    $0.method == AccountsService.profileChanged && (try? AccountsV1.ProfileChanged(serializedBytes: $0.payload))?.deleted == true
                }
                return deleted && all.contains { $0.method == AccountsService.sessionsRevoked } ? all : nil
            }
            let profileEvent = try #require(published.last { $0.method == AccountsService.profileChanged })
            let changed = try AccountsV1.ProfileChanged(serializedBytes: profileEvent.payload)
            #expect(changed.deleted && changed.profile?.userId == id)
            // The login is gone; the names are free.
            await expectError(.unauthenticated) { _ = try await s.harness.login("leaving") }
            let again = try await s.harness.register("leaving", email: "leaving.person@example.org", phone: "+15625550177")
            #expect(again.profile?.userId != id)

            // The worker: a service that is down is retried; the others go on.
            let fakes = FakeErasers()
            fakes.failing.withLock { $0 = ["geo"] }
            let logs = CapturedLogs()
            await s.service.runErasures(fakes.erasers, logger: logs.logger("worker"))
            #expect(fakes.count("social") == 1 && fakes.count("alerts") == 1 && fakes.count("media") == 1 && fakes.count("geo") == 0)
            #expect(fakes.calls.withLock { $0.first { $0.service == "alerts" }?.traces.addresses } == ["+15625550177", "leaving.person@example.org"])
            #expect(logs.contains("erasure step failed"))
            fakes.failing.withLock { $0 = [] }
            s.clock.advance(seconds: 1)
            await s.service.runErasures(fakes.erasers, logger: logs.logger("worker"))
            #expect(fakes.count("geo") == 1)
            // The second pass comes after the recheck delay, not before.
            s.clock.advance(seconds: 10)
            await s.service.runErasures(fakes.erasers, logger: logs.logger("worker"))
            #expect(fakes.count("social") == 1)
            #expect(try await s.service.pendingErasures() == 5)
            s.clock.advance(seconds: 31)
            await s.service.runErasures(fakes.erasers, logger: logs.logger("worker"))
            #expect(["social", "geo", "alerts", "media"].allSatisfy { fakes.count($0) == 2 })
            // Accounts' own step is last: it waits for the services' rows to go first.
            s.clock.advance(seconds: 31)
            await s.service.runErasures(fakes.erasers, logger: logs.logger("worker"))
            s.clock.advance(seconds: 31)
            await s.service.runErasures(fakes.erasers, logger: logs.logger("worker"))
            #expect(try await s.service.pendingErasures() == 0)
            #expect(logs.contains("deleted account erased everywhere"))

            // Nothing of the first account is left in accounts' files but what the new account
            // with the same names holds: delete that one too, and look again.
            let token2 = try await s.harness.login("leaving")
            _ = try await s.harness.client.call(API.deleteAccount, AccountsV1.DeleteAccountRequest(password: "correct horse 1"),
                                                options: try await s.harness.caller(token2))
            for _ in 0..<4 {
                s.clock.advance(seconds: 31)
                await s.service.runErasures(fakes.erasers, logger: logs.logger("worker"))
            }
            #expect(try await s.service.pendingErasures() == 0)
            let residue = try await s.harness.store!.residue(["leaving", "leaving.person@example.org", "+15625550177", "5625550177"])
            #expect(residue.isEmpty, "\(residue)")
        }
    }

    func withKey(_ options: CallOptions, _ key: String) -> CallOptions {
        var options = options
        options.idempotencyKey = key
        return options
    }
}
