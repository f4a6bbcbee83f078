import Foundation
import FriensoTesting
@testable import Launcher
import Logging
import ServiceKit
import Storage
import ServiceLifecycle
import Synchronization
import Testing

/// Naming several instances of a member, and the ways to get it wrong: each refused at start
/// with a message that says what to fix. No process is started.
@Suite("several instances: endpoint lists, --instance and launch entries")
struct InstanceConfigTests {
    let environment = ["FRIENSO_ACCOUNTS_ENDPOINT": "tcp://10.0.0.2:7101, tcp://10.0.0.3:7101",
                       "FRIENSO_ACCOUNTS_EVENTS": "tcp://10.0.0.2:7111,tcp://10.0.0.3:7111"]

    @Test func theNthInstance_bindsTheNthEndpoints() throws {
        let second = try ServiceOptions.parse(["--instance", "2"]).resolve(service: "accounts", environment: environment)
        #expect(second.endpoint == "tcp://10.0.0.3:7101" && second.instance == 2 && second.instances == 2)
        #expect(try second.ownEventEndpoint() == "tcp://10.0.0.3:7111")
        let first = try ServiceOptions.parse([]).resolve(service: "accounts", environment: environment)
        #expect(first.endpoint == "tcp://10.0.0.2:7101" && first.instance == 1)
        let fromEnvironment = try ServiceOptions.parse([]).resolve(service: "accounts", environment: environment.merging(["FRIENSO_INSTANCE": "2"]) { a, _ in a })
        #expect(fromEnvironment.endpoint == "tcp://10.0.0.3:7101")
    }

    @Test func anInstanceTheListDoesNotHave_orNotANumber_isRefused() throws {
        for (arguments, env, expected) in [
            (["--instance", "3"], environment, "instance 3"),
            (["--instance", "0"], environment, "a number from 1"),
            ([], environment.merging(["FRIENSO_INSTANCE": "two"]) { _, b in b }, "a number from 1"),
        ] {
            #expect(throws: ConfigError.self) { try ServiceOptions.parse(arguments).resolve(service: "accounts", environment: env) }
            do {
                _ = try ServiceOptions.parse(arguments).resolve(service: "accounts", environment: env)
            } catch let error as ConfigError {
                #expect(error.description.contains(expected), "\(error)")
            }
        }
    }

    @Test func fewerEventEndpointsThanInstances_isRefused() throws {
        let resolved = try ServiceOptions.parse(["--instance", "2"]).resolve(
            service: "accounts", environment: environment.merging(["FRIENSO_ACCOUNTS_EVENTS": "tcp://10.0.0.2:7111"]) { _, b in b })
        #expect(throws: ConfigError.self) { try resolved.ownEventEndpoint() }
    }

    @Test func severalInstancesOnSQLite_areRefused_saying_why() throws {
        let resolved = try ServiceOptions.parse([]).resolve(service: "accounts", environment: environment)
        do {
            try resolved.refuseSeveralInstances(on: .sqlite(directory: "/nonexistent"), logger: Logger(label: "test"))
            Issue.record("two instances on SQLite were accepted")
        } catch let error as ConfigError {
            #expect(error.description.contains("PostgreSQL"), "\(error)")
        }
        let geo = try ServiceOptions.parse([]).resolve(service: "geo", environment: ["FRIENSO_GEO_ENDPOINT": "tcp://a:1,tcp://b:1"])
        #expect(throws: ConfigError.self) { try geo.refuseSeveralInstances(on: .sqlite(directory: "/nonexistent"), logger: Logger(label: "test")) }
    }

    @Test func launchEntries_nameAMemberAndAnInstance() throws {
        let second = try LaunchPlan.entry("accounts#2")
        #expect(second.member == "accounts" && second.instance == 2 && second.name == "accounts#2")
        #expect(try LaunchPlan.entry("social#1").name == "social")
        for bad in ["accounts#0", "accounts#x", "nobody#2", "accounts#2#3", "frienso-accounts"] {
            #expect(throws: ConfigError.self, "\(bad)") { try LaunchPlan.entry(bad) }
        }
    }
}

/// A request host that reads social's graph starts once the graph is loaded (or the bound passed).
@Suite("a member answers once its replica is loaded") struct StartWhenReadyTests {
    final class Probe: Service, Sendable {
        private let flag = Atomic<Bool>(false)
        var started: Bool { flag.load(ordering: .relaxed) }
        func run() async throws { flag.store(true, ordering: .relaxed) }
    }

    @Test func theHostWaitsForTheReplica_thenStarts() async throws {
        let ready = Atomic<Bool>(false), probe = Probe(), logs = CapturedLogs()
        let running = Task { try await StartWhenReady(probe, when: { ready.load(ordering: .relaxed) }, within: .seconds(60), what: "the graph",
                                                      logger: logs.logger("member")).run() }
        for _ in 0..<10 { try await Task.sleep(for: .milliseconds(20)) } // several of its checks
        #expect(!probe.started, "not before the replica is loaded")
        ready.store(true, ordering: .relaxed)
        try await running.value
        #expect(probe.started && !logs.contains("answering before"))
    }

    @Test func aReplicaThatNeverLoads_delaysTheHostOnlyUntilTheBound_andSaysSo() async throws {
        let probe = Probe(), logs = CapturedLogs()
        try await StartWhenReady(probe, when: { false }, within: .milliseconds(100), what: "the graph", logger: logs.logger("member")).run()
        #expect(probe.started && logs.contains("answering before the graph is loaded"))
    }
}
