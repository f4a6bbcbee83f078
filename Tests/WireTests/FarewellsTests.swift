import Testing
@testable import Wire

/// The stopping host's goodbyes as a value, with no socket and a clock the test moves.
@Suite("service host: goodbyes of a stopping host")
struct FarewellsTests {
    let ann = PeerIdentity(routingID: [0, 0, 0, 0, 1], hasDelimiter: false)
    let bob = PeerIdentity(routingID: [0, 0, 0, 0, 2], hasDelimiter: true)
    let start = Moment.now

    /// Sends through `ask`, recording each (peer, token) and refusing the peers in `gone`.
    func ask(_ farewells: inout Farewells, at offset: Duration, timeout: Duration = .seconds(3),
             gone: Set<PeerIdentity> = []) -> (done: Bool, givenUp: Int, sent: [(PeerIdentity, UInt64)]) {
        var sent: [(PeerIdentity, UInt64)] = []
        let (done, givenUp) = farewells.ask(now: start.advanced(by: offset), timeout: timeout) { peer, token in
            sent.append((peer, token))
            return !gone.contains(peer)
        }
        return (done, givenUp, sent)
    }

    @Test func nobodyAnswered_nothingToWaitFor() {
        var farewells = Farewells()
        let turn = ask(&farewells, at: .zero)
        #expect(turn.done && turn.givenUp == 0 && turn.sent.isEmpty)
        #expect(farewells.nextRetry == nil)
    }

    @Test func eachPeerAnswered_isAskedOnce_andReleasedByTheAnswerToItsGoodbye() throws {
        var farewells = Farewells()
        farewells.replied(to: ann)
        farewells.replied(to: ann)
        farewells.replied(to: bob)
        let first = ask(&farewells, at: .zero)
        #expect(!first.done && first.sent.count == 2)
        let annToken = try #require(first.sent.first { $0.0 == ann }?.1)
        let bobToken = try #require(first.sent.first { $0.0 == bob }?.1)
        #expect(annToken != bobToken && annToken != 0 && bobToken != 0)
        // Before the retry interval, nobody is asked twice.
        #expect(ask(&farewells, at: .milliseconds(50)).sent.isEmpty)
        // An answer naming another goodbye proves nothing; the right one releases the peer.
        farewells.answered(ann, token: bobToken)
        farewells.answered(bob, token: annToken)
        #expect(farewells.waiting == 2)
        farewells.answered(ann, token: annToken)
        farewells.answered(bob, token: bobToken)
        #expect(farewells.waiting == 0)
        #expect(ask(&farewells, at: .milliseconds(60)).done)
    }

    @Test func aReplyAfterTheGoodbye_needsAGoodbyeAfterIt() throws {
        var farewells = Farewells()
        farewells.replied(to: ann)
        let old = try #require(ask(&farewells, at: .zero).sent.first?.1)
        farewells.replied(to: ann) // a late reply (an UNAVAILABLE to a new request, say)
        let again = ask(&farewells, at: .milliseconds(10))
        let new = try #require(again.sent.first?.1)
        #expect(new != old)
        farewells.answered(ann, token: old)
        #expect(farewells.waiting == 1, "the answer to the first goodbye says nothing of the later reply")
        farewells.answered(ann, token: new)
        #expect(farewells.waiting == 0)
    }

    @Test func unansweredGoodbyes_goOutAgain_andAPeerThatLeftIsDropped() throws {
        var farewells = Farewells()
        farewells.replied(to: ann)
        farewells.replied(to: bob)
        let first = ask(&farewells, at: .zero)
        #expect(farewells.nextRetry == start.advanced(by: Farewells.retry))
        // One retry later: both asked again with the same tokens; bob has left (the send fails).
        let retry = ask(&farewells, at: Farewells.retry, gone: [bob])
        #expect(retry.sent.count == 2)
        #expect(retry.sent.first { $0.0 == ann }?.1 == first.sent.first { $0.0 == ann }?.1)
        #expect(farewells.waiting == 1 && !retry.done)
        farewells.answered(ann, token: try #require(first.sent.first { $0.0 == ann }?.1))
        #expect(ask(&farewells, at: Farewells.retry * 2).done)
    }

    @Test func aSilentPeer_isGivenUpAfterTheTimeout() {
        var farewells = Farewells()
        farewells.replied(to: ann)
        _ = ask(&farewells, at: .zero, timeout: .seconds(3))
        #expect(!ask(&farewells, at: .seconds(2), timeout: .seconds(3)).done)
        let last = ask(&farewells, at: .seconds(3), timeout: .seconds(3))
        #expect(last.done && last.givenUp == 1 && last.sent.isEmpty)
        #expect(farewells.waiting == 0 && farewells.nextRetry == nil)
    }
}
