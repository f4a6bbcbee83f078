@testable import Alerts
import Foundation
import FriensoProto
import FriensoTesting
import GRDB
import Synchronization
import Testing
import Wire

/// A provider that records like the built-in one and then never answers: a crash between
/// sending and marking the delivery.
final class SendsThenHangs: SMSProvider, PushProvider {
    let name = "hangs"
    let inner: any SMSProvider
    let sent = Atomic<Int>(0)
    init(_ inner: any SMSProvider) { self.inner = inner }
    func send(_ batch: [OutgoingMessage]) async -> [DeliveryResult] {
        _ = await inner.send(batch)
        sent.add(batch.count, ordering: .relaxed)
        while !Task.isCancelled { try? await Task.sleep(for: .seconds(60)) }
        return []
    }
}

extension AlertsTestGroup {
    @Suite("alerts: delivery", .serialized, .timeLimit(.minutes(2)))
    struct DeliveryTests {
        @Test(arguments: Engine.allCases) func failedDeliveries_areRetriedWithBackoff_untilTheyGoThrough(engine: Engine) async throws {
            let flaky = FlakyProvider(failures: 2)
            try await withAlerts(engine: engine, peers: HelpNowTests.anasCircle(), sms: flaky) { h in
                _ = try await h.call(1, API.raiseHelpNow, AlertsV1.RaiseHelpNowRequest())
                try await h.drained()
                let sms = try await h.outbox().filter { $0.channel == .sms }
                #expect(sms.count == 3 && sms.allSatisfy { $0.status == .delivered && $0.attempts == 3 && $0.provider == "flaky" })
                #expect(sms.allSatisfy { flaky.attempts($0.deliveryId) == 3 })
            }
        }

        @Test(arguments: Engine.allCases) func aDeliveryThatKeepsFailing_isMarkedFailed_afterTheLastAttempt(engine: Engine) async throws {
            let broken = FlakyProvider(failures: nil)
            try await withAlerts(engine: engine, peers: HelpNowTests.anasCircle(), sms: broken) { h in
                let raised = try await h.call(1, API.raiseHelpNow, AlertsV1.RaiseHelpNowRequest())
                try await h.drained()
                let sms = try await h.outbox().filter { $0.channel == .sms }
                #expect(sms.allSatisfy { $0.status == .failed && $0.attempts == 3 && $0.lastError.contains("gateway timeout") })
                #expect(sms.allSatisfy { broken.attempts($0.deliveryId) == 3 }, "no attempt after the last")
                // Logged just after the commit that `drained` saw: wait for it (bounded).
                try await eventually("the failure is logged") { h.logs.contains("delivery failed for good") }
                // The initiator can see it, and so can the operator.
                let status = try await h.call(1, API.getHelpNow, AlertsV1.GetHelpNowRequest())
                #expect(status.mine?.recipients.allSatisfy { $0.deliveries.contains { $0.channel == .sms && $0.status == .failed } } == true)
                let failed = try await h.operatorCall(API.listOutbox, AlertsV1.ListOutboxRequest(operatorKey: "operator-secret", status: .failed))
                #expect(failed.deliveries.count == 3 && failed.deliveries.allSatisfy { $0.source == "help_now:\(raised.alert?.alertId ?? 0)" })
                #expect(failed.deliveries.allSatisfy { !$0.address.hasPrefix("+1562555") }, "addresses are abbreviated for operators")
            }
        }

        @Test(arguments: Engine.allCases) func aNumberTheProviderRejects_failsAtOnce(engine: Engine) async throws {
            let peers = HelpNowTests.anasCircle()
            peers.state.withLock { $0.phones[2] = "12345" }
            try await withAlerts(engine: engine, peers: peers) { h in
                _ = try await h.call(1, API.raiseHelpNow, AlertsV1.RaiseHelpNowRequest())
                try await h.drained()
                let bad = try #require(try await h.outbox().first { $0.recipientUserId == 2 && $0.channel == .sms })
                #expect(bad.status == .failed && bad.attempts == 1 && bad.lastError.contains("E.164"))
            }
        }

        @Test(arguments: Engine.allCases) func endedDeliveries_areDeletedAfterTheRetention_withTheirAttempts_pendingOnesKept(engine: Engine) async throws {
            let clock = ManualClock()
            let push = FlakyProvider(failures: nil) // every push fails (retryable): it stays pending
            try await withAlerts(engine: engine, peers: HelpNowTests.anasCircle(), push: push, worker: false, now: { clock.now }) { h in
                try await h.device(2, "ben-phone-token-1")
                _ = try await h.call(1, API.raiseHelpNow, AlertsV1.RaiseHelpNowRequest(message: "help"), key: "raise-1")
                _ = try await h.service.deliverDue()
                let before = try await h.outbox()
                let statuses: [AlertsV1.DeliveryStatus] = before.map(\.status)
                #expect(statuses.count(where: { $0 == .delivered }) == 3, "\(statuses)")
                #expect(statuses.count(where: { $0 == .pending }) == 1, "\(statuses)")
                #expect(statuses.count(where: { $0 == .skipped }) == 1, "\(statuses)")
                func attempts() async throws -> Int {
                    var count = 0
                    for delivery in try await h.outbox() { count += delivery.attemptLog.count }
                    return count
                }
                #expect(try await attempts() == 4, "3 SMS delivered, 1 push refused")

                clock.advance(minutes: 24 * 60)
                #expect(try await h.service.pruneOutbox() == 0, "a day old: kept")
                clock.advance(minutes: 90 * 24 * 60)
                #expect(try await h.service.pruneOutbox() == 4, "the delivered and the skipped, 91 days old")
                let after = try await h.outbox()
                #expect(after.count == 1, "a pending delivery is never deleted")
                #expect(after.first?.status == AlertsV1.DeliveryStatus.pending, "a pending delivery is never deleted")
                #expect(try await attempts() == 1, "the deleted rows' attempts went with them")
                #expect(try await h.sent().isEmpty, "the recorder's copies too")
            }
        }

        @Test(arguments: Engine.allCases) func aCrashBetweenSendingAndMarking_doesNotSendTwice(engine: Engine) async throws {
            try await withStorage(engine) { storage in
                let peers = HelpNowTests.anasCircle()
                // First life: the provider sends (records) and the process "dies" before marking.
                try await withAlerts(storage: storage, peers: peers, worker: false) { h in
                    _ = try await h.call(1, API.raiseHelpNow, AlertsV1.RaiseHelpNowRequest(message: "once"))
                    let recording = RecordingProvider(name: "outbox-sms", store: h.service.store, logger: h.logs.logger("p"),
                                                      now: { WallClock.milliseconds() })
                    let hanging = SendsThenHangs(recording)
                    let (crashed, crashedStorage) = try await anotherAlerts(on: storage, peers: peers, sms: hanging, push: hanging,
                                                                            logger: h.logs.logger("crashing"))
                    let pass = Task { try await crashed.deliverDue() }
                    try await eventually("the provider to send") { hanging.sent.load(ordering: .relaxed) == 3 }
                    pass.cancel()
                    _ = try? await pass.value
                    await crashedStorage.close()
                    #expect(try await h.outbox().filter { $0.channel == .sms }.allSatisfy { $0.status == .pending }, "not marked: the crash")
                }
                // Second life: the same deliveries go again, with the same idempotency keys.
                try await withAlerts(storage: storage, peers: peers) { h in
                    try await h.drained()
                    #expect(try await h.outbox().filter { $0.channel == .sms }.allSatisfy { $0.status == .delivered })
                    #expect(try await h.sent().count == 3, "each SMS sent once")
                }
            }
        }

        /// The built-in providers' record is written by the pass's finishing transaction (item 73
        /// of issue 16): a message counts as sent exactly when its row is marked. When that commit
        /// fails, nothing was sent and the rows stay pending; the next pass sends each once.
        @Test(arguments: Engine.allCases) func theBuiltInRecord_commitsWithThePassThatMarksTheRows(engine: Engine) async throws {
            try await withStorage(engine) { storage in
                try await withAlerts(storage: storage, peers: HelpNowTests.anasCircle(), worker: false) { h in
                    _ = try await h.call(1, API.raiseHelpNow, AlertsV1.RaiseHelpNowRequest(message: "once"))
                    let before = try await h.outbox()
                    #expect(before.filter { $0.channel == .sms && $0.status == .pending }.count == 3)
                    try await Self.refuseMarking(storage, true)
                    await #expect(throws: (any Error).self, "the pass's commit fails") { _ = try await h.service.deliverDue() }
                    #expect(try await h.sent().isEmpty, "nothing counts as sent: the record went with the failed commit")
                    #expect(try await h.outbox().map(\.status) == before.map(\.status), "every row as before the pass")
                    #expect(try await h.outbox().map(\.attempts) == before.map(\.attempts))
                    try await Self.refuseMarking(storage, false)
                    _ = try await h.service.deliverDue()
                    #expect(try await h.outbox().filter { $0.channel == .sms }.allSatisfy { $0.status == .delivered })
                    #expect(try await h.sent().count == 3, "each SMS recorded once")
                }
            }
        }

        /// An alert's deliveries are found through the `dedupe_key` index (which starts with the
        /// source) since the index on `source` went (issue 16, item 77): only that source's rows,
        /// not those of a source it is a prefix of, in the order they were queued.
        @Test func anAlertsDeliveries_areFoundByTheirKeysIndex_andOnlyThem() async throws {
            let storage = try await TestStorage.fresh(.sqlite, service: "alerts")
            let store = try SQLiteAlertsStore(path: "\(storage.directory)/alerts.sqlite")
            let found = try await store.database.write { db in
                for source in ["help_now:1", "help_now:10", "help_now:1|odd", "help_now:0"] {
                    try SQLiteAlertsStore.enqueue(db, [Outgoing(source: source, recipient: .phone("+15625550199"), channels: [.sms], body: source),
                                                       Outgoing(source: source, recipient: .user(7), channels: [.sms, .push], body: source)],
                                                  now: 1)
                }
                let indexes = try String.fetchAll(db, sql: "SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'outbox'")
                let (lower, upper) = OutboxRows.keyRange(of: "help_now:1")
                let plan = try queryPlan(db, SQLiteAlertsStore.summariesSQL, [lower, upper, "help_now:1"])
                return (indexes, plan, try SQLiteAlertsStore.summaries(db, source: "help_now:1"))
            }
            let (indexes, plan, summaries) = found
            // What the outbox's queries use, and nothing else (items 77 and 78 of issue 16): the
            // due rows' index (`takeDue`) and the key's (queueing once; an alert's deliveries).
            #expect(indexes.sorted() == ["outbox_due", "sqlite_autoindex_outbox_1"], "\(indexes)")
            #expect(plan.contains { $0.contains("USING INDEX sqlite_autoindex_outbox_1 (dedupe_key>? AND dedupe_key<?)") }, "\(plan)")
            #expect(summaries.keys.sorted() == ["phone:+15625550199", "user:7"])
            #expect(summaries["user:7"]?.map(\.status) == [.skipped, .pending], "the push (no device), then the SMS, as queued")
            #expect(summaries["phone:+15625550199"]?.map(\.channel) == [.sms])
            withExtendedLifetime(storage) {} // its folder holds the database
        }

        /// A trigger that fails any change of an outbox row's status (a pass's marking), or drops it.
        static func refuseMarking(_ storage: TestStorage, _ refuse: Bool) async throws {
            switch storage.engine {
            case .sqlite:
                var configuration = Configuration()
                configuration.busyMode = .timeout(10)
                let queue = try DatabaseQueue(path: "\(storage.directory)/alerts.sqlite", configuration: configuration)
                try await queue.write { db in
                    try db.execute(sql: refuse ? """
                        CREATE TRIGGER refuse_marking BEFORE UPDATE OF status ON outbox WHEN OLD.status != NEW.status
                        BEGIN SELECT RAISE(ABORT, 'injected: marking refused'); END
                        """ : "DROP TRIGGER refuse_marking")
                }
                try queue.close()
            case .postgres:
                _ = try await storage.psql(refuse ? """
                    CREATE FUNCTION refuse_marking() RETURNS trigger LANGUAGE plpgsql AS 'BEGIN RAISE EXCEPTION ''injected: marking refused''; END';
                    CREATE TRIGGER refuse_marking BEFORE UPDATE OF status ON outbox FOR EACH ROW WHEN (OLD.status IS DISTINCT FROM NEW.status)
                        EXECUTE FUNCTION refuse_marking();
                    """ : "DROP TRIGGER refuse_marking ON outbox; DROP FUNCTION refuse_marking();")
            }
        }

        @Test(arguments: Engine.allCases) func placeEvents_arePushedToTheViewer_once_acrossPullsAndRestarts(engine: Engine) async throws {
            try await withStorage(engine) { storage in
                let peers = FakePeers()
                let events = [
                    (event: GeoV1.PlaceAlertEvent(eventId: 1, alertId: 7, subjectId: 1, label: "Home", arrived: true, atMs: 1), viewer: UInt64(2)),
                    (event: GeoV1.PlaceAlertEvent(eventId: 2, alertId: 7, subjectId: 1, label: "Home", arrived: false, atMs: 2), viewer: UInt64(2)),
                ]
                try await withAlerts(storage: storage, peers: peers) { h in
                    try await h.device(2, "bens-device-token")
                    peers.state.withLock { $0.placeEvents = events } // geo has them now
                    try await h.service.pullPlaceEvents() // the worker pulls too: either way, once
                    try await eventually("two deliveries") { try await h.outbox().count == 2 }
                    try await h.drained()
                    let sent = try await h.sent()
                    #expect(sent.map(\.address) == ["bens-device-token", "bens-device-token"])
                    #expect(sent.map(\.body) == ["User 1 (@user1) arrived at Home", "User 1 (@user1) left Home"])
                }
                peers.state.withLock { s in
                    s.placeEvents.append((GeoV1.PlaceAlertEvent(eventId: 3, alertId: 7, subjectId: 1, label: "Home", arrived: true, atMs: 3), 2))
                    s.down = ["geo"]
                }
                try await withAlerts(storage: storage, peers: peers) { h in
                    await expectError(.unavailable) { _ = try await h.service.pullPlaceEvents() }
                    peers.state.withLock { $0.down = [] }
                    try await h.service.pullPlaceEvents()
                    try await eventually("the new one only") { try await h.outbox().count == 3 }
                    try await h.drained()
                    #expect(try await h.sent().count == 3)
                }
            }
        }

        @Test(arguments: Engine.allCases) func socialNotices_areDeliveredOnce_pokesCircleRequestsAndInvitations(engine: Engine) async throws {
            try await withStorage(engine) { storage in
                let peers = FakePeers()
                let ana = SocialV1.UserRef(userId: 1, username: "ana", firstName: "Ana", lastName: "Lima")
                let notices = [
                        SocialV1.Notice(noticeId: 1, kind: .poke, from: ana, toUserId: 2, createdAtMs: 1),
                        SocialV1.Notice(noticeId: 2, kind: .circleRequest, from: ana, toUserId: 3, createdAtMs: 2),
                        SocialV1.Notice(noticeId: 3, kind: .circleInvite, from: ana, toPhone: "+15625550123", createdAtMs: 3),
                ]
                try await withAlerts(storage: storage, peers: peers) { h in
                    try await h.device(2, "bens-device-token")
                    try await h.device(3, "cys-device-token")
                    peers.state.withLock { $0.notices = notices } // social has them now
                    try await h.service.pullNotices() // the worker pulls too: either way, once
                    try await eventually("three deliveries") { try await h.outbox().count == 3 }
                    try await h.drained()
                    let sent = try await h.sent()
                    #expect(sent.map(\.address).sorted() == ["+15625550123", "bens-device-token", "cys-device-token"])
                    #expect(sent.first { $0.address == "bens-device-token" }?.body == "Ana Lima (@ana) poked you")
                    #expect(sent.first { $0.address == "+15625550123" }?.body.contains("https://frienso.app/join") == true)
                    #expect(h.recorder.events(to: 3).first?.kind == .coreFriendRequest)
                }
                // After a restart the cursor holds: nothing queued again; a new notice is.
                peers.state.withLock { $0.notices.append(SocialV1.Notice(noticeId: 4, kind: .poke, from: ana, toUserId: 3, createdAtMs: 4)) }
                try await withAlerts(storage: storage, peers: peers) { h in
                    try await eventually("the new poke") { try await h.outbox().count == 4 }
                    try await h.service.pullNotices()
                    try await h.drained()
                    #expect(try await h.outbox().count == 4)
                    #expect(try await h.sent().count == 4)
                }
            }
        }
    }
}

@Suite("alerts: the delivery plan (pure)")
struct DeliveryPlanTests {
    func row(_ id: UInt64, _ channel: AlertsV1.Channel, user: UInt64 = 7, address: String = "", attempts: UInt32 = 0) -> AlertsV1.Delivery {
        var d = AlertsV1.Delivery()
        d.deliveryId = id
        d.channel = channel
        d.recipientUserId = user
        d.address = address
        d.attempts = attempts
        d.status = .pending
        return d
    }

    @Test func phones_areFilledIn_missingOnesSkipped_andAFailedLookupPostponesWithoutSpendingAnAttempt() {
        let due = [row(1, .sms, user: 7), row(2, .sms, user: 8), row(3, .push, user: 7, address: "token"), row(4, .sms, address: "+15625550100")]
        let found = DeliveryPlan.addressed(due, phones: [7: "+15625550107"])
        #expect(found.due.map(\.address) == ["+15625550107", "", "token", "+15625550100"])
        #expect(found.postponed.isEmpty && found.skipped.map(\.0) == [2])
        let down = DeliveryPlan.addressed(due, phones: nil)
        #expect(down.postponed == [1, 2] && down.skipped.isEmpty)

        var policy = RetryPolicy()
        policy.lookupDelay = .seconds(2)
        let after = DeliveryPlan(policy: policy).afterPass(due, postponed: [1, 2], skipped: [], outcomes: [], at: 10_000)
        #expect(after.map(\.deliveryId) == [1, 2])
        #expect(after.allSatisfy { $0.status == .pending && $0.attempts == 0 && $0.nextAttemptAtMs == 12_000 })
    }

    @Test func results_deliver_retryWithBackoff_orFailForGood() {
        var policy = RetryPolicy()
        policy.maxAttempts = 3
        policy.firstDelay = .seconds(1)
        policy.maxDelay = .seconds(3)
        let plan = DeliveryPlan(policy: policy)
        let due = [row(1, .sms, address: "+1"), row(2, .push, address: "t"), row(3, .sms, address: "+3", attempts: 2),
                   row(4, .push, address: "t4"), row(5, .sms), row(6, .push, address: "t6", attempts: 2)]
        let after = plan.afterPass(due, postponed: [], skipped: [(5, "no phone number for user 7")], outcomes: [
            (1, "+1", .delivered(reference: "SM1"), "sms-provider"),
            (2, "t", .failed("503", retryable: true), "push-provider"),
            (3, "+3", .failed("timeout", retryable: true), "sms-provider"),
            (4, "t4", .failed("unregistered", retryable: false), "push-provider"),
            (6, "t6", .failed("503", retryable: true), "push-provider"),
        ], at: 1_000)
        let byID = Dictionary(uniqueKeysWithValues: after.map { ($0.deliveryId, $0) })
        #expect(byID[1]?.status == .delivered && byID[1]?.attempts == 1 && byID[1]?.provider == "sms-provider")
        #expect(byID[2]?.status == .pending && byID[2]?.nextAttemptAtMs == 2_000, "first retry after 1 s")
        #expect(byID[3]?.status == .failed && byID[3]?.attempts == 3, "the third attempt was the last")
        #expect(byID[4]?.status == .failed && byID[4]?.attempts == 1, "a final error fails at once")
        #expect(byID[5]?.status == .skipped && byID[5]?.lastError == "no phone number for user 7")
        #expect(byID[6]?.status == .failed, "attempts spent")
        #expect(plan.afterPass([row(9, .push, address: "t", attempts: 1)], postponed: [], skipped: [],
                               outcomes: [(9, "t", .failed("503", retryable: true), "p")], at: 0).first?.nextAttemptAtMs == 2_000,
                "backoff doubles")
        #expect(plan.afterPass([row(9, .push, address: "t", attempts: 5)], postponed: [], skipped: [],
                               outcomes: [], at: 0).isEmpty, "a row nothing happened to is not rewritten")
    }
}

/// The labels of `frienso_delivery_attempts_total` (dashboards and alerts rules name them).
@Suite("alerts: outbox metric labels")
struct OutboxMetricLabelTests {
    @Test func attemptOutcomes_areLabelledByTheirShortProtoName() {
        #expect(OutboxMetrics.label(AlertsV1.AttemptOutcome.delivered) == "DELIVERED")
        #expect(OutboxMetrics.label(AlertsV1.AttemptOutcome.deadAddress) == "DEAD_ADDRESS")
        #expect(OutboxMetrics.label(AlertsV1.AttemptOutcome.retry) == "RETRY")
        #expect(OutboxMetrics.kind(of: "help_now:12") == "help_now" && OutboxMetrics.kind(of: "Weird:1") == "other")
    }
}
