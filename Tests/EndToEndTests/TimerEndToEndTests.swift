import Foundation
import FriensoClient
import FriensoProto
import FriensoTesting
import GRDB
import ServiceKit
import Testing
import Wire

/// Check-in timers on the launched deployment: through the CLI (a PIN, ended in time), and one
/// that runs out while alerts is killed with SIGKILL: the restarted alerts raises the helpNow.
@Suite("end to end: check-in timers survive kill -9", .serialized, .timeLimit(.minutes(4)))
struct TimerEndToEndTests {
    @Test func aTimerRunningOutWhileAlertsIsKilled_raisesHelpNowAfterTheRestart() async throws {
        let procs = try ProcessHarness()
        defer { procs.shutdown() }
        let stack = try await LaunchedStack(procs) { config in
            var alerts = config.alerts ?? FriensoConfig.AlertsSection()
            alerts.minTimerSeconds = 2
            alerts.timerWarningSeconds = 2
            config.alerts = alerts
        }
        defer { stack.shutdown() }
        try await stack.showingLogsOnFailure {
            let owner = try await makeActor(stack, "walker", number: 700)
            let friend = try await makeActor(stack, "guardian", number: 701)
            try await befriend(owner, friend)
            try await addToCircle(owner, friend)

            // Through the CLI: a PIN, a wrong one, the right one.
            let cli = stack.cli("walker")
            #expect(try await cli.run(["login", "walker", "--password-stdin"], stdin: "password walker 1\n").status == 0)
            let started = try await cli.run(["timer", "start", "--minutes", "30", "--note", "home by midnight", "--with-pin", "--password-stdin"],
                                            stdin: "2468\n")
            #expect(started.status == 0 && started.output.contains("running") && started.output.contains("PIN set"), "\(started.output)")
            let wrong = try await cli.run(["timer", "end", "--pin", "--password-stdin"], stdin: "1111\n")
            #expect(wrong.status == 14 && wrong.output.contains("wrong PIN"), "\(wrong.output)")
            let ended = try await cli.run(["timer", "end", "--pin", "--password-stdin"], stdin: "2468\n")
            #expect(ended.status == 0 && ended.output.contains("ended"), "\(ended.output)")
            let byPassword = try await cli.run(["timer", "start", "--minutes", "30"])
            #expect(byPassword.status == 0, "\(byPassword.output)")
            let endedByPassword = try await cli.run(["timer", "end", "--password-stdin"], stdin: "password walker 1\n")
            #expect(endedByPassword.status == 0 && endedByPassword.output.contains("ended"), "\(endedByPassword.output)")

            // A timer due in 4 s; alerts dies at once and comes back: the helpNow still goes out.
            let due = WallClock.milliseconds() + 4_000
            let timer = try await owner.client.call(AlertsV1.AlertsService.startTimer, AlertsV1.StartTimerRequest(dueAtMs: due, note: "short walk"),
                                                    mutation: true)
            try await stack.kill9AndAwaitRestart("alerts")
            try await eventually("the restarted alerts raised the timer's helpNow", timeout: .seconds(30)) {
                let reply = try? await owner.client.call(AlertsV1.AlertsService.getTimer, AlertsV1.GetTimerRequest())
                return reply?.timer?.state == .fired
            }
            let alertID = try await owner.client.call(AlertsV1.AlertsService.getTimer, AlertsV1.GetTimerRequest()).timer?.alertId ?? 0
            #expect(alertID != 0 && timer.timer?.timerId != nil)
            let inbox = try await friend.client.call(AlertsV1.AlertsService.getHelpNow, AlertsV1.GetHelpNowRequest())
            #expect(inbox.others.contains { $0.alertId == alertID && $0.message.contains("check-in timer ran out") && $0.message.contains("short walk") },
                    "\(inbox.others.map(\.message))")
            // Exactly one alert for it, and the guardian got it by push and SMS.
            try await eventually("the helpNow was delivered", timeout: .seconds(20)) {
                let rows = try? stack.database("alerts").read { db in
                    try Row.fetchAll(db, sql: "SELECT channel, status FROM outbox WHERE source = ? AND recipient_user = ?",
                                     arguments: ["help_now:\(alertID)", friend.id])
                }
                return rows?.count == 2 && rows?.allSatisfy { ($0[1] as Int) != 1 } == true
            }
            let alerts = try await stack.database("alerts").read { db in
                try Int.fetchOne(db, sql: "SELECT count(*) FROM help_alerts WHERE initiator = ?", arguments: [owner.id]) ?? 0
            }
            #expect(alerts == 1)
            let shown = try await cli.run(["timer"])
            #expect(shown.output.contains("RAN OUT") && shown.output.contains("helpNow \(alertID)"), "\(shown.output)")
        }
    }
}
