import Foundation
import FriensoProto
import FriensoTesting
import Launcher
import Testing
import Wire

/// `frienso-launch status` on the launched deployment: every member live and ready; after a
/// `kill -9`, the member's restart, how its run ended, and ready again.
@Suite("end to end: frienso-launch status", .serialized, .timeLimit(.minutes(3)))
struct LaunchStatusEndToEndTests {
    struct Report: Decodable {
        var launcherPID: Int32
        var members: [Entry]
        struct Entry: Decodable { var member: LaunchStatus.Member; var live: Bool; var ready: Bool }
    }

    func status(_ stack: LaunchedStack) async throws -> (Int32, Report?, String) {
        let r = try await ProcessHarness.run("frienso-launch", ["status", "--json", "--run-dir", stack.run])
        return (r.status, try? JSONDecoder().decode(Report.self, from: Data(r.output.utf8)), r.output)
    }

    @Test func everyMemberIsLiveAndReady_andAKilledOneShowsItsRestart() async throws {
        let procs = try ProcessHarness()
        defer { procs.shutdown() }
        let stack = try await LaunchedStack(procs)
        defer { stack.shutdown() }
        try await stack.showingLogsOnFailure {
            // The stack answers before the launcher's own probe of the last member (every 5 s)
            // may have run: the status is read once the launcher saw them all ready.
            try await eventually("the launcher saw every member ready", timeout: .seconds(30)) {
                try await status(stack).1?.members.allSatisfy(\.ready) ?? false
            }
            let (code, report, output) = try await status(stack)
            #expect(code == 0, "\(output)")
            let members = try #require(report?.members, "\(output)")
            #expect(Set(members.map(\.member.name)) == Set(LaunchedStack.services) && members.allSatisfy { $0.live && $0.ready && $0.member.restarts == 0 },
                    "\(output)")
            try await eventually("every member's version is known", timeout: .seconds(20)) {
                try await status(stack).1?.members.allSatisfy { $0.member.version == FriensoVersion.current } ?? false
            }

            try await stack.kill9AndAwaitRestart("geo")
            try await eventually("status shows geo's restart", timeout: .seconds(20)) {
                guard let geo = try await status(stack).1?.members.first(where: { $0.member.name == "geo" }) else { return false }
                return geo.member.restarts == 1 && geo.member.lastExit == "signal 9" && geo.live && geo.ready
                    && geo.member.pid == stack.pid(of: "geo")
            }

            // Two members killed together are restarted together (two children started at once:
            // the case that crashed Foundation's `Process.run` in the tests; `Spawn` now).
            let before = try ["social", "media"].map { try #require(stack.pid(of: $0)) }
            for pid in before { kill(pid, SIGKILL) }
            try await eventually("status shows both restarts", timeout: .seconds(30)) {
                let members = try await status(stack).1?.members ?? []
                return ["social", "media"].enumerated().allSatisfy { index, name in
                    guard let m = members.first(where: { $0.member.name == name }) else { return false }
                    return m.member.restarts == 1 && m.member.lastExit == "signal 9" && m.live && m.ready
                        && m.member.pid == stack.pid(of: name) && m.member.pid != before[index]
                }
            }
            let text = try await ProcessHarness.run("frienso-launch", ["status", "--run-dir", stack.run])
            #expect(text.status == 0 && text.output.contains("1 restart, ") && text.output.contains("last run ended: signal 9")
                    && text.output.contains("v\(FriensoVersion.current)"), "\(text.output)")
        }
        // Stopped: no launcher on the folder any more.
        stack.shutdown()
        let after = try await ProcessHarness.run("frienso-launch", ["status", "--run-dir", stack.run])
        #expect(after.status == 3 && after.output.contains("no frienso-launch runs"), "\(after.output)")
    }
}
