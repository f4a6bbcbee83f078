import Foundation
@testable import Gateway
import Synchronization
import Testing
import Wire

@Suite("gateway: live-event subscriptions")
struct SubscriptionsTests {
    /// An event source's filter, as the gateway drives it: what it was told, in order.
    final class RecordingFilter: TopicFiltering {
        let calls = Mutex<[String]>([])
        func subscribe(_ prefix: String) { calls.withLock { $0.append("+" + prefix) } }
        func unsubscribe(_ prefix: String) { calls.withLock { $0.append("-" + prefix) } }
        func take() -> [String] { calls.withLock { calls in defer { calls = [] }; return calls } }
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

    /// Each source is subscribed to a user's topic once, while at least one of the user's
    /// connections is live here, whatever the number of connections; a source attached later
    /// gets the users already here.
    @Test func sources_areFilteredToTheUsersConnectedHere() {
        let subscriptions = Subscriptions(ttl: .seconds(60))
        let geo = RecordingFilter(), alerts = RecordingFilter()
        subscriptions.attach(geo)
        let phone = PeerIdentity(routingID: [1], hasDelimiter: false), laptop = PeerIdentity(routingID: [2], hasDelimiter: false)
        subscriptions.subscribe(phone, user: 7)
        subscriptions.subscribe(laptop, user: 7)
        subscriptions.subscribe(phone, user: 7) // a renewal
        #expect(geo.take() == ["+viewer.7."])
        subscriptions.attach(alerts)
        #expect(alerts.take() == ["+viewer.7."])
        subscriptions.unsubscribe(phone, user: 7)
        #expect(geo.take().isEmpty, "the laptop still listens")
        subscriptions.unsubscribe(laptop, user: 7)
        #expect(geo.take() == ["-viewer.7."] && alerts.take() == ["-viewer.7."])
        subscriptions.unsubscribe(laptop, user: 7)
        #expect(geo.take().isEmpty, "unsubscribing twice does not unsubscribe the source twice")
        subscriptions.detach(alerts)
        subscriptions.subscribe(phone, user: 8)
        #expect(geo.take() == ["+viewer.8."] && alerts.take().isEmpty)
        #expect(subscriptions.users == 1)
    }

    /// A client that stops renewing lapses: the sweep (or the next event for the user) drops it,
    /// and the sources stop sending the user's events here.
    @Test func lapsedConnections_unsubscribeTheirUser() {
        let subscriptions = Subscriptions(ttl: .seconds(30))
        let geo = RecordingFilter()
        subscriptions.attach(geo)
        let peer = PeerIdentity(routingID: [1], hasDelimiter: false)
        subscriptions.subscribe(peer, user: 7)
        subscriptions.subscribe(peer, user: 9)
        _ = geo.take()
        #expect(subscriptions.sweep(now: .now).isEmpty)
        #expect(subscriptions.sweep(now: .now.advanced(by: .seconds(31))).sorted() == [7, 9])
        #expect(Set(geo.take()) == ["-viewer.7.", "-viewer.9."])
        #expect(subscriptions.users == 0 && !subscriptions.has(7))
        subscriptions.subscribe(peer, user: 7)
        #expect(geo.take() == ["+viewer.7."])
    }
}
