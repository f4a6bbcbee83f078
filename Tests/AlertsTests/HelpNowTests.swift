@testable import Alerts
import Foundation
import FriensoProto
import FriensoTesting
import GRDB
import Places
import Testing
import Wire

typealias API = AlertsV1.AlertsService

extension AlertsTestGroup {
    @Suite("alerts: helpNow", .serialized, .timeLimit(.minutes(2)))
    struct HelpNowTests {
        /// Ana (1) has Ben (2, two phones registered), Cy (3, no device) and an invited number in her circle.
        static func anasCircle() -> FakePeers {
            let peers = FakePeers()
            peers.state.withLock { s in
                s.circles[1] = [.user(2), .user(3), .phone("+15625550199")]
                s.phones = [1: "+15625550101", 2: "+15625550102", 3: "+15625550103"]
                s.locations[1] = AlertsV1.AlertLocation(known: true, latitude: 33.7838, longitude: -118.1141, accuracyM: 8, fixTimeMs: 1, placeName: "Library")
            }
            return peers
        }

        @Test(arguments: Engine.allCases) func helpNow_reachesTheWholeCircle_byPushAndSMS_withoutAnyoneAccepting(engine: Engine) async throws {
            try await withAlerts(engine: engine, peers: Self.anasCircle()) { h in
                try await h.device(2, "ben-phone-token-1")
                try await h.device(2, "ben-tablet-token-2")
                let reply = try await h.call(1, API.raiseHelpNow, AlertsV1.RaiseHelpNowRequest(message: "followed on 5th street"), key: "raise-1")
                #expect(reply.notified == 3)
                #expect(!reply.nobodyNotified && !reply.alreadyActive)
                let alert = try #require(reply.alert)
                #expect(alert.state == .active && alert.message == "followed on 5th street")
                #expect(alert.location?.placeName == "Library" && alert.location?.known == true)
                #expect(alert.emergency?.number == "911", "no campus police configured: 911")
                #expect(alert.recipients.map { $0.person?.userId ?? 0 } == [2, 3, 0])
                #expect(alert.recipients.allSatisfy { $0.answer == .pending })

                try await h.drained()
                let sent = try await h.sent()
                #expect(Set(sent.filter { $0.channel == AlertsV1.Channel.push.rawValue }.map(\.address)) == ["ben-phone-token-1", "ben-tablet-token-2"])
                #expect(Set(sent.filter { $0.channel == AlertsV1.Channel.sms.rawValue }.map(\.address)) == ["+15625550102", "+15625550103", "+15625550199"])
                #expect(sent.allSatisfy { $0.body.contains("needs help") && $0.body.contains("followed on 5th street") && $0.body.contains("Library") })
                let skipped = try await h.outbox().filter { $0.status == .skipped }
                #expect(skipped.count == 1 && skipped.first?.recipientUserId == 3 && skipped.first?.lastError == "no registered device",
                        "Cy has no device: recorded as skipped, not left out")
                // Location grants to both users, until resolved; live events to both.
                let grants = h.recorder.grants()
                #expect(Set(grants.map(\.viewerId)) == [2, 3] && grants.allSatisfy { $0.subjectId == 1 && $0.reason == "help_now" })
                #expect(h.recorder.events(to: 2).first?.kind == .helpNow)
                #expect(h.recorder.events(to: 3).first?.location?.placeName == "Library")

                // The initiator's status shows each member's deliveries.
                let status = try await h.call(1, API.getHelpNow, AlertsV1.GetHelpNowRequest())
                let ben = try #require(status.mine?.recipients.first)
                var delivered = 0
                for delivery in ben.deliveries where delivery.status == .delivered { delivered += 1 }
                #expect(delivered == 3) // two pushes and an SMS
            }
        }

        @Test(arguments: Engine.allCases) func aRetriedRaise_sendsOnce_evenAfterARestart_andASecondRaiseReturnsTheActiveOne(engine: Engine) async throws {
            try await withStorage(engine) { storage in
                let peers = Self.anasCircle()
                let first = try await withAlerts(storage: storage, peers: peers) { h in
                    let a = try await h.call(1, API.raiseHelpNow, AlertsV1.RaiseHelpNowRequest(message: "help"), key: "same-key")
                    let b = try await h.call(1, API.raiseHelpNow, AlertsV1.RaiseHelpNowRequest(message: "help"), key: "same-key")
                    #expect(a.alert?.alertId == b.alert?.alertId)
                    let other = try await h.call(1, API.raiseHelpNow, AlertsV1.RaiseHelpNowRequest(message: "HELP!"), key: "another-key")
                    #expect(other.alreadyActive && other.alert?.alertId == a.alert?.alertId)
                    try await h.drained()
                    #expect(try await h.sent().count == 3, "three SMS (no devices), once")
                    return a.alert?.alertId ?? 0
                }
                try await withAlerts(storage: storage, peers: peers) { h in
                    let again = try await h.call(1, API.raiseHelpNow, AlertsV1.RaiseHelpNowRequest(message: "help"), key: "same-key")
                    #expect(again.alert?.alertId == first)
                    try await h.drained()
                    #expect(try await h.sent().count == 3)
                    #expect(try await h.outbox().count == 5, "3 SMS + 2 skipped pushes, nothing queued twice")
                }
            }
        }

        /// Beneath the reply cache (a reply pruned or never saved): the store's one read finds a
        /// retry's alert by its key even after it was resolved and another became active, and
        /// otherwise the active alert; the view shows the deliveries read with the alert.
        @Test(arguments: Engine.allCases) func aRaiseMeets_itsRetryByKey_beforeTheActiveAlert(engine: Engine) async throws {
            try await withAlerts(engine: engine, peers: Self.anasCircle(), worker: false) { h in
                let log = h.logs.logger("test")
                let first = try await h.service.raise(for: 1, message: "help", key: "k1", logger: log)
                #expect(!first.alreadyActive)
                _ = try await h.call(1, API.resolveHelpNow, AlertsV1.ResolveHelpNowRequest(alertId: first.alert.id))
                let second = try await h.service.raise(for: 1, message: "again", key: "k2", logger: log)
                #expect(second.alert.id != first.alert.id && !second.alreadyActive)

                let retried = try await h.service.raise(for: 1, message: "help", key: "k1", logger: log)
                #expect(retried.alert.id == first.alert.id && !retried.alreadyActive && retried.alert.state == .resolved)
                let other = try await h.service.raise(for: 1, message: "HELP", key: "k3", logger: log)
                #expect(other.alert.id == second.alert.id && other.alreadyActive)
                let unkeyed = try await h.service.raise(for: 1, message: "HELP", key: "", logger: log)
                #expect(unkeyed.alert.id == second.alert.id && unkeyed.alreadyActive)

                // Queued with the alert, read with it, by recipient: a push (no device: skipped) and an SMS to each user, an SMS to the number.
                let view = try await h.service.view(retried.alert)
                #expect(view.recipients.map { $0.deliveries.count } == [2, 2, 1])
            }
        }

        /// A raise answers with its deliveries as it queued them, without reading them back
        /// (issue 16, item 77): the same summaries the store reads for the alert afterwards, for
        /// every kind of row (a push per device, a push skipped for want of one, an SMS to a
        /// member and to a number outside the app).
        @Test(arguments: Engine.allCases) func aRaisesDeliveries_areWhatTheStoreReadsBack(engine: Engine) async throws {
            try await withAlerts(engine: engine, peers: Self.anasCircle(), worker: false) { h in
                try await h.device(2, "ben-phone-token-1")
                try await h.device(2, "ben-tablet-token-2")
                let raised = try await h.service.raise(for: 1, message: "help", key: "k1", logger: h.logs.logger("test"))
                let read = try #require(try await h.service.store.alert(id: raised.alert.id))
                #expect(raised.alert.deliveries == read.deliveries)
                #expect(raised.alert.deliveries.keys.sorted() == ["phone:+15625550199", "user:2", "user:3"])
                #expect(raised.alert.deliveries["user:2"]?.filter { $0.channel == .push }.map(\.status) == [.pending, .pending], "a push per device")
                #expect(raised.alert.deliveries["user:3"]?.filter { $0.channel == .push }.map(\.status) == [.skipped], "no device")
                #expect(raised.alert.deliveries["phone:+15625550199"]?.map(\.channel) == [.sms])
                #expect(raised.alert.deliveries.values.joined().allSatisfy { $0.attempts == 0 })
            }
        }

        @Test(arguments: Engine.allCases) func anEmptyCircle_isRecorded_andSaysNobodyWasNotified(engine: Engine) async throws {
            var config = testConfig()
            config.campusPoliceNumber = "+15625550100"
            let peers = FakePeers()
            peers.state.withLock { $0.locations[9] = AlertsV1.AlertLocation(known: true, latitude: 33.78, longitude: -118.11, placeName: "Library") }
            try await withAlerts(engine: engine, peers: peers, config: config) { h in
                let reply = try await h.call(9, API.raiseHelpNow, AlertsV1.RaiseHelpNowRequest())
                #expect(reply.nobodyNotified && reply.notified == 0)
                #expect(reply.alert?.state == .active)
                #expect(reply.alert?.emergency?.number == "+15625550100" && reply.alert?.emergency?.label == "Campus police",
                        "at a campus place with campus police configured")
                let called = try await h.call(9, API.reportEmergencyCall, AlertsV1.ReportEmergencyCallRequest(dialed: true))
                #expect(called.emergency?.reported == true && called.emergency?.dialed == true)
                #expect(try await h.outbox().isEmpty)
            }
        }

        @Test(arguments: Engine.allCases) func alertsGoOut_whenGeoAndAccountsAreDown_andSMSWaitsForThePhoneNumbers(engine: Engine) async throws {
            let peers = Self.anasCircle()
            peers.state.withLock { $0.down = ["geo", "accounts"] }
            try await withAlerts(engine: engine, peers: peers) { h in
                let reply = try await h.call(1, API.raiseHelpNow, AlertsV1.RaiseHelpNowRequest(message: "help"))
                #expect(reply.notified == 3)
                #expect(reply.alert?.location?.known == false)
                // The invited number needs no lookup; the members' SMS wait (without spending attempts).
                try await eventually("the invited number's SMS") { try await h.outbox().contains { $0.address == "+15625550199" && $0.status == .delivered } }
                let waiting = try await h.outbox().filter { $0.status == .pending }
                #expect(waiting.count == 2 && waiting.allSatisfy { $0.attempts == 0 })
                peers.state.withLock { $0.down = [] }
                try await h.drained()
                #expect(Set(try await h.sent().map(\.address)) == ["+15625550102", "+15625550103", "+15625550199"])
            }
        }

        @Test(arguments: Engine.allCases) func onlyTheInitiatorOrAnOperator_resolves_andTheCircleIsTold(engine: Engine) async throws {
            try await withAlerts(engine: engine, peers: Self.anasCircle()) { h in
                let raised = try await h.call(1, API.raiseHelpNow, AlertsV1.RaiseHelpNowRequest())
                let id = try #require(raised.alert?.alertId)
                await expectError(.permissionDenied, containing: "not yours") {
                    _ = try await h.call(2, API.resolveHelpNow, AlertsV1.ResolveHelpNowRequest(alertId: id))
                }
                await expectError(.permissionDenied) { _ = try await h.call(2, API.reportEmergencyCall, AlertsV1.ReportEmergencyCallRequest(alertId: id)) }
                await expectError(.permissionDenied, containing: "operator_key is wrong") {
                    _ = try await h.operatorCall(API.resolveHelpNow, AlertsV1.ResolveHelpNowRequest(alertId: id, operatorKey: "guess"))
                }
                await expectError(.notFound) { _ = try await h.call(1, API.resolveHelpNow, AlertsV1.ResolveHelpNowRequest(alertId: 999)) }
                await expectError(.unauthenticated) { _ = try await h.operatorCall(API.resolveHelpNow, AlertsV1.ResolveHelpNowRequest(alertId: id)) }
                let resolved = try await h.call(1, API.resolveHelpNow, AlertsV1.ResolveHelpNowRequest())
                #expect(resolved.alert?.state == .resolved && resolved.alert?.resolvedBy == "initiator")
                // Grants revoked (an expiry not in the future), the circle told.
                let revocations = h.recorder.grants().filter { $0.expiresAtMs <= WallClock.milliseconds() }
                #expect(Set(revocations.map(\.viewerId)) == [2, 3])
                #expect(h.recorder.events(to: 2).map(\.kind) == [.helpNow, .helpNowResolved])
                try await h.drained()
                #expect(try await h.sent().filter { $0.body.contains("is safe") }.count == 3)
                // Resolving again changes nothing; a new alert can be raised.
                #expect(try await h.call(1, API.resolveHelpNow, AlertsV1.ResolveHelpNowRequest(alertId: id)).alert?.resolvedAtMs == resolved.alert?.resolvedAtMs)
                let next = try await h.call(1, API.raiseHelpNow, AlertsV1.RaiseHelpNowRequest())
                #expect(!next.alreadyActive && next.alert?.alertId != id)
                let byOperator = try await h.operatorCall(API.resolveHelpNow,
                                                          AlertsV1.ResolveHelpNowRequest(alertId: next.alert?.alertId ?? 0, operatorKey: "operator-secret"))
                #expect(byOperator.alert?.resolvedBy == "operator")
            }
        }

        /// The phone's own fix, sent with the raise, is where the alert says the person is (not
        /// geo's last stored fix), named by geo's places (asked while alerts' copy of them has not
        /// loaded: no worker here); at a campus place the prompt suggests campus police. With geo
        /// down, the fix still goes, without a name.
        @Test(arguments: Engine.allCases) func aPhonesOwnFix_isTheAlertsLocation_namedByGeo(engine: Engine) async throws {
            let peers = Self.anasCircle()
            peers.state.withLock { $0.placeNames["33.776,-118.11"] = "Pyramid Arena" }
            var config = testConfig()
            config.campusPoliceNumber = "+15625550100"
            try await withAlerts(engine: engine, peers: peers, config: config, worker: false) { h in
                let taken = WallClock.milliseconds() - 4_000
                let fix = AlertsV1.DeviceFix(latitude: 33.776, longitude: -118.11, accuracyM: 6, deviceTimeMs: taken)
                let reply = try await h.call(1, API.raiseHelpNow, AlertsV1.RaiseHelpNowRequest(message: "lost", fix: fix))
                let location = try #require(reply.alert?.location)
                #expect(location == AlertsV1.AlertLocation(known: true, latitude: 33.776, longitude: -118.11, accuracyM: 6, fixTimeMs: taken,
                                                           placeName: "Pyramid Arena"), "the phone's fix, not geo's (Library)")
                #expect(reply.alert?.emergency?.number == "+15625550100", "at a campus place: campus police")
                #expect(peers.state.withLock { $0.locationLookups.map(\.phoneFix?.latitude) } == [33.776], "geo was asked to name the phone's point")
                let bodies = try await h.outbox().filter { $0.channel == .sms }.map(\.body)
                #expect(bodies.count == 3 && bodies.allSatisfy { $0.contains("Last location near Pyramid Arena (33.77600,-118.11000)") })
                #expect(h.recorder.events(to: 2).first?.location?.latitude == 33.776)
                _ = try await h.call(1, API.resolveHelpNow, AlertsV1.ResolveHelpNowRequest())

                peers.state.withLock { $0.down = ["geo"] }
                let unnamed = try await h.call(1, API.raiseHelpNow, AlertsV1.RaiseHelpNowRequest(fix: fix))
                #expect(unnamed.alert?.location == AlertsV1.AlertLocation(known: true, latitude: 33.776, longitude: -118.11, accuracyM: 6, fixTimeMs: taken),
                        "geo down: the phone's fix still goes, without a place name")
                #expect(unnamed.alert?.emergency?.number == "911", "no place name: the emergency number")
            }
        }

        /// With geo's places loaded (`PlaceBook`), a raise with the phone's own fix is named
        /// without asking geo, the campus police prompt too; a raise without a fix still asks geo
        /// for its latest; before the places load, geo names the fix.
        @Test(arguments: Engine.allCases) func withThePlacesLoaded_aPhonesFixIsNamed_withoutAskingGeo(engine: Engine) async throws {
            let peers = Self.anasCircle()
            peers.state.withLock { s in
                s.places = [PlaceRecord(id: 1, name: "Frienso State University", kind: .campus, lat: 33.78, lon: -118.113, radius: 0,
                                        ring: [(33.776, -118.118), (33.776, -118.108), (33.785, -118.108), (33.785, -118.118)]),
                            PlaceRecord(id: 2, name: "Student Union", kind: .venue, lat: 33.781, lon: -118.113, radius: 40, ring: []),
                            PlaceRecord(id: 3, name: "Engineering Hall", kind: .building, lat: 33.783, lon: -118.111, radius: 30, ring: [])]
                s.placeNames["33.7812,-118.1131"] = "Student Union (from geo)"
            }
            var config = testConfig()
            config.campusPoliceNumber = "+15625550100"
            try await withAlerts(engine: engine, peers: peers, config: config, worker: false) { h in
                let fix = AlertsV1.DeviceFix(latitude: 33.7812, longitude: -118.1131, accuracyM: 5, deviceTimeMs: WallClock.milliseconds())
                let unloaded = try await h.call(1, API.raiseHelpNow, AlertsV1.RaiseHelpNowRequest(fix: fix))
                #expect(unloaded.alert?.location?.placeName == "Student Union (from geo)", "not loaded yet: geo names it")
                _ = try await h.call(1, API.resolveHelpNow, AlertsV1.ResolveHelpNowRequest())

                #expect(try await h.service.loadPlaceBook(pageSize: 2) == 3)
                peers.state.withLock { $0.locationLookups = [] }
                let named = try await h.call(1, API.raiseHelpNow, AlertsV1.RaiseHelpNowRequest(fix: fix))
                #expect(named.alert?.location?.placeName == "Student Union" && named.alert?.emergency?.number == "+15625550100")
                _ = try await h.call(1, API.resolveHelpNow, AlertsV1.ResolveHelpNowRequest())
                // Far from every building and venue (on campus still: the outline names nothing).
                let far = AlertsV1.DeviceFix(latitude: 33.7770, longitude: -118.1170, accuracyM: 5, deviceTimeMs: WallClock.milliseconds())
                let unnamed = try await h.call(1, API.raiseHelpNow, AlertsV1.RaiseHelpNowRequest(fix: far))
                #expect(unnamed.alert?.location?.known == true && unnamed.alert?.location?.placeName == "")
                #expect(peers.state.withLock { $0.locationLookups }.isEmpty, "geo was not asked")
                _ = try await h.call(1, API.resolveHelpNow, AlertsV1.ResolveHelpNowRequest())
                // Without a fix: geo's latest, as before.
                let stored = try await h.call(1, API.raiseHelpNow, AlertsV1.RaiseHelpNowRequest())
                #expect(stored.alert?.location?.placeName == "Library")
                #expect(peers.state.withLock { $0.locationLookups.map(\.user) } == [1])
            }
        }

        /// A fix the phone sends is checked as geo checks a location update, and a bad one
        /// refuses the raise with the reason (nothing is sent: the phone raises again without it).
        @Test(arguments: Engine.allCases) func aBadFix_isRefused_withItsReason_andNothingIsSent(engine: Engine) async throws {
            try await withAlerts(engine: engine, peers: Self.anasCircle()) { h async throws in
                let now = WallClock.milliseconds()
                let cases: [(AlertsV1.DeviceFix, String)] = [
                    (AlertsV1.DeviceFix(latitude: 91, longitude: 0, accuracyM: 5, deviceTimeMs: now), "latitude must be -90..90"),
                    (AlertsV1.DeviceFix(latitude: 10, longitude: -180.5, accuracyM: 5, deviceTimeMs: now), "longitude -180..180"),
                    (AlertsV1.DeviceFix(latitude: .nan, longitude: 0, accuracyM: 5, deviceTimeMs: now), "finite"),
                    (AlertsV1.DeviceFix(latitude: 10, longitude: 10, accuracyM: -1, deviceTimeMs: now), "fix.accuracy_m"),
                    (AlertsV1.DeviceFix(latitude: 10, longitude: 10, accuracyM: .infinity, deviceTimeMs: now), "fix.accuracy_m"),
                    (AlertsV1.DeviceFix(latitude: 10, longitude: 10, accuracyM: 5), "fix.device_time_ms: required"),
                    (AlertsV1.DeviceFix(latitude: 10, longitude: 10, accuracyM: 5, deviceTimeMs: now + 600_000), "in the future"),
                ]
                for (fix, reason) in cases {
                    await expectError(.invalidArgument, containing: reason) {
                        _ = try await h.call(1, API.raiseHelpNow, AlertsV1.RaiseHelpNowRequest(fix: fix))
                    }
                }
                #expect(try await h.call(1, API.getHelpNow, AlertsV1.GetHelpNowRequest()).mine == nil)
                #expect(try await h.outbox().isEmpty)
            }
        }

        @Test(arguments: Engine.allCases) func badInputs_getStableErrors(engine: Engine) async throws {
            try await withAlerts(engine: engine) { h in
                await expectError(.unauthenticated) { _ = try await h.call(0, API.raiseHelpNow, AlertsV1.RaiseHelpNowRequest()) }
                await expectError(.invalidArgument, containing: "500") {
                    _ = try await h.call(1, API.raiseHelpNow, AlertsV1.RaiseHelpNowRequest(message: String(repeating: "x", count: 501)))
                }
                await expectError(.failedPrecondition) { _ = try await h.call(1, API.resolveHelpNow, AlertsV1.ResolveHelpNowRequest()) }
                await expectError(.failedPrecondition) { _ = try await h.call(1, API.reportEmergencyCall, AlertsV1.ReportEmergencyCallRequest()) }
                await expectError(.invalidArgument, containing: "token") {
                    _ = try await h.call(1, API.registerDevice, AlertsV1.RegisterDeviceRequest(token: "short", platform: .ios))
                }
                await expectError(.invalidArgument, containing: "platform") {
                    _ = try await h.call(1, API.registerDevice, AlertsV1.RegisterDeviceRequest(token: "long-enough-token"))
                }
                await expectError(.notFound) { _ = try await h.call(1, API.unregisterDevice, AlertsV1.UnregisterDeviceRequest(token: "nope-nope-nope")) }
                await expectError(.permissionDenied) { _ = try await h.operatorCall(API.listOutbox, AlertsV1.ListOutboxRequest()) }
                await expectError(.invalidArgument, containing: "limit") {
                    _ = try await h.operatorCall(API.listOutbox, AlertsV1.ListOutboxRequest(operatorKey: "operator-secret", limit: 501))
                }
                await expectError(.invalidArgument, containing: "kind") {
                    _ = try await h.call(1, API.respondInbox, AlertsV1.RespondInboxRequest(requestId: 1, action: .accept))
                }
                await expectError(.invalidArgument, containing: "action") {
                    _ = try await h.call(1, API.respondInbox, AlertsV1.RespondInboxRequest(kind: .watch, requestId: 1))
                }
                // A device token moves to whoever registers it last.
                try await h.device(1, "shared-token-123")
                try await h.device(2, "shared-token-123")
                #expect(try await h.call(1, API.listDevices, AlertsV1.ListDevicesRequest()).devices.isEmpty)
                #expect(try await h.call(2, API.listDevices, AlertsV1.ListDevicesRequest()).devices.map(\.token) == ["shared-token-123"])
            }
        }

        /// A person's devices are listed (and pushed to) in the order they were registered; two
        /// registered within one millisecond (alerts' clock stands still here) by token, alike
        /// on both engines.
        @Test(arguments: Engine.allCases) func devicesRegisteredInOneMillisecond_areListedByToken(engine: Engine) async throws {
            try await withAlerts(engine: engine, worker: false, now: { 1_790_000_000_000 }) { h in
                try await h.device(1, "zz-device-token-1")
                try await h.device(1, "aa-device-token-2")
                #expect(try await h.call(1, API.listDevices, AlertsV1.ListDevicesRequest()).devices.map(\.token) == ["aa-device-token-2", "zz-device-token-1"])
            }
        }
    }
}

@Suite("alerts: the helpNow plan (pure)")
struct HelpNowPlanTests {
    let numbers = HelpNowPlan.Numbers(emergency: "911", emergencyLabel: "Emergency services", campusPolice: "+15625550100", campusPoliceLabel: "Campus police")
    let circle: [CircleContact] = [.user(11), .phone("+15625550199"), .user(12)]

    @Test func everyoneInTheCircleIsReached_usersByPushAndSMS_invitedNumbersBySMS_andOnlyUsersMaySeeTheInitiator() {
        let plan = HelpNowPlan(initiator: 10, circle: circle, location: AlertsV1.AlertLocation(), numbers: numbers)
        #expect(plan.recipients == circle && plan.users == [11, 12])
        #expect(plan.grants == [11, 12].map { GrantRecord(subject: 10, viewer: $0, reason: "help_now", expiresMs: GrantRecord.untilResolved) })
        let deliveries = plan.deliveries(source: "help_now:1", text: "HELP")
        #expect(deliveries.map(\.recipient) == [.user(11), .phone("+15625550199"), .user(12)])
        #expect(deliveries.map(\.channels) == [[.push, .sms], [.sms], [.push, .sms]])
        #expect(deliveries.allSatisfy { $0.source == "help_now:1" && $0.body == "HELP" })
    }

    @Test func thePrompt_suggestsCampusPolice_onlyAtACampusPlace_andWhenTheDeploymentHasTheirNumber() {
        let atLibrary = AlertsV1.AlertLocation(known: true, latitude: 33.77, longitude: -118.11, placeName: "University Library")
        let offCampus = AlertsV1.AlertLocation(known: true, latitude: 34.0, longitude: -118.3)
        #expect(HelpNowPlan(initiator: 10, circle: circle, location: atLibrary, numbers: numbers).promptNumber == "+15625550100")
        #expect(HelpNowPlan(initiator: 10, circle: circle, location: offCampus, numbers: numbers).promptNumber == "911")
        #expect(HelpNowPlan(initiator: 10, circle: circle, location: AlertsV1.AlertLocation(), numbers: numbers).promptLabel == "Emergency services")
        var noPolice = numbers
        noPolice.campusPolice = ""
        #expect(HelpNowPlan(initiator: 10, circle: circle, location: atLibrary, numbers: noPolice).promptNumber == "911")
    }

    @Test func anEmptyCircle_reachesNobody_butThePromptStands() {
        let plan = HelpNowPlan(initiator: 10, circle: [], location: AlertsV1.AlertLocation(), numbers: numbers)
        #expect(plan.recipients.isEmpty && plan.grants.isEmpty && plan.deliveries(source: "s", text: "t").isEmpty)
        #expect(plan.promptNumber == "911")
    }
}

@Suite("alerts: the helpNow text (pure)")
struct HelpNowTextTests {
    @Test func theTextNamesWhoWhatAndWhere_withCoordinatesToFiveDecimals() {
        let ana = AlertsV1.Person(userId: 1, username: "ana", firstName: "Ana", lastName: "Diaz")
        let at = AlertsV1.AlertLocation(known: true, latitude: 33.7838, longitude: -118.1141, accuracyM: 8, fixTimeMs: 1, placeName: "Library")
        #expect(AlertsService.helpText(ana, "followed", at) == """
            HELP NOW: Ana Diaz (@ana) needs help: "followed". Last location near Library (33.78380,-118.11410) \
            https://www.openstreetmap.org/?mlat=33.78380&mlon=-118.11410
            """)
        var unnamed = at
        unnamed.placeName = ""
        #expect(AlertsService.helpText(nil, "", unnamed) == """
            HELP NOW: Someone needs help. Last location 33.78380,-118.11410 https://www.openstreetmap.org/?mlat=33.78380&mlon=-118.11410
            """)
        #expect(AlertsService.helpText(ana, "", AlertsV1.AlertLocation()) == "HELP NOW: Ana Diaz (@ana) needs help. Location unknown")
    }

    /// The coordinates are printed by C's formatter, as Foundation's `String(format: "%.5f")` printed them.
    @Test(arguments: [0.0, -0.0, 1e-6, -1e-6, 0.000005, 0.000015, 12.3456749, 12.345675, -33.86882, 51.500729, 89.999999, -90, 180, -179.999995,
                      0.1 + 0.2, 1.0 / 3.0, 1e20])
    func fiveDecimals_printsWhatPrintfPrints(value: Double) {
        #expect(AlertsService.fiveDecimals(value) == String(format: "%.5f", value))
    }
}
