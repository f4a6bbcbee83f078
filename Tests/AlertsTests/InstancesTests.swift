@testable import Alerts
import FriensoProto
import FriensoTesting
import Synchronization
import Testing
import Wire

/// A provider shared by several alerts instances: counts what it was handed, per delivery.
final class CountingProvider: SMSProvider, PushProvider {
    let name = "counting"
    var sendsOffMachine: Bool { false }
    private let handed = Mutex<[UInt64: Int]>([:])
    func send(_ batch: [OutgoingMessage]) async -> [DeliveryResult] {
        handed.withLock { for m in batch { $0[m.deliveryID, default: 0] += 1 } }
        return batch.map { .delivered(reference: $0.idempotencyKey) }
    }
    var counts: [UInt64: Int] { handed.withLock { $0 } }
}

/// Whether the test still raises alerts (the delivery loops run until it stops).
final class RaisingFlag: Sendable {
    let on = Atomic<Bool>(true)
}

extension AlertsTestGroup {
    /// Several alerts instances on one PostgreSQL schema (SQLite's file is one process's): their
    /// delivery passes and maintenance passes run at once, and no message goes out twice, no
    /// watch ends twice, no alert escalates twice.
    @Suite("alerts: several instances on PostgreSQL", .serialized, .timeLimit(.minutes(2)))
    struct InstancesTests {
        /// 30 helpNow alerts raised one after another while both instances run delivery passes in
        /// a loop: every pass finds rows the other may be reading. Each message is handed to the
        /// provider exactly once (fails when a pass takes rows without locking and claiming them).
        @Test func twoInstancesSharingTheOutbox_handEachMessageToTheProviderOnce() async throws {
            try await withStorage(.postgres) { storage in
                let peers = FakePeers()
                peers.state.withLock { s in
                    for user in UInt64(1)...30 { s.circles[user] = (UInt64(0)..<3).map { .phone("+156255\(String(format: "%05d", user * 10 + $0))") } }
                }
                let provider = CountingProvider()
                try await withAlerts(storage: storage, peers: peers, sms: provider, push: provider, worker: false) { h in
                    let (other, otherStorage) = try await anotherAlerts(on: storage, peers: peers, sms: provider, push: provider, instance: "2",
                                                                        logger: h.logs.logger("alerts-2"))
                    let raising = RaisingFlag()
                    try await withThrowingTaskGroup(of: Void.self) { group in
                        for service in [h.service, other] {
                            group.addTask {
                                while raising.on.load(ordering: .relaxed) { _ = try await service.deliverDue() }
                                _ = try await service.deliverDue()
                            }
                        }
                        for user in UInt64(1)...30 {
                            _ = try await h.call(user, API.raiseHelpNow, AlertsV1.RaiseHelpNowRequest(message: "help \(user)"))
                        }
                        raising.on.store(false, ordering: .relaxed)
                        try await group.waitForAll()
                    }
                    try await h.drained()
                    let rows = try await h.outbox()
                    #expect(rows.count == 90 && rows.allSatisfy { $0.status == .delivered }, "\(rows.map(\.status))")
                    let counts = provider.counts
                    #expect(counts.count == 90, "every message handed over: \(counts.count)")
                    #expect(counts.values.allSatisfy { $0 == 1 }, "handed over twice: \(counts.filter { $0.value > 1 }.keys.sorted())")
                    await otherStorage.close()
                }
            }
        }

        /// An instance dies in the middle of a pass (after the provider took the messages, before
        /// their answers were recorded): another instance leaves its rows alone while its claim
        /// holds, then takes them and sends them again with the same idempotency keys.
        @Test func aPassThatDied_leavesItsRows_toAnotherInstance_onceItsClaimRanOut() async throws {
            try await withStorage(.postgres) { storage in
                let peers = HelpNowTests.anasCircle()
                let config = {
                    var config = testConfig()
                    config.deliveryClaim = .seconds(2)
                    return config
                }()
                try await withAlerts(storage: storage, peers: peers, config: config, worker: false) { h in
                    _ = try await h.call(1, API.raiseHelpNow, AlertsV1.RaiseHelpNowRequest(message: "once"))
                    let hanging = SendsThenHangs(RecordingProvider(name: "outbox-sms", store: h.service.store, logger: h.logs.logger("p"),
                                                                   now: { WallClock.milliseconds() }))
                    let (dying, dyingStorage) = try await anotherAlerts(on: storage, peers: peers, config: config, sms: hanging, push: hanging,
                                                                        instance: "2", logger: h.logs.logger("dying"))
                    let pass = Task { try await dying.deliverDue() }
                    try await eventually("the provider took the messages") { hanging.sent.load(ordering: .relaxed) == 3 }
                    pass.cancel()
                    _ = try? await pass.value
                    await dyingStorage.close()
                    // Its claim holds: this instance's pass takes none of its rows.
                    _ = try await h.service.deliverDue()
                    #expect(try await h.outbox().filter { $0.status == .pending }.count == 3, "claimed rows were taken at once")
                    // Once the claim ran out, they go (the recorder keeps each key once).
                    try await eventually("the claimed rows delivered", timeout: .seconds(10)) {
                        _ = try await h.service.deliverDue()
                        return try await h.outbox().allSatisfy { $0.status != .pending }
                    }
                    #expect(try await h.outbox().filter { $0.status == .delivered }.count == 3, "the three SMS (the pushes: no device)")
                    #expect(try await h.sent().count == 3, "each message recorded once")
                }
            }
        }

        /// Both instances pull social's notices at the same moment: each is queued once, and the
        /// live event a circle request makes goes out once (fails when every pull announces its page).
        @Test func twoInstancesPullingTheSameNotices_queueAndAnnounceEachOnce() async throws {
            try await withStorage(.postgres) { storage in
                let peers = FakePeers()
                let ana = SocialV1.UserRef(userId: 1, username: "ana", firstName: "Ana", lastName: "Lima")
                try await withAlerts(storage: storage, peers: peers, worker: false) { h in
                    let (other, otherStorage) = try await anotherAlerts(on: storage, peers: peers, instance: "2", events: h.recorder,
                                                                        logger: h.logs.logger("alerts-2"))
                    for round in UInt64(0)..<5 {
                        peers.state.withLock { $0.notices.append(SocialV1.Notice(noticeId: round + 1, kind: .circleRequest, from: ana,
                                                                                   toUserId: 10 + round, createdAtMs: Int64(round))) }
                        async let a = h.service.pullNotices()
                        async let b = other.pullNotices()
                        _ = try await (a, b)
                        #expect(h.recorder.events(to: 10 + round).filter { $0.kind == .coreFriendRequest }.count == 1, "round \(round)")
                    }
                    #expect(try await h.outbox().count == 5, "one (skipped: no device) push row per notice")
                    await otherStorage.close()
                }
            }
        }

        /// Both instances' maintenance passes at the same moment: a watch whose time ran out ends
        /// once, and an alert nobody accepted escalates once.
        @Test func twoMaintenancePassesAtOnce_endAWatchOnce_andEscalateAnAlertOnce() async throws {
            try await withStorage(.postgres) { storage in
                let clock = ManualClock()
                let peers = WatchAndInboxTests.deesCircle()
                peers.state.withLock { $0.circles[1] = [.user(2), .user(3)] }
                try await withAlerts(storage: storage, peers: peers, worker: false, now: { clock.now }) { h in
                    let (other, otherStorage) = try await anotherAlerts(on: storage, peers: peers, instance: "2", now: { clock.now },
                                                                        logger: h.logs.logger("alerts-2"))
                    for round in 0..<5 {
                        let watcher = UInt64(11)
                        let started = try #require(try await h.call(10, API.startWatch, AlertsV1.StartWatchRequest(durationSeconds: 600)).session)
                        _ = try await h.call(watcher, API.respondInbox, AlertsV1.RespondInboxRequest(kind: .watch, requestId: started.sessionId, action: .accept))
                        _ = try await h.call(1, API.raiseHelpNow, AlertsV1.RaiseHelpNowRequest(message: "round \(round)"))
                        clock.advance(minutes: 11)
                        async let a = h.service.expireDueWatches()
                        async let b = other.expireDueWatches()
                        let ended = try await a + b
                        #expect(ended == 1, "round \(round): the watch ended \(ended) times")
                        async let c = h.service.escalateDueAlerts()
                        async let d = other.escalateDueAlerts()
                        let escalated = try await c + d
                        #expect(escalated == 1, "round \(round): the alert escalated \(escalated) times")
                        _ = try await h.call(1, API.resolveHelpNow, AlertsV1.ResolveHelpNowRequest())
                    }
                    let ends = try await h.outbox().filter { $0.source.hasPrefix("watch_end:") }
                    #expect(ends.count == 5, "one end message per watch to its one watcher: \(ends.count)")
                    await otherStorage.close()
                }
            }
        }
    }
}
