import FriensoProto
import FriensoTesting
import Testing
@testable import Wire

@Suite("pub/sub", .timeLimit(.minutes(1)))
struct PubSubTests {
    @Test func events_arriveInOrder_numberedPerStream_filteredByTopic() async throws {
        let logs = CapturedLogs()
        let publisher = Publisher(name: "test", endpoint: "tcp://127.0.0.1:*", logger: logs.logger("pub"))
        try await withRunningServices([publisher], logger: logs.logger("group")) {
            let subscriber = Subscriber(endpoint: try await publisher.boundEndpoint(), prefixes: ["graph", "viewer.7"], logger: logs.logger("sub"))
            var events = subscriber.events.makeAsyncIterator()
            // PUB/SUB joins asynchronously: probe until the first probe arrives (bounded by the suite's time limit).
            let probing = Task {
                while !Task.isCancelled {
                    publisher.publish(topic: "viewer.7", method: "probe", payload: [])
                    try? await Task.sleep(for: .milliseconds(10))
                }
            }
            let first = await events.next()
            probing.cancel()
            await probing.value
            #expect(first?.envelope.method == "probe")
            #expect(first?.envelope.epoch == publisher.epoch)

            publisher.publish(topic: "graph", method: "g", payload: [1])
            publisher.publish(topic: "viewer.8", method: "other", payload: [])
            publisher.publish(topic: "graph", method: "g", payload: [2])
            publisher.publish(topic: "viewer.7", method: "mine", payload: [])
            publisher.publish(topic: "graph", method: "g", payload: [3])
            var tracker = SequenceTracker()
            tracker.reset(epoch: publisher.epoch, stream: "graph", sequence: 0)
            var graph: [[UInt8]] = []
            var mine = 0
            while graph.count < 3, let next = await events.next() {
                switch next.topic {
                case "graph":
                    #expect(tracker.check(next.envelope, stream: "graph") == .apply)
                    graph.append(next.envelope.payload)
                case "viewer.7":
                    if next.envelope.method == "mine" { mine += 1 }
                default:
                    Issue.record("received \(next.topic), which is not subscribed")
                }
            }
            #expect(graph == [[1], [2], [3]])
            #expect(mine == 1)
            #expect(publisher.lastSequence(stream: "graph") == 3)
            await subscriber.close()
        }
    }

    @Test func sequenceTracker_dropsStale_appliesNext_resyncsOnGapOrNewEpoch() {
        var tracker = SequenceTracker()
        func event(_ sequence: UInt64, epoch: UInt64 = 1) -> Envelope { Envelope(kind: .event, sequence: sequence, epoch: epoch) }
        #expect(tracker.check(event(1), stream: "graph") == .resync, "no snapshot yet")
        tracker.reset(epoch: 1, stream: "graph", sequence: 10)
        #expect(tracker.check(event(9), stream: "graph") == .stale)
        #expect(tracker.check(event(10), stream: "graph") == .stale)
        #expect(tracker.check(event(11), stream: "graph") == .apply)
        #expect(tracker.check(event(13), stream: "graph") == .resync)
        #expect(tracker.check(event(12, epoch: 2), stream: "graph") == .resync)
        #expect(tracker.check(event(1), stream: "grants") == .resync)
    }

    @Test func streamName_isTopicFirstSegment() {
        #expect(Publisher.stream(of: "viewer.42") == "viewer")
        #expect(Publisher.stream(of: "graph") == "graph")
    }
}
