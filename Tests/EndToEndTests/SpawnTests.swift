import Foundation
import FriensoTesting
import Glibc
import ServiceKit
import Testing

/// How the tests start real processes (`ProcessHarness` over `Spawn`, posix_spawn): what a
/// child is given, what comes back, and many started at once. Foundation's `Process.run`, which
/// the harness used before, crashed the test runner once on two busy cores (see `Spawn.start`).
@Suite("starting processes: Spawn and the test harness", .timeLimit(.minutes(1)))
struct SpawnTests {
    /// Its environment, working directory and standard input, and its output (stderr with
    /// stdout) and exit status back.
    @Test func aChild_getsItsEnvironmentDirectoryAndInput_andItsOutputAndStatusComeBack() async throws {
        let folder = try TemporaryDirectory("frienso-spawn")
        defer { folder.remove() }
        let (status, output) = try await ProcessHarness.run(
            "/bin/sh", ["-c", "echo \"$FRIENSO_SPAWN_TEST\"; pwd; cat; echo to-stderr >&2; exit 7"],
            stdin: "from stdin\n", environment: ["FRIENSO_SPAWN_TEST": "a value"], directory: folder.path)
        #expect(status == 7)
        let real = URL(fileURLWithPath: folder.path).resolvingSymlinksInPath().path
        #expect(output == "a value\n\(real)\nfrom stdin\nto-stderr\n", "\(output)")
    }

    /// A child that does not read its input, and one that cannot start: an answer each, no hang.
    @Test func aChildThatIgnoresItsInput_andOneThatCannotStart() async throws {
        let (status, output) = try await ProcessHarness.run("/bin/sh", ["-c", "echo done"], stdin: String(repeating: "x", count: 200_000))
        #expect(status == 0 && output == "done\n", "\(status) \(output)")
        await #expect(throws: Spawn.SpawnError.self) { try await ProcessHarness.run("/nonexistent/frienso-nothing", []) }
    }

    /// Many children started from many threads at once: each runs with its own environment and
    /// its own output comes back to it (no pipe of one held open by another).
    @Test func manyChildrenStartedAtOnce_eachAnswersItsOwn() async throws {
        let outputs = try await withThrowingTaskGroup(of: (Int, Int32, String).self) { group in
            for index in 0..<32 {
                group.addTask {
                    let (status, output) = try await ProcessHarness.run("/bin/sh", ["-c", "echo \"child $FRIENSO_SPAWN_INDEX\""],
                                                                        environment: ["FRIENSO_SPAWN_INDEX": "\(index)"])
                    return (index, status, output)
                }
            }
            var all: [(Int, Int32, String)] = []
            for try await result in group { all.append(result) }
            return all
        }
        #expect(outputs.count == 32)
        for (index, status, output) in outputs { #expect(status == 0 && output == "child \(index)\n", "\(index): \(status) \(output)") }
    }

    /// A started child logs to its file, reads as running until it exits (exited, it is not
    /// running though not yet reaped), and whoever stops it gets its exit status.
    @Test func aStartedChild_logs_runsUntilItExits_andItsStatusGoesToWhoStopsIt() async throws {
        let procs = try ProcessHarness()
        defer { procs.shutdown() }
        let sleeper = try procs.start("sleeper", executable: "/bin/sh", arguments: ["-c", "echo started; exec sleep 60"])
        try await eventually("the child logged") { ((try? String(contentsOfFile: sleeper.logPath, encoding: .utf8)) ?? "") == "started\n" }
        #expect(procs.isRunning("sleeper"))
        #expect(await procs.terminate("sleeper") == 128 + SIGTERM, "ended by SIGTERM")
        #expect(!procs.isRunning("sleeper"))
        #expect(kill(sleeper.pid, 0) != 0, "reaped")

        try procs.start("quitter", executable: "/bin/sh", arguments: ["-c", "exit 3"])
        try await eventually("the child exited") { !procs.isRunning("quitter") }
        #expect(await procs.terminate("quitter") == 3)
    }
}
