@testable import Alerts
import FriensoProto
import FriensoTesting
import Testing
import Wire

extension AlertsTestGroup {
    @Suite("alerts: export and erasure", .serialized, .timeLimit(.minutes(2)))
    struct ErasureTests {
        @Test("export shows what alerts keeps about you; erasure deletes it, in other people's alerts too, and leaves no trace",
              arguments: Engine.allCases)
        func exportThenErase(engine: Engine) async throws {
            let secret = "meet me at the Rosewood Secret Garden", token = "anas-secret-device-token", phone = "+15625550101"
            let peers = HelpNowTests.anasCircle()
            peers.state.withLock { $0.circles[2] = [.user(1)] }
            try await withAlerts(engine: engine, peers: peers) { h in
                try await h.device(1, token)
                try await h.device(2, "bens-device-token-0002")
                _ = try await h.call(1, API.raiseHelpNow, AlertsV1.RaiseHelpNowRequest(message: secret), key: "h1")
                let raised = try #require(try await h.call(1, API.getHelpNow, AlertsV1.GetHelpNowRequest()).mine)
                _ = try await h.call(2, API.respondInbox, AlertsV1.RespondInboxRequest(kind: .helpNow, requestId: raised.alertId, action: .accept))
                // Ben's own alert reaches Ana: her answer and the messages to her go with her.
                _ = try await h.call(2, API.raiseHelpNow, AlertsV1.RaiseHelpNowRequest(message: "ben needs help"))
                try await h.drained()

                let export = try await h.call(1, API.exportMyData, AlertsV1.ExportMyDataRequest())
                #expect(export.alerts.map(\.message) == [secret])
                #expect(export.alertsReceived.map(\.message) == ["ben needs help"])
                #expect(export.devices.map(\.token) == [token])
                #expect(export.deliveries.contains { $0.body.contains("Rosewood") }, "what went out about her alert")
                #expect(export.deliveries.contains { $0.address == token }, "what went to her device")

                let erased = try await h.operatorCall(API.eraseUser, AlertsV1.EraseUserRequest(userId: 1, addresses: [phone], traces: [phone]))
                #expect(erased.erased > 10, "\(erased.erased) rows")
                let after = try await h.call(1, API.exportMyData, AlertsV1.ExportMyDataRequest())
                #expect(after.alerts.isEmpty && after.alertsReceived.isEmpty && after.devices.isEmpty && after.deliveries.isEmpty)
                let bens = try await h.call(2, API.getHelpNow, AlertsV1.GetHelpNowRequest())
                #expect(bens.others.isEmpty, "Ana's alert is gone from Ben's view")
                #expect(bens.mine?.recipients.isEmpty == true, "Ana is gone from Ben's alert's recipients")
                #expect(try await h.service.store.devices(of: 2).map(\.token) == ["bens-device-token-0002"], "Ben's device stays")
                let residue = try await h.storage.residue(["Rosewood Secret Garden", token, phone])
                #expect(residue.isEmpty, "left behind: \(residue)")
            }
        }
    }
}
