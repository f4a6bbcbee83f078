@testable import Alerts
import Foundation
import FriensoProto
import FriensoTesting
import Testing

extension AlertsTestGroup {
    /// `raiseAlert` and `changeAlert` return the alert built from what they wrote (no read-back of
    /// the rows just written: issue 16, `docs/benchmarks.md` item 48). What they return must be
    /// exactly what a fresh read of the alert returns, after every kind of change, on both engines.
    @Suite("alerts: a raise or change returns what a read returns", .serialized, .timeLimit(.minutes(2)))
    struct AlertRecordTests {
        static func newAlert(at: Int64) -> NewAlert {
            let location = AlertsV1.AlertLocation(known: true, latitude: 33.78381, longitude: -118.11412, accuracyM: 8, fixTimeMs: at - 5,
                                                  placeName: "Library")
            return NewAlert(initiator: 1, message: "followed on 5th street", location: location, at: at, key: "raise-1",
                            recipients: [.user(2), .user(3), .phone("+15625550199")],
                            grants: [GrantRecord(subject: 1, viewer: 2, reason: "help_now", expiresMs: GrantRecord.untilResolved)],
                            promptNumber: "911", promptLabel: "Emergency") { id in
                [Outgoing(source: AlertRecord.source(id), recipient: .user(2), channels: [.push, .sms], body: "help", about: 1),
                 Outgoing(source: AlertRecord.source(id), recipient: .user(3), channels: [.push, .sms], body: "help", about: 1),
                 Outgoing(source: AlertRecord.source(id), recipient: .phone("+15625550199"), channels: [.sms], body: "help", about: 1)]
            }
        }

        @Test(arguments: Engine.allCases) func everyChange_returnsTheAlertAsAFreshReadSeesIt(engine: Engine) async throws {
            try await withAlerts(engine: engine, worker: false) { h in
                let store = h.service.store
                try await h.device(2, "ben-phone-token-1") // a push row for Ben, a skipped one for Cy (no device)
                let (raised, _) = try await store.raiseAlert(Self.newAlert(at: 1_000))
                #expect(raised.deliveries.values.reduce(0) { $0 + $1.count } == 5, "Ben: push and SMS; Cy: skipped push and SMS; the number: SMS")
                #expect(try await store.alert(id: raised.id) == raised, "the raise")

                let id = raised.id
                let changes: [(String, AlertChange)] = [
                    ("Ben accepts", AlertChange(recipient: AnswerChange(user: 2, answer: .accepted),
                                                messages: [Outgoing(source: "help_answer:\(id):2:1", recipient: .user(1), channels: [.push], body: "on the way")])),
                    ("Cy declines", AlertChange(recipient: AnswerChange(user: 3, answer: .declined))),
                    ("Cy dismisses", AlertChange(recipient: AnswerChange(user: 3, answer: nil))),
                    ("the call is reported, not dialed", AlertChange(reportedCall: false)),
                    ("the call is reported, dialed", AlertChange(reportedCall: true)),
                    ("it escalates", AlertChange(escalation: AlertsV1.Escalation(escalatedAtMs: 0, number: "+15625551234", label: "Campus police",
                                                                                 location: Self.newAlert(at: 0).location, resentTo: 1))),
                    ("a message under the alert's own source (its deliveries are read again)",
                     AlertChange(messages: [Outgoing(source: AlertRecord.source(id), recipient: .phone("+15625550100"), channels: [.sms], body: "again")])),
                    ("it is resolved", AlertChange(resolvedBy: "initiator",
                                                   grants: [GrantRecord(subject: 1, viewer: 2, reason: "help_now", expiresMs: 9_000)],
                                                   messages: [Outgoing(source: "help_now_resolved:\(id)", recipient: .user(2), channels: [.push, .sms],
                                                                       body: "safe")])),
                ]
                var at: Int64 = 2_000
                for (what, change) in changes {
                    at += 1_000
                    let result = try await store.changeAlert(.id(id), at: at) { _ in change }
                    let returned = try #require(result?.record, "\(what): changed")
                    let read = try #require(try await store.alert(id: id))
                    #expect(returned == read, "\(what): returned \(returned)\nread \(read)")
                }
                let final = try #require(try await store.alert(id: id))
                #expect(final.state == .resolved && final.resolvedAtMs == at && final.resolvedBy == "initiator")
                #expect(final.recipients.map(\.answer) == [.accepted, .declined, .pending])
                #expect(final.prompt.reported && final.prompt.dialed && final.escalation?.resentTo == 1)
                #expect(final.deliveries["phone:+15625550100"]?.count == 1, "the message under the alert's own source is in its deliveries")

                // A change `decide` declines returns nothing and writes nothing.
                #expect(try await store.changeAlert(.id(id), at: at + 1) { _ in nil } == nil)
                #expect(try await store.alert(id: id) == final)
            }
        }
    }
}
