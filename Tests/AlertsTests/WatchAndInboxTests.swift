@testable import Alerts
import Foundation
import FriensoProto
import FriensoTesting
import GRDB
import Testing
import Wire

extension AlertsTestGroup {
    @Suite("alerts: watchMe and the inbox", .serialized, .timeLimit(.minutes(2)))
    struct WatchAndInboxTests {
        /// Dee (10) has Eli (11), Fay (12) and Gus (13) in her circle; Hal (14) is not in it.
        static func deesCircle() -> FakePeers {
            let peers = FakePeers()
            peers.state.withLock { $0.circles[10] = [.user(11), .user(12), .user(13), .phone("+15625550177")] }
            return peers
        }

        @Test(arguments: Engine.allCases) func theInitiatorSees_whoWatches_whoDeclined_andWhoHasNotAnswered_andOnlyWatchersGetGrants(engine: Engine) async throws {
            try await withAlerts(engine: engine, peers: Self.deesCircle()) { h in
                let started = try await h.call(10, API.startWatch, AlertsV1.StartWatchRequest(durationSeconds: 1800, note: "walking home"))
                let session = try #require(started.session)
                #expect(session.watchers.map { $0.person?.userId ?? 0 } == [11, 12, 13], "users only: an invited number cannot watch")
                #expect(h.recorder.events(to: 11).first?.kind == .watchRequest)
                #expect(h.recorder.grants().isEmpty, "nobody sees Dee before accepting")
                // Each watcher has the request in their inbox.
                let inbox = try await h.call(11, API.listInbox, AlertsV1.ListInboxRequest())
                #expect(inbox.items.map(\.kind) == [.watch] && inbox.items.first?.requestId == session.sessionId)
                #expect(inbox.items.first?.text == "walking home")

                _ = try await h.call(11, API.respondInbox, AlertsV1.RespondInboxRequest(kind: .watch, requestId: session.sessionId, action: .accept))
                _ = try await h.call(12, API.respondInbox, AlertsV1.RespondInboxRequest(kind: .watch, requestId: session.sessionId, action: .reject))
                await expectError(.permissionDenied, containing: "not addressed to you") {
                    _ = try await h.call(14, API.respondInbox, AlertsV1.RespondInboxRequest(kind: .watch, requestId: session.sessionId, action: .accept))
                }
                await expectError(.notFound) {
                    _ = try await h.call(11, API.respondInbox, AlertsV1.RespondInboxRequest(kind: .watch, requestId: 999, action: .accept))
                }
                let status = try await h.call(10, API.getWatch, AlertsV1.GetWatchRequest())
                #expect(status.mine?.watchers.map(\.answer) == [.accepted, .declined, .pending])
                let grants = h.recorder.grants()
                #expect(grants.map(\.viewerId) == [11] && grants.first?.expiresAtMs == session.endsAtMs && grants.first?.reason == "watch")
                #expect(h.recorder.events(to: 10).map(\.answer) == [.accepted, .declined])
                // Answered requests leave the inbox; the watcher sees the session in their status.
                #expect(try await h.call(11, API.listInbox, AlertsV1.ListInboxRequest()).items.isEmpty)
                #expect(try await h.call(11, API.getWatch, AlertsV1.GetWatchRequest()).watching.first?.watchers.map(\.answer) == [.accepted])
                // Gus dismisses it: hidden from his inbox, still "not answered" for Dee.
                _ = try await h.call(13, API.respondInbox, AlertsV1.RespondInboxRequest(kind: .watch, requestId: session.sessionId, action: .dismiss))
                #expect(try await h.call(13, API.listInbox, AlertsV1.ListInboxRequest()).items.isEmpty)
                #expect(try await h.call(10, API.getWatch, AlertsV1.GetWatchRequest()).mine?.watchers.last?.answer == .pending)

                // Extend: grants follow; end: revoked, watchers told.
                let extended = try await h.call(10, API.extendWatch, AlertsV1.ExtendWatchRequest(extraSeconds: 600))
                #expect(extended.session?.endsAtMs == session.endsAtMs + 600_000)
                #expect(h.recorder.grants().last?.expiresAtMs == session.endsAtMs + 600_000)
                let hhmm = DateFormatter()
                hhmm.dateFormat = "HH:mm"
                hhmm.timeZone = TimeZone(identifier: "UTC")
                let until = hhmm.string(from: Date(timeIntervalSince1970: Double(session.endsAtMs + 600_000) / 1000))
                #expect(h.recorder.events(to: 11).last?.text.hasSuffix("now runs until \(until) UTC") == true)
                await expectError(.failedPrecondition, containing: "at most") {
                    _ = try await h.call(10, API.extendWatch, AlertsV1.ExtendWatchRequest(extraSeconds: 12 * 3600))
                }
                let ended = try await h.call(10, API.endWatch, AlertsV1.EndWatchRequest())
                #expect(ended.session?.state == .ended)
                #expect(try #require(h.recorder.grants().last).expiresAtMs <= WallClock.milliseconds())
                #expect(h.recorder.events(to: 12).last?.kind == .watchEnded)
                await expectError(.failedPrecondition, containing: "ended") {
                    _ = try await h.call(13, API.respondInbox, AlertsV1.RespondInboxRequest(kind: .watch, requestId: session.sessionId, action: .accept))
                }
                await expectError(.failedPrecondition) { _ = try await h.call(10, API.endWatch, AlertsV1.EndWatchRequest()) }
                try await h.drained()
                #expect(try await h.outbox().contains { $0.source.hasPrefix("watch_end:") && $0.recipientUserId == 11 }, "the watcher gets a push")
            }
        }

        /// Every change to a grant takes the next version, and a republish carries each grant's
        /// latest: geo can tell a late copy of a grant from the revocation that followed it.
        @Test(arguments: Engine.allCases) func grants_carryIncreasingVersions_andTheRepublishCarriesTheLatest(engine: Engine) async throws {
            try await withAlerts(engine: engine, peers: Self.deesCircle()) { h in
                let session = try #require(try await h.call(10, API.startWatch, AlertsV1.StartWatchRequest(durationSeconds: 1800)).session)
                for watcher in UInt64(11)...12 {
                    _ = try await h.call(watcher, API.respondInbox, AlertsV1.RespondInboxRequest(kind: .watch, requestId: session.sessionId, action: .accept))
                }
                _ = try await h.call(12, API.respondInbox, AlertsV1.RespondInboxRequest(kind: .watch, requestId: session.sessionId, action: .reject))
                _ = try await h.call(10, API.endWatch, AlertsV1.EndWatchRequest())
                let live = h.recorder.grants()
                #expect(live.count == 4, "two accepted, one taken back, one revoked at the end: \(live.map(\.viewerId))")
                #expect(live.map(\.version) == live.map(\.version).sorted() && Set(live.map(\.version)).count == live.count && live.allSatisfy { $0.version > 0 },
                        "each change a newer version: \(live.map(\.version))")
                _ = h.recorder.take()
                try await h.service.republishGrants()
                let republished = h.recorder.grants()
                for viewer in UInt64(11)...12 {
                    let last = try #require(live.last { $0.viewerId == viewer })
                    #expect(republished.filter { $0.viewerId == viewer }.map(\.version) == [last.version], "the latest change of \(viewer)'s grant")
                    #expect(republished.first { $0.viewerId == viewer }?.expiresAtMs ?? .max <= h.service.now(), "revoked")
                }
            }
        }

        /// A grant set again (the same circle at each helpNow, its expiry at the resolve) is
        /// updated where it is (issue 16, item 79): the same row, so the key's index is not
        /// written again; it carries the new expiry and the next version.
        @Test func aGrantSetAgain_isUpdatedInPlace() async throws {
            let storage = try await TestStorage.fresh(.sqlite, service: "alerts")
            let store = try SQLiteAlertsStore(path: "\(storage.directory)/alerts.sqlite")
            let found = try store.database.write { db in
                func stored() throws -> Row? {
                    try Row.fetchOne(db, sql: "SELECT rowid, expires_ms, version FROM grants WHERE subject = 1 AND viewer = 2 AND reason = 'help_now'")
                }
                _ = try SQLiteAlertsStore.setGrant(db, GrantRecord(subject: 1, viewer: 3, reason: "help_now", expiresMs: .max))
                let first = try SQLiteAlertsStore.setGrant(db, GrantRecord(subject: 1, viewer: 2, reason: "help_now", expiresMs: .max))
                let before = try stored()
                _ = try SQLiteAlertsStore.setGrant(db, GrantRecord(subject: 1, viewer: 4, reason: "help_now", expiresMs: .max))
                let again = try SQLiteAlertsStore.setGrant(db, GrantRecord(subject: 1, viewer: 2, reason: "help_now", expiresMs: 50))
                return (first, before, again, try stored(), try Int.fetchOne(db, sql: "SELECT count(*) FROM grants") ?? 0)
            }
            let (first, before, again, after, count) = found
            #expect(before?["rowid"] as Int64? == after?["rowid"] as Int64?, "the same row: \(String(describing: before)) → \(String(describing: after))")
            #expect(after?["expires_ms"] as Int64? == 50 && after?["version"] as Int64? == again.version && again.version > first.version)
            #expect(count == 3)
            withExtendedLifetime(storage) {} // its folder holds the database
        }

        @Test(arguments: Engine.allCases) func aWatchExpires_byItself_andRevokesItsGrants(engine: Engine) async throws {
            try await withAlerts(engine: engine, peers: Self.deesCircle()) { h in
                let started = try await h.call(10, API.startWatch, AlertsV1.StartWatchRequest(durationSeconds: 3))
                let id = try #require(started.session?.sessionId)
                _ = try await h.call(11, API.respondInbox, AlertsV1.RespondInboxRequest(kind: .watch, requestId: id, action: .accept))
                let expired = try await eventuallyValue("the watch to expire") {
                    let mine = try await h.call(10, API.getWatch, AlertsV1.GetWatchRequest()).mine
                    return mine?.state == .expired ? mine : nil
                }
                #expect(expired.endedAtMs >= expired.endsAtMs)
                #expect(h.recorder.events(to: 12).contains { $0.kind == .watchEnded }, "every watcher is told")
                let viewer11 = h.recorder.grants().filter { $0.viewerId == 11 }
                #expect(viewer11.map(\.expiresAtMs) == [expired.endsAtMs, expired.endedAtMs], "granted until the end, then revoked")
                // A new one can start.
                #expect(try await h.call(10, API.startWatch, AlertsV1.StartWatchRequest(durationSeconds: 600)).session?.state == .active)
            }
        }

        @Test(arguments: Engine.allCases) func watchRules_oneActive_boundedDuration_aCircleToAsk(engine: Engine) async throws {
            try await withAlerts(engine: engine, peers: Self.deesCircle()) { h in
                await expectError(.invalidArgument, containing: "duration_seconds") {
                    _ = try await h.call(10, API.startWatch, AlertsV1.StartWatchRequest(durationSeconds: 13 * 3600))
                }
                await expectError(.invalidArgument, containing: "note") {
                    _ = try await h.call(10, API.startWatch, AlertsV1.StartWatchRequest(durationSeconds: 600, note: String(repeating: "n", count: 281)))
                }
                await expectError(.failedPrecondition, containing: "core circle") {
                    _ = try await h.call(14, API.startWatch, AlertsV1.StartWatchRequest(durationSeconds: 600))
                }
                let first = try await h.call(10, API.startWatch, AlertsV1.StartWatchRequest(durationSeconds: 600), key: "w1")
                let retried = try await h.call(10, API.startWatch, AlertsV1.StartWatchRequest(durationSeconds: 600), key: "w1")
                #expect(first.session?.sessionId == retried.session?.sessionId)
                await expectError(.failedPrecondition, containing: "already active") {
                    _ = try await h.call(10, API.startWatch, AlertsV1.StartWatchRequest(durationSeconds: 600), key: "w2")
                }
                await expectError(.failedPrecondition) { _ = try await h.call(14, API.extendWatch, AlertsV1.ExtendWatchRequest(extraSeconds: 600)) }
                try await h.drained()
                #expect(try await h.outbox().filter { $0.source == "watch:\(first.session?.sessionId ?? 0)" }.count == 3, "one request per watcher")
            }
        }

        @Test(arguments: Engine.allCases) func theInbox_listsHelpNowWatchAndCoreFriend_andRoutesEachAction(engine: Engine) async throws {
            let peers = Self.deesCircle()
            peers.state.withLock { s in
                s.circles[20] = [.user(11)]
                s.circleRequests[11] = [(owner: 30, atMs: 1_000), (owner: 31, atMs: 2_000)]
            }
            try await withAlerts(engine: engine, peers: peers) { h in
                let watch = try await h.call(10, API.startWatch, AlertsV1.StartWatchRequest(durationSeconds: 600))
                let help = try await h.call(20, API.raiseHelpNow, AlertsV1.RaiseHelpNowRequest(message: "car broke down"))
                let inbox = try await h.call(11, API.listInbox, AlertsV1.ListInboxRequest())
                #expect(inbox.items.map(\.kind) == [.helpNow, .watch, .coreFriend, .coreFriend], "helpNow first")
                #expect(inbox.items.first?.text == "car broke down" && !inbox.partial)

                // helpNow: "on my way" goes to the initiator.
                let alertID = try #require(help.alert?.alertId)
                _ = try await h.call(11, API.respondInbox, AlertsV1.RespondInboxRequest(kind: .helpNow, requestId: alertID, action: .accept))
                #expect(h.recorder.events(to: 20).last?.kind == .helpNowAnswer)
                #expect(try await h.call(20, API.getHelpNow, AlertsV1.GetHelpNowRequest()).mine?.recipients.first?.answer == .accepted)
                await expectError(.permissionDenied) {
                    _ = try await h.call(12, API.respondInbox, AlertsV1.RespondInboxRequest(kind: .helpNow, requestId: alertID, action: .accept))
                }
                // The recipient sees the alert, without the initiator's emergency prompt.
                let others = try await h.call(11, API.getHelpNow, AlertsV1.GetHelpNowRequest()).others
                #expect(others.map(\.alertId) == [alertID] && others.first?.emergency == nil)

                // coreFriend: accept goes to social; dismiss stays here.
                _ = try await h.call(11, API.respondInbox, AlertsV1.RespondInboxRequest(kind: .coreFriend, requestId: 30, action: .accept))
                #expect(peers.state.withLock { $0.responses.map(\.owner) } == [30])
                _ = try await h.call(11, API.respondInbox, AlertsV1.RespondInboxRequest(kind: .coreFriend, requestId: 31, action: .dismiss))
                await expectError(.notFound) {
                    _ = try await h.call(11, API.respondInbox, AlertsV1.RespondInboxRequest(kind: .coreFriend, requestId: 99, action: .dismiss))
                }
                _ = try await h.call(11, API.respondInbox, AlertsV1.RespondInboxRequest(kind: .watch, requestId: watch.session?.sessionId ?? 0, action: .reject))
                #expect(try await h.call(11, API.listInbox, AlertsV1.ListInboxRequest()).items.isEmpty)

                // Social down: the inbox still lists what alerts holds, and says it is partial.
                _ = try await h.call(10, API.endWatch, AlertsV1.EndWatchRequest())
                _ = try await h.call(10, API.startWatch, AlertsV1.StartWatchRequest(durationSeconds: 600))
                peers.state.withLock { $0.down = ["social"] }
                let partial = try await h.call(12, API.listInbox, AlertsV1.ListInboxRequest())
                #expect(partial.partial && partial.items.map(\.kind) == [.watch])
                await expectError(.unavailable) {
                    _ = try await h.call(11, API.respondInbox, AlertsV1.RespondInboxRequest(kind: .coreFriend, requestId: 31, action: .accept))
                }
            }
        }

        @Test(arguments: Engine.allCases) func campusResources_importedByAnOperator_listedToUsers(engine: Engine) async throws {
            try await withAlerts(engine: engine) { h in
                let json = #"[{"title": "Campus police", "phone": "+1 562 555 0100"}, {"title": "Safe walk", "url": "https://example.edu/walk", "detail": "7pm-2am"}]"#
                await expectError(.permissionDenied) {
                    _ = try await h.operatorCall(API.importResources, AlertsV1.ImportResourcesRequest(operatorKey: "nope", campus: "CSULB", data: Array(json.utf8)))
                }
                await expectError(.invalidArgument, containing: "JSON") {
                    _ = try await h.operatorCall(API.importResources, AlertsV1.ImportResourcesRequest(operatorKey: "operator-secret", campus: "CSULB",
                                                                                                      data: Array("not json".utf8)))
                }
                await expectError(.invalidArgument, containing: "campus") {
                    _ = try await h.operatorCall(API.importResources, AlertsV1.ImportResourcesRequest(operatorKey: "operator-secret", data: Array(json.utf8)))
                }
                await expectError(.invalidArgument, containing: "url") {
                    _ = try await h.operatorCall(API.importResources, AlertsV1.ImportResourcesRequest(
                        operatorKey: "operator-secret", campus: "X", data: Array(#"[{"title": "t", "url": "javascript:alert(1)"}]"#.utf8)))
                }
                let imported = try await h.operatorCall(API.importResources, AlertsV1.ImportResourcesRequest(
                    operatorKey: "operator-secret", campus: "CSULB", data: Array(json.utf8)))
                #expect(imported.imported == 2 && imported.campuses == ["CSULB"])
                let listed = try await h.call(1, API.listResources, AlertsV1.ListResourcesRequest(campus: "csulb"))
                #expect(listed.resources.map(\.title) == ["Campus police", "Safe walk"])
                #expect(listed.resources.last?.url == "https://example.edu/walk")
                // Importing again replaces the campus's list.
                _ = try await h.operatorCall(API.importResources, AlertsV1.ImportResourcesRequest(
                    operatorKey: "operator-secret", campus: "CSULB", data: Array(#"[{"title": "Only one"}]"#.utf8)))
                #expect(try await h.call(1, API.listResources, AlertsV1.ListResourcesRequest()).resources.map(\.title) == ["Only one"])
                await expectError(.unauthenticated) { _ = try await h.call(0, API.listResources, AlertsV1.ListResourcesRequest()) }
            }
        }
    }
}

@Suite("alerts: the watch rules (pure)")
struct WatchRulesTests {
    let rules = WatchRules(minimumMs: 300_000, maximumMs: 43_200_000)

    @Test func aSession_runsFiveMinutesToTwelveHours_withAShortNote() {
        #expect(rules.start(durationSeconds: 1_800, note: "walking home") == .success(1_800_000))
        #expect(rules.start(durationSeconds: 299, note: "") == .failure(.duration(leastMs: 300_000, mostMs: 43_200_000)))
        #expect(rules.start(durationSeconds: 43_201, note: "") == .failure(.duration(leastMs: 300_000, mostMs: 43_200_000)))
        #expect(rules.start(durationSeconds: 600, note: String(repeating: "x", count: 281)) == .failure(.noteTooLong(limit: 280)))
    }

    @Test func onlyUsersWatch_inCircleOrder() {
        #expect(WatchRules.watchers(in: [.phone("+15625550199"), .user(12), .user(11)]) == .success([12, 11]))
        #expect(WatchRules.watchers(in: [.phone("+15625550199")]) == .failure(.noWatcher))
    }

    @Test func anExtension_isAMinuteOrMore_andTheSessionNeverEndsMoreThanTheMaximumFromNow() {
        #expect(rules.extensionMs(seconds: 59) == .failure(.extension_(mostMs: 43_200_000)))
        #expect(rules.extensionMs(seconds: 600) == .success(600_000))
        let now: Int64 = 1_000_000
        #expect(rules.extended(endsAtMs: now + 3_600_000, byMs: 600_000, now: now) == .success(now + 4_200_000))
        #expect(rules.extended(endsAtMs: now + 43_000_000, byMs: 600_000, now: now) == .failure(.tooLong(mostMs: 43_200_000, endsInMs: 43_000_000)))
    }

    @Test func onlyWatchersWhoAccepted_mayLook_untilTheEnd() {
        let watchers = [WatcherRecord(user: 11, answer: .accepted, answeredAtMs: 1), WatcherRecord(user: 12, answer: .declined, answeredAtMs: 2),
                        WatcherRecord(user: 13, answer: .pending, answeredAtMs: 0)]
        #expect(WatchRules.grants(of: 10, watchers: watchers, until: 99) == [GrantRecord(subject: 10, viewer: 11, reason: "watch", expiresMs: 99)])
    }
}
