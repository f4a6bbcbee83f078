@testable import Alerts
import ServiceKit
import Deliveries
import Foundation
import FriensoProto
import FriensoTesting
import GRDB
import Testing
import Wire

/// The real providers (Twilio, a JSON webhook, FCM, APNs) against local HTTPS servers that check
/// each request as the provider documents it (`FakeProviders.swift`), then helpNow through them.
struct ProviderFixture: Sendable {
    let temp: TemporaryDirectory
    let ca: TestCA
    let http: ProviderHTTP
    let logs = CapturedLogs()

    static func make() async throws -> ProviderFixture {
        let temp = try TemporaryDirectory("frienso-providers")
        let ca = try await TestCA.make(in: "\(temp.path)/ca")
        return ProviderFixture(temp: temp, ca: ca, http: try ProviderHTTP(caFile: ca.caFile, timeout: .seconds(10)))
    }

    /// Runs `body` with a fresh fixture and always closes it (the HTTP client must be shut down).
    static func with(_ body: (ProviderFixture) async throws -> Void) async throws {
        let f = try await make()
        do { try await body(f) } catch {
            await f.close()
            throw error
        }
        await f.close()
    }

    func close() async {
        await http.shutdown()
        temp.remove()
    }

    func twilio(_ fake: FakeTwilio) throws -> TwilioSMS {
        try TwilioSMS(.init(accountSID: fake.accountSID, authToken: fake.authToken, from: "+15005550006", baseURL: fake.server.baseURL),
                      http: http, logger: logs.logger("twilio"))
    }

    func fcm(_ fake: FakeFCM) throws -> FCMPush {
        let account = try JSONDecoder().decode(FCMPush.ServiceAccount.self, from: Data(try fake.serviceAccountJSON().utf8))
        return try FCMPush(.init(account: account, baseURL: fake.server.baseURL), http: http, logger: logs.logger("fcm"))
    }

    func apns(_ fake: FakeAPNs) throws -> APNsPush {
        try APNsPush(.init(key: fake.keyPEM, keyID: fake.keyID, teamID: fake.teamID, topic: fake.topic, baseURL: fake.server.baseURL),
                     http: http, logger: logs.logger("apns"))
    }
}

func message(_ id: UInt64, _ channel: AlertsV1.Channel, to address: String, source: String = "help_now:1",
             platform: AlertsV1.Platform = .unspecified) -> OutgoingMessage {
    OutgoingMessage(deliveryID: id, idempotencyKey: "frienso-delivery-\(id)", channel: channel, address: address,
                    body: "Ana (@ana) needs help: followed on 5th street", recipientUserID: 2, platform: platform, source: source)
}

extension AlertsTestGroup {
    @Suite("alerts: real providers", .serialized, .timeLimit(.minutes(2)))
    struct ProviderTests {
        @Test func twilio_postsTheDocumentedForm_andClassifiesEachAnswer() async throws {
            try await ProviderFixture.with { f in
                let fake = try await FakeTwilio.start(ca: f.ca)
                let twilio = try f.twilio(fake)
                let sent = await twilio.send([message(1, .sms, to: "+15625550102"), message(2, .sms, to: "+15625550103")])
                #expect(fake.checks.problems.isEmpty, "\(fake.checks.problems)")
                guard case .delivered(let sid) = sent.first else { Issue.record("not delivered: \(sent)"); return }
                #expect(sid.hasPrefix("SM") && sid.count == 34)
                #expect(Set(fake.checks.accepted.map(\.address)) == ["+15625550102", "+15625550103"], "the + arrives as +, not a space")
                #expect(fake.server.requests.first?.form["From"] == "+15005550006")

                fake.checks.script(for: "+15625550102", FakeTwilio.tooManyRequests(retryAfter: 7))
                #expect(await twilio.send([message(3, .sms, to: "+15625550102")]) == [.retryAfter("twilio answered 429: twilio 20429: Too Many Requests", .seconds(7))])
                fake.checks.script(for: "+15625550102", FakeResponse(status: 400, json: ["code": 21211, "message": "The 'To' number is not a valid phone number.", "status": 400]))
                #expect(await twilio.send([message(4, .sms, to: "+15625550102")]) == [.failed("twilio answered 400: twilio 21211: The 'To' number is not a valid phone number.", retryable: false)])
                fake.checks.script(for: "+15625550102", FakeResponse(status: 503))
                guard case .failed(_, true) = await twilio.send([message(5, .sms, to: "+15625550102")]).first else { Issue.record("a 503 is retried"); return }

                // Wrong credentials: retried (the operator may be fixing them), and said loudly.
                let wrong = try TwilioSMS(.init(accountSID: fake.accountSID, authToken: "not-the-token", from: "+15005550006", baseURL: fake.server.baseURL),
                                          http: f.http, logger: f.logs.logger("twilio"))
                guard case .failed(let why, true) = await wrong.send([message(6, .sms, to: "+15625550102")]).first else { Issue.record("401 retried"); return }
                #expect(why.contains("401"))
                #expect(f.logs.dump().contains("twilio refused the account's credentials"))

                await fake.server.stop()
                guard case .failed(let down, true) = await twilio.send([message(7, .sms, to: "+15625550102")]).first else { Issue.record("unreachable is retried"); return }
                #expect(down.contains("unreachable"))
                #expect(!f.logs.dump().contains(fake.authToken), "the auth token is never logged")
                #expect(throws: ProviderConfigError.self) { try TwilioSMS(.init(accountSID: "nope", authToken: "x", from: "+1"), http: f.http, logger: f.logs.logger("t")) }
            }
        }

        @Test func webhook_sendsJSONWithTheIdempotencyKey_andHonoursRetryAfter() async throws {
            try await ProviderFixture.with { f in
                let fake = try await FakeWebhook.start(ca: f.ca)
                let hook = try WebhookSMS(.init(url: fake.url, bearerToken: fake.bearerToken), http: f.http)
                #expect(await hook.send([message(1, .sms, to: "+15625550102")]) == [.delivered(reference: "hook-frienso-delivery-1")])
                let request = try #require(fake.server.requests.first)
                #expect(request.header("idempotency-key") == "frienso-delivery-1" && request.json?["urgent"] as? Bool == true)
                #expect(fake.checks.problems.isEmpty, "\(fake.checks.problems)")
                fake.checks.script(for: "+15625550102", FakeResponse(status: 503, headers: [("Retry-After", "2")]))
                guard case .retryAfter(_, .seconds(2)) = await hook.send([message(2, .sms, to: "+15625550102")]).first else { Issue.record("503 + Retry-After"); return }
                fake.checks.script(for: "+15625550102", FakeResponse(status: 422, json: ["error": "unknown destination"]))
                guard case .failed(let why, false) = await hook.send([message(3, .sms, to: "+15625550102")]).first else { Issue.record("422 is final"); return }
                #expect(why.contains("unknown destination"))
                await fake.server.stop()
            }
        }

        @Test func fcm_exchangesOneAccessTokenForManySends_renewsItOn401_andAnUnregisteredTokenIsDead() async throws {
            try await ProviderFixture.with { f in
                let fake = try await FakeFCM.start(ca: f.ca, keyDirectory: f.temp.path)
                let fcm = try f.fcm(fake)
                let batch = (1...5).map { message(UInt64($0), .push, to: "android-token-\($0)", platform: .android) }
                let results = await fcm.send(batch)
                #expect(results.allSatisfy { if case .delivered(let name) = $0 { name.hasPrefix("projects/frienso-test/messages/") } else { false } }, "\(results)")
                #expect(fake.exchanges == 1, "one OAuth exchange for five concurrent sends")
                #expect(fake.checks.problems.isEmpty, "\(fake.checks.problems)")
                let sent = try #require(fake.server.requests.last { $0.path.hasSuffix("messages:send") }?.json?["message"] as? [String: Any])
                #expect((sent["android"] as? [String: Any])?["priority"] as? String == "HIGH", "helpNow goes at high priority")

                fake.checks.script(for: "android-token-9", FakeFCM.unregistered())
                guard case .deadAddress(let why) = await fcm.send([message(9, .push, to: "android-token-9", platform: .android)]).first else {
                    Issue.record("UNREGISTERED is a dead token"); return
                }
                #expect(why.contains("UNREGISTERED"))
                fake.checks.script(for: "android-token-1", FakeFCM.quotaExceeded(retryAfter: 3))
                guard case .retryAfter(_, .seconds(3)) = await fcm.send([message(10, .push, to: "android-token-1", platform: .android)]).first else {
                    Issue.record("QUOTA_EXCEEDED waits for Retry-After"); return
                }
                // Google stops honouring the access token: 401, the token is dropped, the next send exchanges again.
                fake.revokeTokens()
                guard case .failed(_, true) = await fcm.send([message(11, .push, to: "android-token-1", platform: .android)]).first else {
                    Issue.record("401 is retried"); return
                }
                guard case .delivered = await fcm.send([message(12, .push, to: "android-token-1", platform: .android)]).first else {
                    Issue.record("a new access token is fetched"); return
                }
                #expect(fake.exchanges == 2 && fake.checks.problems.isEmpty, "\(fake.checks.problems)")
                #expect(!f.logs.dump().contains("ya29.") && !f.logs.dump().contains("PRIVATE KEY"), "neither the access token nor the key is logged")
                await fake.server.stop()
            }
        }

        @Test func apns_speaksHTTP2_withOneES256ProviderToken_priority10ForHelpNow_andDeadTokensAreDead() async throws {
            try await ProviderFixture.with { f in
                let fake = try await FakeAPNs.start(ca: f.ca, keyDirectory: f.temp.path)
                let apns = try f.apns(fake)
                let device = String(repeating: "ab", count: 32)
                let results = await apns.send([message(1, .push, to: device, platform: .ios),
                                               message(2, .push, to: device, source: "poke:4", platform: .ios)])
                #expect(fake.checks.problems.isEmpty, "\(fake.checks.problems)")
                #expect(results == [.delivered(reference: "00000000-0000-4000-8000-000000000001"), .delivered(reference: "00000000-0000-4000-8000-000000000002")])
                #expect(fake.server.requests.allSatisfy { $0.version == "HTTP/2" })
                #expect(fake.priorities(of: device).sorted() == ["10", "5"], "helpNow at 10, a poke at 5")
                #expect(fake.providerTokens == 1, "one JWT for both")

                fake.checks.script(for: device, FakeAPNs.unregistered())
                guard case .deadAddress = await apns.send([message(3, .push, to: device, platform: .ios)]).first else { Issue.record("410 is a dead token"); return }
                fake.checks.script(for: device, FakeAPNs.expiredProviderToken())
                guard case .failed(_, true) = await apns.send([message(4, .push, to: device, platform: .ios)]).first else { Issue.record("retried"); return }
                guard case .delivered = await apns.send([message(5, .push, to: device, platform: .ios)]).first else { Issue.record("delivered"); return }
                #expect(fake.providerTokens == 2, "an expired provider token is made again")

                // The server is HTTP/2 only, as APNs: a client offering only HTTP/1.1 is refused.
                _ = try? await HTTP.send("POST", "\(fake.server.baseURL)/3/device/\(device)", body: nil, trusting: f.ca.caFile, http1Only: true)
                #expect(fake.server.refusedHandshakes.load(ordering: .relaxed) >= 1)
                await fake.server.stop()
            }
        }

        @Test(arguments: Engine.allCases) func helpNow_throughTwilioFCMAndAPNs_oneSMSAndOnePushPerDevice_a429DeliversOnce_andADeadTokenIsUnregistered(engine: Engine) async throws {
            try await ProviderFixture.with { f in
                let twilio = try await FakeTwilio.start(ca: f.ca)
                let fcmServer = try await FakeFCM.start(ca: f.ca, keyDirectory: f.temp.path)
                let apnsServer = try await FakeAPNs.start(ca: f.ca, keyDirectory: f.temp.path)
                let iphone = String(repeating: "cd", count: 32)
                // Ben's SMS is refused once with Retry-After: 1; Cy's Android token is dead.
                twilio.checks.script(for: "+15625550102", FakeTwilio.tooManyRequests(retryAfter: 1))
                fcmServer.checks.script(for: "cy-android-token-1", FakeFCM.unregistered())
                let push = PushRouter(fcm: try f.fcm(fcmServer), apns: try f.apns(apnsServer))
                try await withAlerts(engine: engine, peers: HelpNowTests.anasCircle(), sms: try f.twilio(twilio), push: push) { h in
                    try await h.device(2, "ben-android-token-1")
                    _ = try await h.call(2, API.registerDevice, AlertsV1.RegisterDeviceRequest(token: iphone, platform: .ios, appVersion: "1.0"))
                    try await h.device(3, "cy-android-token-1")
                    _ = try await h.call(1, API.raiseHelpNow, AlertsV1.RaiseHelpNowRequest(message: "followed on 5th street"), key: "raise-1")
                    try await h.drained()

                    for fake in [twilio.checks, fcmServer.checks, apnsServer.checks] { #expect(fake.problems.isEmpty, "\(fake.problems)") }
                    #expect(twilio.checks.accepted.map(\.address).sorted() == ["+15625550102", "+15625550103", "+15625550199"],
                            "one SMS each, the 429'd one included, none twice")
                    #expect(fcmServer.checks.accepted.map(\.address) == ["ben-android-token-1"])
                    #expect(apnsServer.checks.accepted.map(\.address) == [iphone] && apnsServer.priorities(of: iphone) == ["10"])

                    // The outbox: the provider, its message id, every attempt.
                    let listed = try await h.operatorCall(API.listOutbox, AlertsV1.ListOutboxRequest(operatorKey: "operator-secret"))
                    let bensSMS = try #require(listed.deliveries.first { $0.channel == .sms && $0.recipientUserId == 2 })
                    #expect(bensSMS.status == .delivered && bensSMS.provider == "twilio" && bensSMS.reference.hasPrefix("SM"))
                    #expect(bensSMS.attemptLog.map(\.outcome) == [.retry, .delivered])
                    #expect(bensSMS.attemptLog.first?.retryAfterMs == 1_000 && bensSMS.attemptLog.last?.reference == bensSMS.reference)
                    let delivered = bensSMS.attemptLog.last!, retried = bensSMS.attemptLog.first!
                    #expect(delivered.startedAtMs - retried.finishedAtMs >= 1_000, "not before Retry-After")
                    let iosPush = try #require(listed.deliveries.first { $0.provider == "apns" })
                    #expect(iosPush.status == .delivered && iosPush.reference.hasPrefix("00000000-0000-4000-8000-"))
                    let cysPush = try #require(listed.deliveries.first { $0.channel == .push && $0.recipientUserId == 3 })
                    #expect(cysPush.status == .failed && cysPush.provider == "fcm" && cysPush.attemptLog.map(\.outcome) == [.deadAddress])
                    let cysDevices = try await h.call(3, API.listDevices, AlertsV1.ListDevicesRequest())
                    #expect(cysDevices.devices.isEmpty, "the dead token was unregistered")
                    #expect(!listed.deliveries.contains { $0.address.contains("+1562555") }, "numbers shortened in the listing")
                }
                for server in [twilio.server, fcmServer.server, apnsServer.server] { await server.stop() }
            }
        }

        @Test(arguments: Engine.allCases) func aSendCutShort_isLoggedAsInterrupted_andRetriedWithTheSameKey(engine: Engine) async throws {
            try await ProviderFixture.with { f in
                try await withStorage(engine) { storage in
                    let fake = try await FakeWebhook.start(ca: f.ca)
                    // First life: the webhook takes the three SMS and alerts dies before recording its answers.
                    let peers = HelpNowTests.anasCircle()
                    try await withAlerts(storage: storage, peers: peers, worker: false) { h in
                        _ = try await h.call(1, API.raiseHelpNow, AlertsV1.RaiseHelpNowRequest(message: "help"), key: "raise-1")
                        let hanging = SendsThenHangs(try WebhookSMS(.init(url: fake.url, bearerToken: fake.bearerToken), http: f.http))
                        let (crashed, crashedStorage) = try await anotherAlerts(on: storage, peers: peers, sms: hanging, push: hanging,
                                                                                logger: h.logs.logger("crashing"))
                        let pass = Task { try await crashed.deliverDue() }
                        try await eventually("the three SMS handed over") { hanging.sent.load(ordering: .relaxed) == 3 }
                        pass.cancel()
                        await #expect(throws: CancellationError.self) { try await pass.value }
                        await crashedStorage.close()
                    }
                    // Second life: the same webhook answers.
                    try await withAlerts(storage: storage, peers: peers,
                                         sms: try WebhookSMS(.init(url: fake.url, bearerToken: fake.bearerToken), http: f.http)) { h in
                        try await h.drained()
                        let listed = try await h.operatorCall(API.listOutbox, AlertsV1.ListOutboxRequest(operatorKey: "operator-secret"))
                        let sms = listed.deliveries.filter { $0.channel == .sms }
                        #expect(sms.count == 3 && sms.allSatisfy { $0.status == .delivered && $0.attemptLog.map(\.outcome) == [.interrupted, .delivered] })
                    }
                    // Every copy carried its delivery's key: a gateway that keeps keys sends each once.
                    let keys = fake.server.requests.compactMap { $0.header("idempotency-key") }
                    #expect(keys.count == 6 && Set(keys).count == 3)
                    await fake.server.stop()
                }
            }
        }
    }
}
