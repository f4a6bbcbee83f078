import CZeroMQ
import FriensoProto
import FriensoTesting
import Testing
@testable import Wire

@Suite("pub/sub", .timeLimit(.minutes(1)))
struct PubSubTests {
    /// Every bound socket caps what a peer may send; for a PUB that is its subscribers'
    /// subscriptions. A raw XSUB sends a 128 KiB "subscription": the publisher drops that
    /// connection (seen by a monitor on the XSUB) and goes on serving a well-behaved subscriber.
    @Test func oversizedSubscription_isRefused_andThePublisherKeepsServing() async throws {
        let logs = CapturedLogs()
        let publisher = Publisher(name: "test", endpoint: "tcp://127.0.0.1:*", logger: logs.logger("pub"))
        try await withRunningServices([publisher], logger: logs.logger("group")) {
            let endpoint = try await publisher.boundEndpoint()
            let disconnected = await ProcessHarness.offPool { Self.oversizedSubscriptionIsDropped(endpoint) }
            #expect(disconnected, "the publisher kept a peer that sent a frame over its cap")
            let subscriber = Subscriber(endpoint: endpoint, prefixes: ["viewer.1"], logger: logs.logger("sub"))
            var events = subscriber.events.makeAsyncIterator()
            let probing = Task {
                while !Task.isCancelled {
                    publisher.publish(topic: "viewer.1", method: "probe", payload: [])
                    try? await Task.sleep(for: .milliseconds(10))
                }
            }
            #expect(await events.next()?.envelope.method == "probe")
            probing.cancel()
            await probing.value
            await subscriber.close()
        }
    }

    /// The publisher hears its subscribers (XPUB): a topic is listened to while a subscription
    /// that is its prefix stands, and no longer once that subscriber unsubscribed or went away.
    @Test func thePublisher_knowsWhichTopicsAreListenedTo() async throws {
        let logs = CapturedLogs()
        let publisher = Publisher(name: "test", endpoint: "tcp://127.0.0.1:*", logger: logs.logger("pub"))
        try await withRunningServices([publisher], logger: logs.logger("group")) {
            let endpoint = try await publisher.boundEndpoint()
            #expect(!publisher.listens(to: "viewer.7."), "nobody subscribed yet")
            let one = Subscriber(endpoint: endpoint, prefixes: [ViewerTopic.of(7)], logger: logs.logger("one"))
            try await eventually("the subscription reaches the publisher") { publisher.listens(to: ViewerTopic.of(7)) }
            #expect(!publisher.listens(to: ViewerTopic.of(70)) && !publisher.listens(to: ViewerTopic.of(8)) && !publisher.listens(to: "graph"))

            let all = Subscriber(endpoint: endpoint, prefixes: [""], logger: logs.logger("all"))
            try await eventually("a subscription to everything") { publisher.listens(to: "graph") && publisher.listens(to: ViewerTopic.of(8)) }
            await all.close()
            try await eventually("the subscriber to everything went away") { !publisher.listens(to: ViewerTopic.of(8)) }
            #expect(publisher.listens(to: ViewerTopic.of(7)), "the other subscription stands")

            one.unsubscribe(ViewerTopic.of(7))
            try await eventually("unsubscribed") { !publisher.listens(to: ViewerTopic.of(7)) }
            one.subscribe(ViewerTopic.of(9))
            try await eventually("subscribed again") { publisher.listens(to: ViewerTopic.of(9)) }
            await one.close()
            try await eventually("the last subscriber went away") { !publisher.listens(to: ViewerTopic.of(9)) }
        }
    }

    /// On a thread of its own: connects a raw XSUB with a monitor, sends an oversized
    /// subscription, and waits (5 s at most) for the connection to be dropped.
    static func oversizedSubscriptionIsDropped(_ endpoint: String) -> Bool {
        let context = ZMQContext.shared.handle
        guard let xsub = zmq_socket(context, ZMQ_XSUB), let monitor = zmq_socket(context, ZMQ_PAIR) else { return false }
        defer { zmq_close(xsub); zmq_close(monitor) }
        var zero: Int32 = 0, timeout: Int32 = 5_000
        zmq_setsockopt(xsub, ZMQ_LINGER, &zero, 4)
        zmq_setsockopt(monitor, ZMQ_LINGER, &zero, 4)
        zmq_setsockopt(monitor, ZMQ_RCVTIMEO, &timeout, 4)
        let address = "inproc://pub-cap-monitor-\(UInt64.random(in: 0...UInt64.max))"
        guard zmq_socket_monitor(xsub, address, ZMQ_EVENT_CONNECTED | ZMQ_EVENT_DISCONNECTED) == 0,
              zmq_connect(monitor, address) == 0, zmq_connect(xsub, endpoint) == 0 else { return false }
        /// The next event's number, or nil at the timeout.
        func nextEvent() -> Int32? {
            var first = zmq_msg_t(), second = zmq_msg_t()
            zmq_msg_init(&first)
            zmq_msg_init(&second)
            defer { zmq_msg_close(&first); zmq_msg_close(&second) }
            guard zmq_msg_recv(&first, monitor, 0) >= 6, zmq_msg_recv(&second, monitor, 0) >= 0 else { return nil }
            return Int32(zmq_msg_data(&first)!.load(as: UInt16.self))
        }
        guard nextEvent() == ZMQ_EVENT_CONNECTED else { return false }
        var subscription = [UInt8](repeating: 0x61, count: Int(Publisher.maxInboundMessageSize) * 2)
        subscription[0] = 1 // "subscribe"
        guard zmq_send(xsub, subscription, subscription.count, 0) == subscription.count else { return false }
        while let event = nextEvent() {
            if event == ZMQ_EVENT_DISCONNECTED { return true }
        }
        return false
    }

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

    /// The gateway subscribes a user's topic while its socket runs, and drops it when the user's
    /// last connection goes: the user's events flow only in between, and the id's end mark keeps
    /// other users whose ids start with the same digits (120, and 1) out.
    @Test func viewerTopics_subscribedAndDroppedWhileRunning_matchOneUserExactly() async throws {
        let logs = CapturedLogs()
        let publisher = Publisher(name: "test", endpoint: "tcp://127.0.0.1:*", logger: logs.logger("pub"))
        try await withRunningServices([publisher], logger: logs.logger("group")) {
            let subscriber = Subscriber(endpoint: try await publisher.boundEndpoint(), prefixes: ["graph"], logger: logs.logger("sub"))
            var events = subscriber.events.makeAsyncIterator()
            let twelve = ViewerTopic.of(12)
            subscriber.subscribe(twelve)
            // PUB/SUB joins asynchronously: publish rounds until user 12's first event arrives.
            var probing = Task {
                while !Task.isCancelled {
                    for user in [120, 1, 12] as [UInt64] { publisher.publish(topic: ViewerTopic.of(user), method: "m", payload: []) }
                    try? await Task.sleep(for: .milliseconds(10))
                }
            }
            while let next = await events.next() {
                #expect(next.topic == twelve, "only user 12's events: got \(next.topic)")
                if next.topic == twelve { break }
            }
            probing.cancel()
            await probing.value

            subscriber.unsubscribe(twelve)
            // Rounds of [12, graph] until a round arrives without its 12: the publisher has heard.
            probing = Task {
                while !Task.isCancelled {
                    publisher.publish(topic: twelve, method: "m", payload: [])
                    publisher.publish(topic: "graph", method: "round", payload: [])
                    try? await Task.sleep(for: .milliseconds(10))
                }
            }
            var twelveSinceRound = false
            while let next = await events.next() {
                if next.topic == twelve { twelveSinceRound = true; continue }
                if !twelveSinceRound { break }
                twelveSinceRound = false
            }
            probing.cancel()
            await probing.value
            publisher.publish(topic: twelve, method: "m", payload: [])
            publisher.publish(topic: "graph", method: "end", payload: [])
            while let next = await events.next() {
                #expect(next.topic != twelve, "user 12 was unsubscribed")
                if next.envelope.method == "end" { break }
            }
            #expect(ViewerTopic.user(in: Array(twelve.utf8)) == 12)
            await subscriber.close()
        }
    }

    /// `matches(viewer:)` answers as libzmq's own filter would: some subscribed prefix starts
    /// the viewer's topic. Whole-stream prefixes, part of an id, another stream's name, each
    /// subscribed and dropped again, against every viewer from 0 to 130.
    @Test func listenedTopics_matchAViewer_exactlyAsAPrefixFilterWould() {
        let listened = ListenedTopics()
        var subscribed: Set<String> = []
        func apply(_ kind: UInt8, _ prefix: String) {
            ([kind] + Array(prefix.utf8)).withUnsafeBytes { listened.apply($0) }
            if kind == 1 { subscribed.insert(prefix) } else { subscribed.remove(prefix) }
        }
        func check(_ step: String) {
            for viewer in UInt64(0)...130 {
                let expected = subscribed.contains { ViewerTopic.of(viewer).utf8.starts(with: $0.utf8) }
                #expect(listened.matches(viewer: viewer) == expected, "\(step): viewer \(viewer)")
                #expect(listened.matches(ViewerTopic.of(viewer)) == expected, "\(step): topic of \(viewer)")
            }
        }
        check("nobody subscribed")
        let steps: [(UInt8, String)] = [
            (1, "graph"), (1, ViewerTopic.of(7)), (1, "viewer.1"), (1, "viewer.12.x"), (1, "viewers"),
            (1, "viewer."), (0, "viewer."), (1, ""), (0, ""), (1, "vie"), (0, "viewer.1"), (0, "vie"),
            (0, ViewerTopic.of(7)), (1, "viewer.12"), (0, "graph"), (0, "viewer.12"),
        ]
        for (kind, prefix) in steps {
            apply(kind, prefix)
            check("\(kind == 1 ? "subscribed" : "dropped") \"\(prefix)\"")
        }
    }

    @Test func viewerTopics_nameTheirUser_andNothingElseDoes() {
        #expect(ViewerTopic.of(42) == "viewer.42.")
        #expect(ViewerTopic.user(in: Array("viewer.42.".utf8)) == 42)
        #expect(ViewerTopic.user(in: "viewer.0.".utf8) == 0)
        #expect(ViewerTopic.user(in: Array(ViewerTopic.of(.max).utf8)) == UInt64.max)
        for other in ["viewer.", "viewer..", "viewer.42", "viewer.18446744073709551616.", "viewer.4x.", "viewer.-1.",
                      "graph", "viewers.4.", "", "viewer.1.2.", "viewer.1.2", "Viewer.4."] {
            #expect(ViewerTopic.user(in: Array(other.utf8)) == nil, "\(other)")
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
        #expect(Publisher.stream(of: "viewer.42.place") == "viewer")
        #expect(Publisher.stream(of: "") == "")
    }
}

@Suite("pub/sub: one event to many topics")
struct MultiTopicEventTests {
    /// The envelope is encoded once and numbered per topic by appending the sequence field: what a
    /// subscriber decodes is the envelope a single publish would have made.
    @Test func anAppendedSequence_decodesAsTheWholeEnvelope() throws {
        let base = Envelope(version: WireProtocol.version, kind: .event, method: "geo.Location", payload: [1, 2, 3, 0, 255], epoch: 77)
        for sequence: UInt64 in [1, 127, 128, 300, 1 << 35, UInt64(Int64.max), .max] {
            let bytes = base.serializedBytes()
            let numbered = [UInt8](unsafeUninitializedCapacity: Publisher.numberedSize(bytes, sequence: sequence)) { buffer, count in
                count = buffer.count
                Publisher.writeNumbered(bytes, sequence: sequence, into: UnsafeMutableRawBufferPointer(buffer))
            }
            let decoded = try Envelope(serializedBytes: numbered)
            var expected = base
            expected.sequence = sequence
            #expect(decoded == expected)
            #expect(decoded.serializedBytes() == expected.serializedBytes())
        }
    }

    @Test func eachTopicGetsTheNextNumberOfItsStream() async throws {
        let logs = CapturedLogs()
        let publisher = Publisher(name: "test", endpoint: "tcp://127.0.0.1:*", logger: logs.logger("pub"))
        try await withRunningServices([publisher], logger: logs.logger("group")) {
            let subscriber = Subscriber(endpoint: try await publisher.boundEndpoint(), prefixes: ["viewer."], logger: logs.logger("sub"))
            var events = subscriber.events.makeAsyncIterator()
            // The SUB joins asynchronously: probe until one arrives, then the stream is joined.
            let probing = Task {
                while !Task.isCancelled {
                    publisher.publish(topic: "viewer.0", method: "probe", payload: [])
                    try? await Task.sleep(for: .milliseconds(10))
                }
            }
            #expect(await events.next()?.envelope.method == "probe")
            probing.cancel()
            await probing.value
            let before = publisher.lastSequence(stream: "viewer")
            publisher.emit(topics: ["viewer.1", "viewer.2", "viewer.3"], method: "geo.Location", payload: [9, 9])
            var seen: [(String, UInt64)] = []
            while seen.count < 3, let event = await events.next() {
                guard event.envelope.method == "geo.Location" else { continue } // a probe still in flight
                #expect(event.envelope.payload == [9, 9] && event.envelope.epoch == publisher.epoch && event.envelope.kind == .event)
                seen.append((event.topic, event.envelope.sequence))
            }
            #expect(seen.map(\.0) == ["viewer.1", "viewer.2", "viewer.3"])
            #expect(seen.map(\.1) == [before + 1, before + 2, before + 3])
            await subscriber.close()
        }
    }
}
