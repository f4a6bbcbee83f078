@testable import Alerts
import FriensoProto
import FriensoTesting
import Testing
import Wire

extension AlertsTestGroup {
    /// The writes that take many rows at once (an alert's circle, its grants, its deliveries, a
    /// delivery pass's records) do so in one statement each on PostgreSQL (issue 16, item 125),
    /// and mean the same on both engines as one row at a time did: a key queued once, rows in
    /// their order, each grant its own next version, attempts numbered per delivery.
    @Suite("alerts: many rows at once", .serialized, .timeLimit(.minutes(2)))
    struct ManyRowsTests {
        @Test(arguments: Engine.allCases) func queueing_keepsOrder_andQueuesAKeyOnce(engine: Engine) async throws {
            let clock = ManualClock()
            try await withAlerts(engine: engine, worker: false, now: { clock.now }) { h in
                try await h.device(7, "older-device")
                clock.advance(minutes: 1)
                try await h.device(7, "newer-device")
                let store = h.service.store
                let number = Outgoing(source: "test:1", recipient: .phone("+15625550199"), channels: [.sms], body: "to a number")
                let user = Outgoing(source: "test:1", recipient: .user(7), channels: [.sms, .push], body: "to user 7")
                // The number twice in one call: its second row has the first's key.
                #expect(try await store.enqueue([number, user, number], at: 1, cursor: nil) == 4)
                // Queued before: only the new one.
                let later = Outgoing(source: "test:2", recipient: .phone("+15625550199"), channels: [.sms], body: "later")
                #expect(try await store.enqueue([user, later], at: 2, cursor: nil) == 1)
                let rows = try await h.outbox() // oldest first
                #expect(rows.map(\.body) == ["to a number", "to user 7", "to user 7", "to user 7", "later"])
                // Push before SMS, each device in the order it registered.
                #expect(rows.map(\.channel) == [.sms, .push, .push, .sms, .sms])
                #expect(rows[1...2].map(\.address) == ["older-device", "newer-device"])
                #expect(rows.map(\.deliveryId) == rows.map(\.deliveryId).sorted())
            }
        }

        @Test(arguments: Engine.allCases) func aRaise_writesItsCircleInOrder_andGivesEachGrantTheNextVersion(engine: Engine) async throws {
            try await withAlerts(engine: engine, worker: false) { h in
                let store = h.service.store
                let circle: [CircleContact] = [.user(12), .phone("+15625550101"), .user(11), .user(14), .phone("+15625550102"), .user(13)]
                let grants = [11, 12, 13, 14].map { GrantRecord(subject: 9, viewer: UInt64($0), reason: "help_now", expiresMs: 5_000) }
                func raise(_ key: String) -> NewAlert {
                    NewAlert(initiator: 9, message: "help", location: AlertsV1.AlertLocation(), at: 1, key: key, recipients: circle, grants: grants,
                             promptNumber: "911", promptLabel: "Emergency", messages: { _ in [] })
                }
                let (record, set) = try await store.raiseAlert(raise("raise-1"))
                #expect(record.recipients.map(\.user) == [12, 0, 11, 14, 0, 13])
                #expect(try await store.alert(id: record.id)?.recipients.map(\.user) == [12, 0, 11, 14, 0, 13], "stored in the circle's order")
                #expect(try await store.alert(id: record.id)?.recipients.map(\.phone) == ["", "+15625550101", "", "", "+15625550102", ""])
                let first = set.map(\.version)
                #expect(set.map(\.viewer) == [11, 12, 13, 14])
                #expect(first.count == 4 && zip(first, first.dropFirst()).allSatisfy { $0 + 1 == $1 }, "each the next version: \(first)")
                let published = try await store.grantsToPublish(now: 1, keepRevoked: 0)
                #expect(published.filter { $0.subject == 9 }.sorted { $0.viewer < $1.viewer }.map(\.version) == first, "stored as returned")
                // The same grants set again (a second alert): updated where they are, with newer versions.
                _ = try await store.changeAlert(.id(record.id), at: 2) { _ in AlertChange(resolvedBy: "initiator") }
                let (_, again) = try await store.raiseAlert(raise("raise-2"))
                #expect(again.map(\.version) == first.map { $0 + 4 })
                #expect(try await store.grantsToPublish(now: 1, keepRevoked: 0).filter { $0.subject == 9 }.count == 4)
            }
        }

        @Test(arguments: Engine.allCases) func aPassRecordsEachAnswer_withAttemptsNumberedPerDelivery(engine: Engine) async throws {
            try await withAlerts(engine: engine, worker: false) { h in
                let store = h.service.store
                let messages = (1...3).map { Outgoing(source: "test:\($0)", recipient: .phone("+1562555010\($0)"), channels: [.sms], body: "message \($0)") }
                #expect(try await store.enqueue(messages, at: 1, cursor: nil) == 3)
                let (taken, _) = try await store.takeDue(at: 1, limit: 10, claimUntil: 60_000)
                #expect(taken.count == 3)
                let (a, b, c) = (taken[0], taken[1], taken[2])
                // a begun once, b twice (a pass that logged it twice); c never left the machine.
                try await store.beginAttempts([(a.deliveryId, "off-machine"), (b.deliveryId, "off-machine"), (b.deliveryId, "off-machine")], at: 2)
                func delivered(_ d: AlertsV1.Delivery) -> AlertsV1.Delivery {
                    var done = d
                    (done.status, done.attempts, done.updatedAtMs, done.provider) = (.delivered, d.attempts + 1, 3, "off-machine")
                    return done
                }
                let outgoing = messages.enumerated().map { i, m in
                    OutgoingMessage(deliveryID: taken[i].deliveryId, idempotencyKey: "frienso-delivery-\(taken[i].deliveryId)", channel: .sms,
                                    address: "+1562555010\(i + 1)", body: m.body,
                                    recipientUserID: 0, platform: .unspecified, source: m.source)
                }
                // c answered twice (two attempts logged); its record sent twice (kept once).
                _ = try await store.finishPass([delivered(a), delivered(c)],
                                               answers: [(a.deliveryId, "off-machine", .delivered(reference: "ref-a")),
                                                         (c.deliveryId, "recorder", .failed("busy", retryable: true)),
                                                         (c.deliveryId, "recorder", .delivered(reference: "ref-c"))],
                                               begun: [a.deliveryId, b.deliveryId], at: 3, deadTokens: [],
                                               sent: [(outgoing[2], "recorder"), (outgoing[2], "recorder")])
                let rows = Dictionary(uniqueKeysWithValues: try await h.outbox().map { ($0.deliveryId, $0) })
                let logA = rows[a.deliveryId]?.attemptLog ?? [], logB = rows[b.deliveryId]?.attemptLog ?? [], logC = rows[c.deliveryId]?.attemptLog ?? []
                #expect(logA.map(\.attempt) == [1] && logA.map(\.outcome) == [.delivered] && logA.map(\.reference) == ["ref-a"])
                #expect(logB.map(\.attempt) == [1, 2] && logB.allSatisfy { $0.outcome == .sending }, "b had no answer: still SENDING")
                #expect(logC.map(\.attempt) == [1, 2] && logC.map(\.outcome) == [.retry, .delivered] && logC.map(\.error) == ["busy", ""])
                #expect(rows[a.deliveryId]?.status == .delivered && rows[c.deliveryId]?.status == .delivered && rows[b.deliveryId]?.status == .pending)
                #expect(try await store.sentMessages().map(\.body) == ["message 3"])
            }
        }
    }
}
