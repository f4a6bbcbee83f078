import FriensoProto
import FriensoTesting
import Testing
@testable import Wire

/// A client loop's deadlines (item 107): its timers look through the calls only once the
/// earliest deadline is reached. The loop is driven by hand with the instants its reactor would
/// give it, so nothing here waits: its peer is a port nothing answers on, and no call is sent.
@Suite("a client's call deadlines")
struct ClientDeadlineTests {
    /// A call with a later deadline, then one with an earlier deadline: the loop wakes for the
    /// earlier one, expires it then and keeps the other; the other expires at its own deadline.
    @Test func aCallTakenLater_withAnEarlierDeadline_expiresFirst() throws {
        try withLoop { loop in
            let start = Moment.now
            var outcomes: [String: StatusCode] = [:]
            loop.callNow(call("test.Long", until: start.advanced(by: .seconds(30))) { outcomes["test.Long"] = $0.status })
            loop.callNow(call("test.Short", until: start.advanced(by: .seconds(2))) { outcomes["test.Short"] = $0.status })
            // What `nextWakeup` wakes the reactor for, among the heartbeats.
            #expect(loop.earliestDeadline == start.advanced(by: .seconds(2)))

            loop.timers(start.advanced(by: .seconds(1)))
            #expect(outcomes.isEmpty && loop.pending.count == 2)

            loop.timers(start.advanced(by: .seconds(3)))
            #expect(outcomes == ["test.Short": .unavailable])
            #expect(loop.pending.count == 1 && loop.earliestDeadline == start.advanced(by: .seconds(30)))

            loop.timers(start.advanced(by: .seconds(31)))
            #expect(outcomes == ["test.Short": .unavailable, "test.Long": .unavailable])
            #expect(loop.pending.isEmpty && loop.earliestDeadline == nil)
        }
    }

    /// The earliest deadline belongs to a call that has left (answered, cancelled): reaching it
    /// expires nothing, and the loop looks again for the next one.
    @Test func aStaleEarliestDeadline_expiresNothing_andMovesOn() throws {
        try withLoop { loop in
            let start = Moment.now
            var failed: [String] = []
            let short = call("test.Short", until: start.advanced(by: .seconds(1))) { _ in failed.append("test.Short") }
            loop.callNow(short)
            loop.callNow(call("test.Long", until: start.advanced(by: .seconds(10))) { _ in failed.append("test.Long") })
            loop.pending[short.envelope.requestId] = nil // as a reply or a cancellation takes it

            loop.timers(start.advanced(by: .seconds(2)))
            #expect(failed.isEmpty && loop.earliestDeadline == start.advanced(by: .seconds(10)))
            loop.timers(start.advanced(by: .seconds(11)))
            #expect(failed == ["test.Long"])
        }
    }

    /// A completion that makes another call while the timers expire calls: its deadline is kept.
    @Test func aCallMadeByAnExpiringCallsCompletion_keepsItsDeadline() throws {
        try withLoop { loop in
            let start = Moment.now
            var failed: [String] = []
            loop.callNow(call("test.First", until: start.advanced(by: .seconds(1))) { _ in
                failed.append("test.First")
                loop.callNow(call("test.Retry", until: start.advanced(by: .seconds(5))) { _ in failed.append("test.Retry") })
            })
            loop.timers(start.advanced(by: .seconds(2)))
            #expect(failed == ["test.First"] && loop.earliestDeadline == start.advanced(by: .seconds(5)))
            loop.timers(start.advanced(by: .seconds(6)))
            #expect(failed == ["test.First", "test.Retry"])
        }
    }

    private static let ids = Counter()

    private func call(_ method: String, until deadline: Moment,
                      _ completion: @escaping (Envelope) -> Void) -> ClientLoop.Pending {
        ClientLoop.Pending(envelope: Envelope(kind: .request, requestId: UInt64(Self.ids.increment()), method: method),
                           deadline: deadline, retryable: false, completion: .call(completion))
    }

    /// A loop made and driven on the test's thread; its reactor never runs it.
    private func withLoop(_ body: (ClientLoop) throws -> Void) throws {
        let dead = try DeadPort()
        let reactor = Reactor(name: "deadline-test")
        defer { reactor.stop() }
        let context = ZMQContext()
        var options = fastClient()
        options.liveness = 10_000 // the peer's silence (no heartbeat answered) is not what these tests look at
        let (_, events) = AsyncStream<ClientEvent>.makeStream()
        let loop = ClientLoop(endpoint: dead.endpoint, options: options, context: context,
                              commands: CommandQueue(reactor: reactor), events: events,
                              logger: CapturedLogs().logger("client"), finished: OneShot(), slot: ClientLoop.Slot())
        defer { loop.close() }
        try body(loop)
    }
}
