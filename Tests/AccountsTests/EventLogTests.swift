@testable import Accounts
import Foundation
import FriensoProto
import FriensoTesting
import Storage
import Testing
import Wire

/// Accounts' events on PostgreSQL (`PostgresEventLog`): written by the mutations, numbered by
/// the database, and relayed by every instance, so consumers see one stream however many
/// instances run and whichever of them dies.
@Suite("Accounts' event log (PostgreSQL)", .timeLimit(.minutes(2)))
struct EventLogTests {
    /// Two instances on one database, each relaying to its own recorder (its PUB socket).
    private func withTwoInstances<T: Sendable>(relayFirst: Bool = true,
                                               _ body: @Sendable (_ one: AccountsHarness, _ two: AccountsHarness,
                                                                  _ relayed: [EventRecorder]) async throws -> T) async throws -> T {
        let storage = try await TestStorage.fresh(.postgres, service: "accounts")
        let clock = TestClock(), logs = CapturedLogs()
        let recorders = [EventRecorder(), EventRecorder()]
        let first = try await storage.open(), second = try await storage.open()
        do {
            let one = try await AccountsService.open(first, config: testConfig(clock), events: relayFirst ? recorders[0] : nil)
            let two = try await AccountsService.open(second, config: testConfig(clock), events: recorders[1])
            let harnesses = [(one, "accounts-1"), (two, "accounts-2")].map { service, name in
                AccountsHarness(client: RouterClient(service, name: "accounts", logger: logs.logger(name)), clock: clock,
                                directory: storage.directory, service: service)
            }
            let result = try await body(harnesses[0], harnesses[1], recorders)
            for harness in harnesses { await harness.client.flush() }
            await first.close()
            await second.close()
            await storage.remove()
            return result
        } catch {
            await first.close()
            await second.close()
            await storage.remove()
            throw error
        }
    }

    private static func numbers(_ recorder: EventRecorder, _ stream: String) -> [UInt64] {
        recorder.relayed.filter { Publisher.stream(of: $0.topic) == stream }.map(\.sequence)
    }

    /// Registrations through both instances at once: each instance relays every profile event,
    /// numbered 1…n with no gap or repeat, whichever instance committed it; both report the same
    /// head and epoch for a snapshot.
    @Test func twoInstances_relayOneNumberedStream() async throws {
        try await withTwoInstances { one, two, relayed in
            let ids = try await withThrowingTaskGroup(of: UInt64.self) { group in
                for i in 0..<12 {
                    let harness = i % 2 == 0 ? one : two
                    group.addTask { try await harness.register("el_\(i)", phone: "+15625550\(300 + i)").profile?.userId ?? 0 }
                }
                return try await group.reduce(into: Set<UInt64>()) { $0.insert($1) }
            }
            for recorder in relayed {
                try await eventually("every profile event relayed by each instance") { Self.numbers(recorder, "profiles").count >= 12 }
                #expect(Self.numbers(recorder, "profiles") == Array(1...12))
                let profiles = recorder.all.filter { $0.topic == "profiles" }
                    .compactMap { try? AccountsV1.ProfileChanged(serializedBytes: $0.payload).profile?.userId }
                #expect(Set(profiles) == ids)
            }
            let heads = try await [one, two].asyncMap { harness in
                try await harness.client.call(API.profilesSnapshot, AccountsV1.ProfilesSnapshotRequest(sequenceOnly: true))
            }
            #expect(heads[0].epoch == heads[1].epoch && heads[0].epoch != 0)
            #expect(heads.map(\.sequence) == [12, 12])
        }
    }

    /// A logout through one instance of a session made through the other: both relay the
    /// revocation (gateways follow it from whichever reaches them first).
    @Test func revocation_throughEitherInstance_isRelayedByBoth() async throws {
        try await withTwoInstances { one, two, relayed in
            try await one.register("el_rev", phone: "+15625550400")
            let token = try await one.login("el_rev")
            let caller = try await two.caller(token)
            _ = try await two.client.call(API.logout, AccountsV1.LogoutRequest(), options: caller)
            for recorder in relayed {
                try await eventually("the revocation relayed") { Self.numbers(recorder, "sessions") == [1] }
            }
            await #expect(throws: RPCError.self) { try await one.caller(token) }
        }
    }

    /// An instance that committed and died before relaying (here: one that relays nothing):
    /// the other finds the rows and relays them.
    @Test func eventsOfAnInstanceThatDoesNotRelay_areRelayedByTheOther() async throws {
        try await withTwoInstances(relayFirst: false) { one, _, relayed in
            for i in 0..<3 { try await one.register("el_quiet_\(i)", phone: "+15625550\(500 + i)") }
            try await eventually("the other instance relays them") { Self.numbers(relayed[1], "profiles") == [1, 2, 3] }
        }
    }

    /// A mutation that is refused (rolled back) leaves no event and takes no number.
    @Test func refusedMutation_keepsNoEvent() async throws {
        try await withTwoInstances { one, two, relayed in
            try await one.register("el_dup", phone: "+15625550600")
            await #expect(throws: RPCError.self) { try await two.register("el_dup", phone: "+15625550601") }
            try await one.register("el_next", phone: "+15625550602")
            try await eventually("both events relayed") { Self.numbers(relayed[1], "profiles").count >= 2 }
            #expect(Self.numbers(relayed[1], "profiles") == [1, 2])
        }
    }
}

extension Array {
    func asyncMap<T>(_ transform: (Element) async throws -> T) async rethrows -> [T] {
        var out: [T] = []
        for element in self { out.append(try await transform(element)) }
        return out
    }
}
