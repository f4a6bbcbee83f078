@testable import Alerts
import Foundation
import FriensoProto
import FriensoTesting
import SocialReplica
import Testing
import Wire

extension AlertsTestGroup {
    /// Alerts' copy of every core circle (`CircleCopy`): a helpNow is recorded from it without
    /// asking social, for as long as the graph replica has applied no change to that circle since
    /// the copy read it; otherwise social is asked, as without a copy, and its answer kept.
    @Suite("alerts: the copy of the core circles", .serialized, .timeLimit(.minutes(2)))
    struct CircleCopyTests {
        static let ana: [CircleContact] = [.user(2), .user(3), .phone("+15625550199")]

        /// Ana (1) with two members and an invited number; Dee (4) with nobody; the replica loaded.
        static func peers() -> FakePeers {
            let peers = FakePeers()
            peers.state.withLock { s in
                s.circles[1] = ana
                s.circles[5] = [.user(2)]
                s.phones = [1: "+15625550101", 2: "+15625550102", 3: "+15625550103"]
                s.replica = FakePeers.Replica()
            }
            return peers
        }

        @Test(arguments: Engine.allCases) func aRaise_readsTheCircleFromTheCopy_andAsksSocialOnlyForACircleThatChanged(engine: Engine) async throws {
            let peers = Self.peers()
            try await withAlerts(engine: engine, peers: peers, worker: false) { h in
                #expect(try await h.service.loadCircleCopy(ownersPerPage: 1) == 2)
                #expect(peers.state.withLock { $0.snapshotPages } == 3, "an owner a page, then the empty last one")

                // Loaded: in circle order, invited number included, social not asked.
                let first = try await h.call(1, API.raiseHelpNow, AlertsV1.RaiseHelpNowRequest(message: "one"))
                #expect(first.notified == 3 && first.alert?.recipients.map { $0.person?.userId ?? 0 } == [2, 3, 0])
                #expect(first.alert?.recipients.last?.phone == "+15625550199")
                // Someone with nobody in their circle is known to have nobody.
                let lonely = try await h.call(4, API.raiseHelpNow, AlertsV1.RaiseHelpNowRequest())
                #expect(lonely.nobodyNotified)
                #expect(peers.state.withLock { $0.socialAsked }.isEmpty, "no question to social")
                _ = try await h.call(1, API.resolveHelpNow, AlertsV1.ResolveHelpNowRequest())

                // Ana's circle changes (Cy leaves, an invitation is withdrawn) and the replica has
                // applied it: her next raise asks social, and reaches the circle as it is now.
                peers.changeCircle(of: 1, to: [.user(2)])
                let second = try await h.call(1, API.raiseHelpNow, AlertsV1.RaiseHelpNowRequest(message: "two"))
                #expect(second.notified == 1 && second.alert?.recipients.map { $0.person?.userId ?? 0 } == [2])
                #expect(peers.state.withLock { $0.socialAsked } == [1])
                _ = try await h.call(1, API.resolveHelpNow, AlertsV1.ResolveHelpNowRequest())
                // Social's answer was kept: the next raise does not ask again.
                let third = try await h.call(1, API.raiseHelpNow, AlertsV1.RaiseHelpNowRequest(message: "three"))
                #expect(third.notified == 1 && peers.state.withLock { $0.socialAsked } == [1])
                _ = try await h.call(1, API.resolveHelpNow, AlertsV1.ResolveHelpNowRequest())

                // The replica loads afresh (a new generation): nothing in the copy is trusted until
                // it loads again.
                peers.state.withLock { $0.replica?.generation = 2 }
                _ = try await h.call(5, API.raiseHelpNow, AlertsV1.RaiseHelpNowRequest())
                #expect(peers.state.withLock { $0.socialAsked } == [1, 5])
                _ = try await h.call(5, API.resolveHelpNow, AlertsV1.ResolveHelpNowRequest())
                try await h.service.loadCircleCopy()
                _ = try await h.call(5, API.raiseHelpNow, AlertsV1.RaiseHelpNowRequest())
                #expect(peers.state.withLock { $0.socialAsked } == [1, 5])

                // What was queued (no worker here: nothing is sent).
                let sms = try await h.outbox().filter { $0.channel == .sms }
                let to = { (text: String) in sms.filter { $0.body.contains(text) }.map { $0.recipientUserId == 0 ? $0.address : "\($0.recipientUserId)" }.sorted() }
                #expect(to("\"one\"") == ["+15625550199", "2", "3"])
                #expect(to("\"two\"") == ["2"])
            }
        }

        /// With the copy loaded, a raise while social is down still reaches the invited number
        /// (the replica alone has accepted members only); before the copy loads, or with no
        /// replica, social is asked as before.
        @Test(arguments: Engine.allCases) func socialDown_theCopyStillReachesTheInvitedNumber(engine: Engine) async throws {
            let peers = Self.peers()
            try await withAlerts(engine: engine, peers: peers, worker: false) { h in
                peers.state.withLock { $0.down = ["social"] }
                let before = try await h.call(1, API.raiseHelpNow, AlertsV1.RaiseHelpNowRequest(message: "not loaded"))
                #expect(before.notified == 2, "from the replica: the members, not the invited number")
                _ = try await h.call(1, API.resolveHelpNow, AlertsV1.ResolveHelpNowRequest())
                peers.state.withLock { $0.down = [] }
                try await h.service.loadCircleCopy()
                peers.state.withLock { $0.down = ["social"] }
                let loaded = try await h.call(1, API.raiseHelpNow, AlertsV1.RaiseHelpNowRequest(message: "loaded"))
                #expect(loaded.notified == 3 && loaded.alert?.recipients.last?.phone == "+15625550199")
            }
            // No replica (or not loaded yet): the copy neither loads nor answers.
            let unreplicated = Self.peers()
            unreplicated.state.withLock { $0.replica = nil }
            try await withAlerts(engine: engine, peers: unreplicated, worker: false) { h in
                #expect(try await h.service.loadCircleCopy() == nil)
                _ = try await h.call(1, API.raiseHelpNow, AlertsV1.RaiseHelpNowRequest())
                #expect(unreplicated.state.withLock { $0.socialAsked } == [1])
            }
        }

        /// The worker loads the copy once the replica has loaded, and again after it loads afresh.
        @Test func theWorker_loadsTheCopy_whenTheReplicaLoads() async throws {
            let peers = Self.peers()
            peers.state.withLock { $0.replica = nil }
            try await withAlerts(peers: peers) { h in
                peers.state.withLock { $0.replica = FakePeers.Replica(generation: 7) }
                try await eventually("the copy loaded") { h.service.circleCopy.loadedGeneration == 7 }
                peers.state.withLock { $0.replica?.generation = 8 }
                try await eventually("the copy loaded again") { h.service.circleCopy.loadedGeneration == 8 }
                _ = try await h.call(1, API.raiseHelpNow, AlertsV1.RaiseHelpNowRequest())
                #expect(peers.state.withLock { $0.socialAsked }.isEmpty)
            }
        }

        /// The rule itself: an entry stands while its circle has not changed since it was read,
        /// in the same replica generation.
        @Test func anEntryStands_untilItsCircleChanges_orTheReplicaStartsOver() {
            let read = CircleClock(generation: 1, changes: 10, ownerChangedAt: 4)
            #expect(CircleCopy.isCurrent(generation: 1, readAt: 10, CircleClock(generation: 1, changes: 25, ownerChangedAt: 4)))
            #expect(CircleCopy.isCurrent(generation: 1, readAt: 10, CircleClock(generation: 1, changes: 25, ownerChangedAt: 10)),
                    "a change applied before social was asked is in its answer")
            #expect(!CircleCopy.isCurrent(generation: 1, readAt: 10, CircleClock(generation: 1, changes: 25, ownerChangedAt: 11)))
            #expect(!CircleCopy.isCurrent(generation: 1, readAt: 10, CircleClock(generation: 2, changes: 0, ownerChangedAt: 0)))
            let copy = CircleCopy { _ in read }
            #expect(copy.circle(of: 1) == nil, "nothing loaded: ask social")
            copy.keep([.user(2)], of: 1, readAfter: read)
            #expect(copy.circle(of: 1) == [.user(2)])
            #expect(copy.circle(of: 9) == nil, "not kept, no snapshot: ask social")
            copy.replaceAll([1: [.phone("+15625550199")]], readAfter: read)
            #expect(copy.circle(of: 1) == [.phone("+15625550199")] && copy.circle(of: 9) == [])
            copy.forget(1)
            #expect(copy.count == 0)
        }
    }
}
