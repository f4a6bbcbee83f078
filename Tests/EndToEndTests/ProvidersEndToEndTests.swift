import Foundation
import FriensoClient
import FriensoProto
import FriensoTesting
import ServiceKit
import Testing
import Wire

/// helpNow on the launched deployment with alerts configured for Twilio, FCM and APNs, each
/// pointed at a local server that checks every request as the provider documents it (TLS from
/// a test CA the deployment is told to trust). alerts is killed with -9 while deliveries wait
/// on a provider's Retry-After: every member still gets exactly one SMS and one push per live
/// device, and a dead token is unregistered.
@Suite("end to end: real delivery providers", .serialized, .timeLimit(.minutes(4)))
struct ProvidersEndToEndTests {
    static func secret(_ text: String, _ path: String) throws {
        try text.write(toFile: path, atomically: true, encoding: .utf8)
        chmod(path, 0o600)
    }

    @Test func helpNow_reachesEveryMember_throughTwilioFCMAndAPNs_onceEach_acrossKill9OfAlerts() async throws {
        let procs = try ProcessHarness()
        defer { procs.shutdown() }
        try await Self.withFakes(procs) { ca, twilio, fcm, apns in
            try await run(procs, ca: ca, twilio: twilio, fcm: fcm, apns: apns)
        }
    }

    /// Alerts configured for the three fakes, their credentials in files (written here).
    static func alertsSection(_ dir: String, ca: TestCA, twilio: FakeTwilio, fcm: FakeFCM, apns: FakeAPNs) -> FriensoConfig.AlertsSection {
        try? secret(twilio.authToken, "\(dir)/twilio-token")
        try? secret((try? fcm.serviceAccountJSON()) ?? "", "\(dir)/fcm-service-account.json")
        try? secret(apns.keyPEM, "\(dir)/apns.p8")
        var alerts = FriensoConfig.AlertsSection()
        var sms = FriensoConfig.SMSSection()
        sms.provider = "twilio"
        sms.accountSid = twilio.accountSID
        sms.authTokenFile = "\(dir)/twilio-token"
        sms.from = "+15005550006"
        sms.url = twilio.server.baseURL
        var push = FriensoConfig.PushSection()
        push.fcm = FriensoConfig.FCMSection()
        push.fcm?.serviceAccountFile = "\(dir)/fcm-service-account.json"
        push.fcm?.url = fcm.server.baseURL
        push.apns = FriensoConfig.APNsSection()
        push.apns?.keyFile = "\(dir)/apns.p8"
        push.apns?.keyId = apns.keyID
        push.apns?.teamId = apns.teamID
        push.apns?.topic = apns.topic
        push.apns?.url = apns.server.baseURL
        alerts.sms = sms
        alerts.push = push
        alerts.providerCAFile = ca.caFile
        return alerts
    }

    /// Starts the three fakes, runs `body`, and stops them whatever happened.
    static func withFakes(_ procs: ProcessHarness, _ body: (TestCA, FakeTwilio, FakeFCM, FakeAPNs) async throws -> Void) async throws {
        let dir = procs.workDirectory
        let ca = try await TestCA.make(in: "\(dir)/ca")
        let twilio = try await FakeTwilio.start(ca: ca)
        let fcm = try await FakeFCM.start(ca: ca, keyDirectory: dir)
        let apns = try await FakeAPNs.start(ca: ca, keyDirectory: dir)
        do { try await body(ca, twilio, fcm, apns) } catch {
            for server in [twilio.server, fcm.server, apns.server] { await server.stop() }
            throw error
        }
        for server in [twilio.server, fcm.server, apns.server] { await server.stop() }
    }

    @Test func deliveriesTest_sendsOneMessageThroughTheConfiguredProvider_andSaysWhatItAnswered() async throws {
        let procs = try ProcessHarness()
        defer { procs.shutdown() }
        let dir = procs.workDirectory
        try await Self.withFakes(procs) { ca, twilio, fcm, apns in
            var config = FriensoConfig()
            config.alerts = Self.alertsSection(dir, ca: ca, twilio: twilio, fcm: fcm, apns: apns)
            try config.write(to: "\(dir)/frienso.json")
            let launch = Repository.binaries.appendingPathComponent("frienso-launch").path
            func test(_ args: String...) async throws -> (status: Int32, output: String) {
                let ran = try await ProcessHarness.run(launch, ["deliveries", "test", "--config", "\(dir)/frienso.json"] + args)
                return (ran.status, ran.output)
            }
            let sms = try await test("--to", "+15625550177")
            #expect(sms.status == 0 && sms.output.contains("via twilio: delivered (provider's id SM"), "\(sms.output)")
            #expect(twilio.checks.accepted.first?.text.contains("Frienso test message") == true)
            let iphone = String(repeating: "f0", count: 32)
            let ios = try await test("--to", iphone, "--platform", "ios")
            #expect(ios.status == 0 && ios.output.contains("via apns: delivered"), "\(ios.output)")
            fcm.checks.script(for: "old-android-token", FakeFCM.unregistered())
            let dead = try await test("--to", "old-android-token")
            #expect(dead.status == 1 && dead.output.contains("via fcm: the token is dead") && dead.output.contains("UNREGISTERED"), "\(dead.output)")
            for checks in [twilio.checks, fcm.checks, apns.checks] { #expect(checks.problems.isEmpty, "\(checks.problems)") }
            #expect(!(sms.output + ios.output + dead.output).contains(twilio.authToken))

            // Without providers: said plainly, exit 2.
            try FriensoConfig().write(to: "\(dir)/plain.json")
            let plain = try await ProcessHarness.run(launch, ["deliveries", "test", "--config", "\(dir)/plain.json", "--to", "+15625550177"])
            #expect(plain.status == 2 && plain.output.contains("alerts.sms is not configured"), "\(plain.output)")
            let noEmail = try await ProcessHarness.run(launch, ["deliveries", "test", "--config", "\(dir)/plain.json", "--to", "ana@example.org"])
            #expect(noEmail.status == 2 && noEmail.output.contains("accounts.email is not configured"), "\(noEmail.output)")
        }
    }

    func run(_ procs: ProcessHarness, ca: TestCA, twilio: FakeTwilio, fcm: FakeFCM, apns: FakeAPNs) async throws {
        let dir = procs.workDirectory
        let stack = try await LaunchedStack(procs, environment: ["FRIENSO_OPERATOR_KEY": "e2e-operator"]) { config in
            config.alerts = Self.alertsSection(dir, ca: ca, twilio: twilio, fcm: fcm, apns: apns)
        }
        defer { stack.shutdown() }
        try await stack.showingLogsOnFailure {
            let ana = try await makeActor(stack, "ana", number: 900)
            let ben = try await makeActor(stack, "ben", number: 901)
            let cy = try await makeActor(stack, "cyd", number: 902)
            for member in [ben, cy] {
                try await befriend(ana, member)
                try await addToCircle(ana, member)
            }
            let iphone = String(repeating: "e1", count: 32)
            for (who, token, platform) in [(ben, "ben-android-1", AlertsV1.Platform.android), (ben, iphone, .ios), (cy, "cy-android-dead", .android)] {
                _ = try await who.client.call(AlertsV1.AlertsService.registerDevice, AlertsV1.RegisterDeviceRequest(
                    token: token, platform: platform, appVersion: "e2e"), mutation: true)
            }
            let (benPhone, cyPhone) = ("+15625551901", "+15625551902")
            // Each member's first SMS attempt is refused for 2 s (Ben's with Twilio's 429, Cy's with a 503); Cy's phone token is dead.
            twilio.checks.script(for: benPhone, FakeTwilio.tooManyRequests(retryAfter: 2))
            twilio.checks.script(for: cyPhone, FakeResponse(status: 503, headers: [("Retry-After", "2")],
                                                            json: ["code": 20503, "message": "Service unavailable", "status": 503]))
            fcm.checks.script(for: "cy-android-dead", FakeFCM.unregistered())

            _ = try await ana.client.call(AlertsV1.AlertsService.raiseHelpNow, AlertsV1.RaiseHelpNowRequest(message: "car broke down"), mutation: true)
            // The first pass is recorded (pushes out, SMS waiting on Retry-After): then kill -9.
            let operatorClient = stack.client()
            defer { Task { await operatorClient.close() } }
            @Sendable func outbox() async throws -> [AlertsV1.Delivery] {
                try await operatorClient.call(AlertsV1.AlertsService.listOutbox, AlertsV1.ListOutboxRequest(operatorKey: "e2e-operator", limit: 500)).deliveries
                    .filter { $0.source.hasPrefix("help_now:") }
            }
            try await eventually("the SMS wait on Retry-After", timeout: .seconds(20)) {
                let sms = try await outbox().filter { $0.channel == .sms }
                return sms.count == 2 && sms.allSatisfy { $0.status == .pending && $0.attempts == 1 }
            }
            try await stack.kill9AndAwaitRestart("alerts")
            try await eventually("every delivery settled after the restart", timeout: .seconds(30)) {
                try await outbox().allSatisfy { $0.status != .pending }
            }

            for checks in [twilio.checks, fcm.checks, apns.checks] { #expect(checks.problems.isEmpty, "\(checks.problems)") }
            #expect(twilio.checks.accepted.map(\.address).sorted() == [benPhone, cyPhone], "one SMS each: \(twilio.checks.accepted)")
            #expect(twilio.checks.accepted.allSatisfy { $0.text.contains("car broke down") })
            #expect(fcm.checks.accepted.map(\.address) == ["ben-android-1"], "one push to Ben's Android phone, none to the dead token")
            #expect(apns.checks.accepted.map(\.address) == [iphone] && apns.priorities(of: iphone) == ["10"], "one push to Ben's iPhone, at priority 10")
            let settled = try await outbox()
            #expect(settled.filter { $0.status == .delivered }.count == 4, "\(settled)")
            let dead = try #require(settled.first { $0.recipientUserId == cy.id && $0.channel == .push })
            #expect(dead.status == .failed && dead.attemptLog.map(\.outcome) == [.deadAddress], "\(dead)\n\(settled)\n\(stack.logs())")
            let cysDevices = try await cy.client.call(AlertsV1.AlertsService.listDevices, AlertsV1.ListDevicesRequest())
            #expect(cysDevices.devices.isEmpty, "the dead token is unregistered")

            // The operator's view through the CLI: provider, the provider's id, each attempt.
            let listed = try await stack.cli("operator").run(["outbox", "--operator-key", "e2e-operator", "--status", "delivered"])
            #expect(listed.output.contains("via twilio") && listed.output.contains("id SM") && listed.output.contains("via apns")
                    && listed.output.contains("attempt 1") && listed.output.contains("retry after 2 s"), "\(listed.output)")
            let log = try String(contentsOfFile: "\(stack.run)/logs/alerts.log", encoding: .utf8)
            #expect(!log.contains(twilio.authToken) && !log.contains("PRIVATE KEY"), "no credential in alerts' log")
        }
    }
}
