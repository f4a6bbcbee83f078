import Foundation
@testable import Gateway
import Testing
import Wire

@Suite("gateway: live-event subscriptions")
struct SubscriptionsTests {
    @Test func viewerTopics_nameTheirUser_andNothingElseDoes() {
        #expect(Subscriptions.viewer(inTopic: Array("viewer.42".utf8)) == 42)
        #expect(Subscriptions.viewer(inTopic: Array("viewer.18446744073709551615".utf8)) == UInt64.max)
        for other in ["viewer.", "viewer.18446744073709551616", "viewer.4x", "viewer.-1", "graph", "viewers.4", "", "viewer.1.2"] {
            #expect(Subscriptions.viewer(inTopic: Array(other.utf8)) == nil, "\(other)")
        }
    }

    @Test func onlySubscribedUsersAreWanted_untilTheyUnsubscribe() {
        let subscriptions = Subscriptions(ttl: .seconds(60))
        let peer = PeerIdentity(routingID: [1, 2, 3], hasDelimiter: false)
        #expect(!subscriptions.has(7))
        subscriptions.subscribe(peer, user: 7)
        #expect(subscriptions.has(7) && !subscriptions.has(8))
        #expect(subscriptions.peers(of: 7) == [peer])
        subscriptions.unsubscribe(peer, user: 7)
        #expect(!subscriptions.has(7))
    }
}
