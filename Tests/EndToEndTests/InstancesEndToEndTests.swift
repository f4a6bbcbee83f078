import Foundation
import FriensoProto
import Synchronization
import FriensoTesting
import Launcher
import ServiceKit
import Testing
import Wire

/// Two instances of accounts and two of social on one PostgreSQL database, in one launched
/// deployment (`launch: [..., "accounts", "accounts#2", "social", "social#2", ...]`, their
/// endpoints listing both): the gateway spreads calls over both, social's profile replica follows
/// both accounts instances' relays of one event stream, each social instance drops the friend
/// lists the other's changes touched, and a `kill -9` of one accounts instance under a writer
/// loses no acknowledged write, costs social's replica no reload, and the run says how long the
/// writer stalled; a graceful restart of the other (SIGTERM) fails no call at all.
@Suite("end to end: two instances of accounts and of social", .serialized, .timeLimit(.minutes(4)))
struct InstancesEndToEndTests {
    @Test func twoInstancesOfAccountsAndSocial_shareTheWork_andOneDyingLosesNothing() async throws {
        let procs = try ProcessHarness()
        defer { procs.shutdown() }
        let (_, _, storage) = try await PostgresTestServer.deploymentStorage("instances", in: procs)
        var extra: [DeadPort]? = try (0..<4).map { _ in try DeadPort() }
        let stack = try await LaunchedStack(procs) { config in
            config.keepOnPostgres(in: storage)
            for (i, member) in ["accounts", "social"].enumerated() {
                let first = config.endpoints![member]!, firstEvents = config.eventEndpoints![member]!
                config.endpoints?[member] = EndpointList.join([first, extra![2 * i].endpoint])
                config.eventEndpoints?[member] = EndpointList.join([firstEvents, extra![2 * i + 1].endpoint])
            }
            config.launch = LaunchedStack.services.flatMap { ["accounts", "social"].contains($0) ? [$0, "\($0)#2"] : [$0] }
            extra = nil // the ports are the launcher's now
        }
        defer { stack.shutdown() }
        try await stack.showingLogsOnFailure {
            try await eventually("both instances of accounts and of social are ready", timeout: .seconds(60)) {
                let members = (try? LaunchStatus.read(stack.run).members) ?? []
                return members.filter { ($0.name.hasPrefix("accounts") || $0.name.hasPrefix("social")) && $0.state == "ready" }.count == 4
            }
            // Registrations and logins through the gateway reach both instances.
            let dana = stack.cli("dana")
            #expect(try await dana.run(["register", "--username", "dana", "--email", "dana@example.org", "--phone", "+15625557701",
                                        "--first-name", "Dana", "--last-name", "Scully", "--password-stdin"], stdin: "trust no one 1\n").status == 0)
            #expect(try await dana.run(["login", "dana", "--password-stdin"], stdin: "trust no one 1\n").status == 0)
            let fox = stack.client()
            for i in 0..<8 {
                _ = try await fox.call(AccountsV1.AccountsService.register, AccountsV1.RegisterRequest(
                    username: "fox\(i)", email: "fox\(i)@example.org", phone: "+156255577\(10 + i)", password: "i want to believe",
                    firstName: "Fox", lastName: "Mulder"), mutation: true)
            }
            for log in ["accounts", "accounts#2"] {
                let text = (try? String(contentsOfFile: "\(stack.run)/logs/\(log).log", encoding: .utf8)) ?? ""
                #expect(text.contains("registered"), "\(log) served no registration: the gateway does not spread calls")
            }

            // Profile edits through either instance reach social's replica (a friend's list
            // shows the latest name) in order, from one stream relayed by both.
            _ = try await fox.login("fox0", password: "i want to believe")
            #expect(try await dana.run(["friends", "add", "fox0"]).status == 0)
            _ = try await fox.call(SocialV1.SocialService.sendFriendRequest, SocialV1.SendFriendRequestRequest(username: "dana"), mutation: true)
            for name in ["Spooky", "Fox", "Agent", "Mulder-Scully"] {
                _ = try await fox.call(AccountsV1.AccountsService.editProfile,
                                       AccountsV1.EditProfileRequest(fields: ["last_name"], lastName: name), mutation: true)
            }
            try await eventually("dana's friend list shows fox0's last edit") {
                let list = try await dana.run(["friends", "list"])
                return list.status == 0 && list.output.contains("Mulder-Scully")
            }
            // Friend lists are cached per instance: a change through either instance drops the
            // other's copy as it relays the change from the log, within its poll interval.
            for _ in 0..<4 { #expect(try await dana.run(["friends", "list"]).output.contains("fox0")) }
            _ = try await fox.call(SocialV1.SocialService.removeFriend, SocialV1.RemoveFriendRequest(username: "dana"), mutation: true)
            // Within the log's poll interval (200 ms) both instances have it: two lists in a row
            // (one from each: the gateway takes them in turn), then never the old list again.
            try await eventually("dana's list no longer shows fox0 on either instance") {
                for _ in 0..<2 where try await dana.run(["friends", "list"]).output.contains("fox0") { return false }
                return true
            }
            for _ in 0..<6 {
                let list = try await dana.run(["friends", "list"])
                #expect(list.status == 0 && !list.output.contains("fox0"), "an instance kept a stale list: \(list.output)")
            }
            for log in ["social", "social#2"] {
                let text = (try? String(contentsOfFile: "\(stack.run)/logs/\(log).log", encoding: .utf8)) ?? ""
                #expect(text.contains("listening"), "\(log) did not start")
            }
            await fox.close()
            let snapshotsBefore = try await Self.profileSnapshots(stack)

            // A writer registers while the first instance is killed (the launcher restarts it).
            let run = try await Self.register(stack, names: "inst", phones: "+1562558") { try await stack.kill9AndAwaitRestart("accounts") }
            print("two accounts instances, kill -9 of one: \(run.acknowledged.count) registrations acknowledged, "
                  + "\(run.appliedReplyLost.count) applied with their reply lost, \(run.failures) failed "
                  + "(\(run.codes.sorted().joined(separator: ", "))), longest stall \(run.longestStall)")
            #expect(run.acknowledged.count >= 10, "the writer made progress: \(run.acknowledged.count)")
            #expect(run.codes.isSubset(of: ["UNAVAILABLE", "DEADLINE_EXCEEDED"]), "only transient errors: \(run.messages)")
            for name in run.acknowledged + run.appliedReplyLost {
                let login = try await stack.cli("check-\(name)").run(["login", name, "--password-stdin"], stdin: "a long password 1\n")
                #expect(login.status == 0, "\(name) was acknowledged and must log in: \(login.output)")
            }
            // The log's epoch is the database's: the restarted instance is not a new stream, so
            // social's replica did not have to reload it (one publisher's restart would).
            let snapshotsAfter = try await Self.profileSnapshots(stack)
            #expect(snapshotsAfter == snapshotsBefore, "social reloaded accounts' profiles: \(snapshotsBefore) → \(snapshotsAfter)")

            // A graceful restart of the second instance (SIGTERM: it drains, then the launcher
            // starts it again), under the same writer: no call fails and no reply is lost. What
            // reaches it while it drains is refused as never started and goes to the first.
            let rolling = try await Self.register(stack, names: "roll", phones: "+1562559") { try await stack.terminateAndAwaitRestart("accounts#2") }
            print("two accounts instances, graceful restart of one: \(rolling.acknowledged.count) registrations acknowledged, "
                  + "\(rolling.appliedReplyLost.count) applied with their reply lost, \(rolling.failures) failed "
                  + "(\(rolling.codes.sorted().joined(separator: ", "))), longest stall \(rolling.longestStall)")
            #expect(rolling.acknowledged.count >= 10, "the writer made progress: \(rolling.acknowledged.count)")
            #expect(rolling.failures == 0 && rolling.appliedReplyLost.isEmpty,
                    "a graceful restart of one instance failed calls: \(rolling.messages), replies lost: \(rolling.appliedReplyLost)")
            for name in rolling.acknowledged {
                let login = try await stack.cli("check-\(name)").run(["login", name, "--password-stdin"], stdin: "a long password 1\n")
                #expect(login.status == 0, "\(name) was acknowledged and must log in: \(login.output)")
            }
        }
    }

    /// `frienso_replica_snapshots_total` of social's profile replica, from the launcher's metrics.
    static func profileSnapshots(_ stack: LaunchedStack) async throws -> Double {
        let endpoint = try #require(try LaunchStatus.read(stack.run).metricsEndpoint)
        let text = try #require(HTTPProbe.get(endpoint.replacingOccurrences(of: "/metrics", with: ""), path: "/metrics")?.body)
        let line = try #require(text.split(separator: "\n").first {
            $0.hasPrefix("frienso_replica_snapshots_total{") && $0.contains("service=\"social\"") && $0.contains("stream=\"profiles\"")
        }, "no profile replica metric in:\n\(text.prefix(2000))")
        return try #require(Double(line.split(separator: " ").last ?? ""))
    }

    final class Writer: Sendable {
        let state = Mutex(WriterRun(acknowledged: [], appliedReplyLost: [], failures: 0, codes: [], longestStall: .zero))
        let stop = Atomic<Bool>(false)
    }

    struct WriterRun: Sendable {
        var acknowledged: [String]
        /// Retries answered ALREADY_EXISTS "applied once already": committed, reply lost.
        var appliedReplyLost: [String]
        var messages: [String] = []
        var failures: Int
        var codes: Set<String>
        var longestStall: Duration
    }

    /// Registers users one after another (`<names><n>`, phone `<phones><n, four digits>`) while
    /// `restart` restarts an instance of accounts.
    static func register(_ stack: LaunchedStack, names: String, phones: String,
                         while restart: @escaping @Sendable () async throws -> Void) async throws -> WriterRun {
        let client = stack.client(deadline: .seconds(5))
        let writer = Writer()
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask {
                var n = 0
                var last = ContinuousClock.now
                // Cancelled too (the restart failed): a cancelled call fails at once, so the
                // loop would spin.
                while !writer.stop.load(ordering: .relaxed) && !Task.isCancelled {
                    n += 1
                    let name = "\(names)\(n)"
                    do throws(RPCError) {
                        _ = try await client.call(AccountsV1.AccountsService.register, AccountsV1.RegisterRequest(
                            username: name, email: "\(name)@example.org", phone: "\(phones)\(String(format: "%04d", n))",
                            password: "a long password 1", firstName: "W", lastName: "R"), mutation: true)
                        let now = ContinuousClock.now
                        writer.state.withLock {
                            $0.acknowledged.append(name)
                            $0.longestStall = max($0.longestStall, last.duration(to: now))
                        }
                        last = now
                    } catch where error.code == .alreadyExists && error.message.contains("applied once already") {
                        // Committed by the instance that died, its reply lost with it: the
                        // retry is told so (a durable write, not a lost one).
                        writer.state.withLock { $0.appliedReplyLost.append(name) }
                    } catch {
                        writer.state.withLock { $0.failures += 1; $0.codes.insert(error.code.name); $0.messages.append(error.message) }
                    }
                }
            }
            try await eventually("the writer registered a few before the kill", timeout: .seconds(30)) { writer.state.withLock { $0.acknowledged.count } >= 5 }
            try await restart()
            let after = writer.state.withLock { $0.acknowledged.count }
            try await eventually("the writer goes on after the restart", timeout: .seconds(30)) { writer.state.withLock { $0.acknowledged.count } >= after + 5 }
            writer.stop.store(true, ordering: .relaxed)
            try await group.waitForAll()
        }
        await client.close()
        return writer.state.withLock { $0 }
    }
}
