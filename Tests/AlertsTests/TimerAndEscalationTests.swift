@testable import Alerts
import Foundation
import FriensoProto
import FriensoTesting
import GRDB
import Testing
import Wire

extension AlertsTestGroup {
    @Suite("alerts: check-in timers and escalation", .timeLimit(.minutes(2)))
    struct TimerAndEscalationTests {
        typealias API = AlertsV1.AlertsService

        func circle(_ peers: FakePeers) {
            peers.state.withLock { s in
                s.circles[1] = [.user(2), .user(3), .phone("+15625550199")]
                s.passwords[1] = "my password 1"
                s.locations[1] = AlertsV1.AlertLocation(known: true, latitude: 33.7801, longitude: -118.1101, accuracyM: 8, placeName: "Library")
            }
        }

        @Test("a timer warns the circle and its owner before its time, then raises helpNow with the last location, once", arguments: Engine.allCases)
        func runsOut(engine: Engine) async throws {
            let clock = ManualClock(), peers = FakePeers()
            circle(peers)
            try await withAlerts(engine: engine, peers: peers, worker: false, now: { clock.now }) { a in
                await expectError(.failedPrecondition, containing: "core circle is empty") {
                    _ = try await a.call(9, API.startTimer, AlertsV1.StartTimerRequest(minutes: 30))
                }
                await expectError(.invalidArgument) { _ = try await a.call(1, API.startTimer, AlertsV1.StartTimerRequest(minutes: 2)) }
                await expectError(.invalidArgument) { _ = try await a.call(1, API.startTimer, AlertsV1.StartTimerRequest(minutes: 30, pin: "12ab")) }
                await expectError(.invalidArgument) { _ = try await a.call(1, API.startTimer, AlertsV1.StartTimerRequest()) }
                let request = AlertsV1.StartTimerRequest(minutes: 30, note: "walking home from the library")
                let started = try await a.call(1, API.startTimer, request, key: "t1")
                let timer = try #require(started.timer)
                #expect(timer.state == .active && timer.dueAtMs - timer.warnAtMs == 120_000)
                #expect(try await a.call(1, API.startTimer, request, key: "t1").timer?.timerId == timer.timerId, "a resend with its key")
                await expectError(.failedPrecondition, containing: "already running") {
                    _ = try await a.call(1, API.startTimer, AlertsV1.StartTimerRequest(minutes: 45), key: "t2")
                }

                clock.advance(minutes: 27)
                #expect(try await a.service.runDueTimers() == (0, 0))
                clock.advance(minutes: 1.5)
                #expect(try await a.service.runDueTimers() == (1, 0))
                let warnings = try await a.outbox().filter { $0.source == "timer_warning:\(timer.timerId)" }
                #expect(Set(warnings.map(\.recipientUserId)) == [1, 2, 3])
                #expect(warnings.contains { $0.recipientUserId == 2 && $0.body.contains("have not ended it yet") && $0.body.contains("walking home") },
                        "\(warnings.map(\.body))")
                #expect(a.recorder.events(to: 2).contains { $0.kind == .timerWarning })
                #expect(try await a.service.runDueTimers() == (0, 0), "warned once")

                clock.advance(minutes: 2)
                #expect(try await a.service.runDueTimers() == (0, 1))
                let fired = try #require(try await a.call(1, API.getTimer, AlertsV1.GetTimerRequest()).timer)
                #expect(fired.state == .fired && fired.alertId != 0)
                let alert = try #require(try await a.call(1, API.getHelpNow, AlertsV1.GetHelpNowRequest()).mine)
                #expect(alert.alertId == fired.alertId && alert.state == .active && alert.message.contains("check-in timer ran out"))
                #expect(alert.location?.placeName == "Library" && alert.recipients.count == 3)
                #expect(try await a.service.runDueTimers() == (0, 0), "fired once")
                await expectError(.failedPrecondition) { _ = try await a.call(1, API.endTimer, AlertsV1.EndTimerRequest(password: "my password 1")) }
            }
        }

        @Test("ending takes the password or the PIN; five wrong tries and it can no longer be ended early", arguments: Engine.allCases)
        func ending(engine: Engine) async throws {
            let clock = ManualClock(), peers = FakePeers()
            circle(peers)
            try await withAlerts(engine: engine, peers: peers, worker: false, now: { clock.now }) { a in
                _ = try await a.call(1, API.startTimer, AlertsV1.StartTimerRequest(minutes: 10, pin: "4321"))
                await expectError(.permissionDenied, containing: "wrong PIN") { _ = try await a.call(1, API.endTimer, AlertsV1.EndTimerRequest(pin: "1234")) }
                await expectError(.permissionDenied, containing: "wrong password") {
                    _ = try await a.call(1, API.endTimer, AlertsV1.EndTimerRequest(password: "guess"))
                }
                await expectError(.invalidArgument) { _ = try await a.call(1, API.endTimer, AlertsV1.EndTimerRequest()) }
                let ended = try await a.call(1, API.endTimer, AlertsV1.EndTimerRequest(pin: "4321"))
                #expect(ended.timer?.state == .ended && ended.timer?.failedAttempts == 2)
                clock.advance(minutes: 20)
                #expect(try await a.service.runDueTimers() == (0, 0), "an ended timer never fires")

                // Warned, then ended with the password: the circle hears they are safe.
                _ = try await a.call(1, API.startTimer, AlertsV1.StartTimerRequest(minutes: 10))
                clock.advance(minutes: 8.5)
                _ = try await a.service.runDueTimers()
                let second = try await a.call(1, API.endTimer, AlertsV1.EndTimerRequest(password: "my password 1"))
                #expect(try await a.outbox().contains { $0.source == "timer_end:\(second.timer?.timerId ?? 0)" && $0.body.contains("they are safe") })

                // Five wrong tries: locked; it runs out.
                _ = try await a.call(1, API.startTimer, AlertsV1.StartTimerRequest(minutes: 10, pin: "4321"))
                for _ in 0..<5 { await expectError(.permissionDenied) { _ = try await a.call(1, API.endTimer, AlertsV1.EndTimerRequest(pin: "0000")) } }
                await expectError(.permissionDenied, containing: "can no longer be ended early") {
                    _ = try await a.call(1, API.endTimer, AlertsV1.EndTimerRequest(pin: "4321"))
                }
                clock.advance(minutes: 11)
                #expect(try await a.service.runDueTimers().fired == 1)
            }
        }

        @Test("a timer survives a restart: the new process warns and fires it", arguments: Engine.allCases)
        func survivesRestart(engine: Engine) async throws {
            let clock = ManualClock(), peers = FakePeers()
            circle(peers)
            try await withStorage(engine) { storage in
                try await withAlerts(storage: storage, peers: peers, worker: false, now: { clock.now }) { a in
                    _ = try await a.call(1, API.startTimer, AlertsV1.StartTimerRequest(minutes: 15, note: "late shift"))
                }
                clock.advance(minutes: 16)
                try await withAlerts(storage: storage, peers: peers, worker: false, now: { clock.now }) { a async throws in
                    #expect(try await a.service.runDueTimers() == (0, 1))
                    #expect(try await a.call(1, API.getHelpNow, AlertsV1.GetHelpNowRequest()).mine?.message.contains("late shift") == true)
                }
            }
        }

        @Test("a helpNow nobody accepts in time is sent again and escalated once; an acceptance stops it", arguments: Engine.allCases)
        func escalation(engine: Engine) async throws {
            let clock = ManualClock(), peers = FakePeers()
            circle(peers)
            peers.state.withLock { $0.circles[5] = [.user(2)] }
            var config = testConfig()
            config.campusPoliceNumber = "+15625550100"
            try await withAlerts(engine: engine, peers: peers, config: config, worker: false, now: { clock.now }) { a in
                let raised = try #require(try await a.call(1, API.raiseHelpNow, AlertsV1.RaiseHelpNowRequest(message: "followed"), key: "h1").alert)
                let other = try #require(try await a.call(5, API.raiseHelpNow, AlertsV1.RaiseHelpNowRequest(), key: "h2").alert)
                // Someone accepts 5's alert: it does not escalate.
                _ = try await a.call(2, API.respondInbox, AlertsV1.RespondInboxRequest(kind: .helpNow, requestId: other.alertId, action: .accept))
                // User 3 declines 1's alert: a decline is not help.
                _ = try await a.call(3, API.respondInbox, AlertsV1.RespondInboxRequest(kind: .helpNow, requestId: raised.alertId, action: .reject))
                clock.advance(minutes: 4)
                #expect(try await a.service.escalateDueAlerts() == 0)
                peers.state.withLock { $0.locations[1] = AlertsV1.AlertLocation(known: true, latitude: 33.79, longitude: -118.12, placeName: "Parking Lot G") }
                clock.advance(minutes: 1.5)
                #expect(try await a.service.escalateDueAlerts() == 1)
                #expect(try await a.service.escalateDueAlerts() == 0, "once")
                let mine = try #require(try await a.call(1, API.getHelpNow, AlertsV1.GetHelpNowRequest()).mine)
                let escalation = try #require(mine.escalation)
                #expect(escalation.number == "+15625550100" && escalation.label == "Campus police" && escalation.resentTo == 2)
                #expect(escalation.location?.placeName == "Parking Lot G", "where they are now")
                let outbox = try await a.outbox()
                #expect(Set(outbox.filter { $0.source == "help_now_resend:\(raised.alertId)" }.map { $0.recipientUserId == 0 ? $0.address : "\($0.recipientUserId)" })
                        == ["2", "+15625550199"], "again to who has not answered; not to who declined")
                #expect(outbox.contains { $0.source == "help_now_escalated:\(raised.alertId)" && $0.recipientUserId == 1 && $0.body.contains("+15625550100") })
                #expect(a.recorder.events(to: 1).contains { $0.kind == .helpNowEscalated })
                #expect(try await a.call(5, API.getHelpNow, AlertsV1.GetHelpNowRequest()).mine?.escalation == nil)
                // Nothing is left to escalate: the maintenance loop has no escalation to wait for (an
                // accepted alert counted here made it wake every millisecond for as long as it stayed active).
                #expect(try await a.service.nextEscalationAt() == nil)
            }
        }

        @Test("an escalation says where the person is: geo's fix when newer than the phone's own sent with the raise, else the phone's",
              arguments: Engine.allCases)
        func escalation_keepsThePhonesFix_overAnOlderOneOfGeos(engine: Engine) async throws {
            let clock = ManualClock(), peers = FakePeers()
            circle(peers) // geo has a fix at the Library, taken long ago (time 0)
            peers.state.withLock { $0.placeNames["33.79,-118.12"] = "Parking Lot G" }
            try await withAlerts(engine: engine, peers: peers, worker: false, now: { clock.now }) { a in
                let fix = AlertsV1.DeviceFix(latitude: 33.79, longitude: -118.12, accuracyM: 5, deviceTimeMs: clock.now - 1_000)
                _ = try await a.call(1, API.raiseHelpNow, AlertsV1.RaiseHelpNowRequest(fix: fix), key: "h1")
                clock.advance(minutes: 5.5)
                #expect(try await a.service.escalateDueAlerts() == 1)
                let escalation = try #require(try await a.call(1, API.getHelpNow, AlertsV1.GetHelpNowRequest()).mine?.escalation)
                #expect(escalation.location?.placeName == "Parking Lot G" && escalation.location?.fixTimeMs == clock.now - 330_000 - 1_000,
                        "the phone's fix, not geo's older one: \(escalation)")
                _ = try await a.call(1, API.resolveHelpNow, AlertsV1.ResolveHelpNowRequest())

                // Geo's fix newer than the phone's: geo's.
                _ = try await a.call(1, API.raiseHelpNow, AlertsV1.RaiseHelpNowRequest(fix: fix), key: "h2")
                peers.state.withLock {
                    $0.locations[1] = AlertsV1.AlertLocation(known: true, latitude: 33.7801, longitude: -118.1101, fixTimeMs: clock.now, placeName: "Library")
                }
                clock.advance(minutes: 5.5)
                #expect(try await a.service.escalateDueAlerts() == 1)
                let later = try #require(try await a.call(1, API.getHelpNow, AlertsV1.GetHelpNowRequest()).mine?.escalation)
                #expect(later.location?.placeName == "Library", "\(later)")
            }
        }
    }
}

/// helpNow wakes the maintenance loop only for an escalation due before the loop wakes anyway.
@Suite("alerts: when a raise wakes the maintenance loop")
struct MaintenanceWakeTests {
    @Test func onlyWorkDueBeforeTheLoopsNextWakeUp_orWithinASecondOfAPassUnderWay_ringsIt() {
        // The loop sleeps until 10,000 (ms): an escalation five minutes after a raise at 9,500 does not ring it.
        #expect(!AlertsService.wakesMaintenance(due: 9_500 + 300_000, wakeAt: 10_000, now: 9_500))
        // A short escalation (a test's, a deployment's) due before then does.
        #expect(AlertsService.wakesMaintenance(due: 9_800, wakeAt: 10_000, now: 9_500))
        #expect(!AlertsService.wakesMaintenance(due: 10_000, wakeAt: 10_000, now: 9_500))
        // A pass under way may have read before the raise committed, and then sleeps a second at
        // most: rung for work due within that second, not for an escalation five minutes away (a
        // stream of raises rang pass after pass).
        #expect(AlertsService.wakesMaintenance(due: 9_800, wakeAt: 0, now: 9_500))
        #expect(AlertsService.wakesMaintenance(due: 9_500 + AlertsService.maintenanceLongestWait - 1, wakeAt: 0, now: 9_500))
        #expect(!AlertsService.wakesMaintenance(due: 9_500 + AlertsService.maintenanceLongestWait, wakeAt: 0, now: 9_500))
        #expect(!AlertsService.wakesMaintenance(due: 9_500 + 300_000, wakeAt: 0, now: 9_500))
    }
}
