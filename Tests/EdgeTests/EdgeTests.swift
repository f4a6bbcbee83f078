@testable import Edge
import FriensoProto
import Gateway
import Testing
import Wire

@Suite("edge: the pure parts (no socket)")
struct EdgeUnitTests {
    @Test("a WebSocket is pinged at the heartbeat's period, never under 10 s (the pong's deadline is the period)")
    func pingPeriod() {
        var config = EdgeConfig(core: GatewayConfig(endpoint: "tcp://127.0.0.1:1", services: [:]), listen: "127.0.0.1:0")
        #expect(config.pingPeriod == .seconds(15))
        config.heartbeat = .seconds(1)
        #expect(config.pingPeriod == .seconds(10))
        config.heartbeat = .seconds(40)
        #expect(config.pingPeriod == .seconds(40))
    }

    @Test("every StatusCode has one HTTP status and a JSON body with its number and name")
    func errorMapping() {
        let expected: [(StatusCode, Int)] = [
            (.ok, 200), (.invalidArgument, 400), (.unauthenticated, 401), (.permissionDenied, 403), (.notFound, 404),
            (.alreadyExists, 409), (.failedPrecondition, 412), (.resourceExhausted, 429), (.unavailable, 503),
            (.deadlineExceeded, 504), (.internal, 500), (.unspecified, 500), (.unrecognized(99), 500),
        ]
        for (code, status) in expected { #expect(ErrorMapping.httpStatus(code) == status, "\(code)") }
        #expect(Set(StatusCode.allKnownCases.map(ErrorMapping.httpStatus)).count == 11)
        #expect(ErrorMapping.body(.notFound, "no such photo").rendered() == #"{"code":5,"name":"NOT_FOUND","message":"no such photo"}"#)
        #expect(ErrorMapping.body(.unrecognized(99), "odd").rendered() == #"{"code":11,"name":"INTERNAL","message":"odd"}"#)
    }

    @Test("Authorization: the Bearer scheme in any case, then a space; the token without the blanks around it")
    func bearerTokens() {
        let tokens: [(String, String?)] = [
            ("Bearer abc", "abc"), ("bearer abc", "abc"), ("BEARER   abc \t ", "abc"), ("  Bearer abc", "abc"),
            ("Bearer a b", "a b"), ("Bearer tök", "tök"),
            ("Bearer", nil), ("Bearer ", nil), ("Bearer \t", nil), ("Bearer\tabc", nil), ("Bearerabc", nil),
            ("Basic abc", nil), ("Béarer abc", nil), ("", nil), ("Bear abc", nil),
        ]
        for (header, token) in tokens { #expect(EdgeRoutes.bearer(header) == token, "\(header)") }
    }

    @Test("listen addresses: http, https, tcp, IPv6, port 0; anything else refused")
    func addresses() throws {
        func address(_ text: String) throws -> (String, Int) {
            try EdgeConfig(core: GatewayConfig(endpoint: "", services: [:]), listen: text).address()
        }
        #expect(try address("http://127.0.0.1:8080") == ("127.0.0.1", 8080))
        #expect(try address("https://example.org:443/") == ("example.org", 443))
        #expect(try address("tcp://[::1]:0") == ("::1", 0))
        for bad in ["127.0.0.1", "http://:80", "http://host:99999", "http://host:x"] {
            #expect(throws: EdgeConfigError.self, "\(bad)") { try address(bad) }
        }
    }

    @Test("live events: numbered per user, to every connection of that user only")
    func fanOut() async {
        let hub = EventHub()
        let a1 = hub.connect(user: 1, resume: nil), a2 = hub.connect(user: 1, resume: nil), b = hub.connect(user: 2, resume: nil)
        #expect(a1.start == .live(sequence: 0) && a1.epoch == a2.epoch && a1.epoch != b.epoch)
        #expect(hub.publish(user: 1, event: "geo.Location", data: .object([("userId", .string("7"))])) == 1)
        #expect(hub.publish(user: 1, event: "social.Poke", data: .object([])) == 2)
        #expect(hub.publish(user: 3, event: "social.Poke", data: .object([])) == nil) // not connected here
        hub.disconnect(user: 1, id: a1.id)
        hub.disconnect(user: 1, id: a2.id)
        hub.disconnect(user: 2, id: b.id)
        for connection in [a1, a2] {
            var frames: [String] = []
            for await frame in connection.frames { frames.append(frame) }
            #expect(frames.count == 2)
            #expect(frames.first == #"{"type":"event","epoch":"\#(a1.epoch)","sequence":1,"event":"geo.Location","data":{"userId":"7"}}"#)
        }
        var others = 0
        for await _ in b.frames { others += 1 }
        #expect(others == 0)
    }

    @Test("resuming: what was missed is replayed once, in order; otherwise reset")
    func resume() async {
        let hub = EventHub(logCapacity: 3, resumeWindow: .seconds(30))
        let first = hub.connect(user: 1, resume: nil)
        for i in 1...2 { hub.publish(user: 1, event: "geo.Location", data: .number(Double(i))) }
        let start = ContinuousClock.now
        hub.disconnect(user: 1, id: first.id, now: start)
        hub.publish(user: 1, event: "geo.Location", data: .number(3)) // while away
        // Resuming after 2: event 3 replayed, then live.
        let back = hub.connect(user: 1, resume: (first.epoch, 2), now: start.advanced(by: .seconds(1)))
        guard case .replay(let missed, let last) = back.start else { Issue.record("expected a replay, got \(back.start)"); return }
        #expect(missed.count == 1 && missed[0].contains(#""sequence":3"#) && last == 3)
        hub.publish(user: 1, event: "geo.Location", data: .number(4))
        hub.disconnect(user: 1, id: back.id, now: start.advanced(by: .seconds(2)))
        var live: [String] = []
        for await frame in back.frames { live.append(frame) }
        #expect(live.count == 1 && live[0].contains(#""sequence":4"#))
        // Nothing missed: live at once. A wrong epoch, a future sequence, or a gap past the log: reset.
        #expect(hub.connect(user: 1, resume: (first.epoch, 4)).start == .live(sequence: 4))
        #expect(hub.connect(user: 1, resume: (first.epoch &+ 1, 4)).start == .reset(sequence: 4))
        #expect(hub.connect(user: 1, resume: (first.epoch, 9)).start == .reset(sequence: 4))
        #expect(hub.connect(user: 1, resume: (first.epoch, 0)).start == .reset(sequence: 4)) // the log keeps 2...4 only
    }

    @Test("past the resume window a user's log is gone: a new numbering, and resuming resets")
    func window() {
        let hub = EventHub(resumeWindow: .seconds(10))
        let start = ContinuousClock.now
        let first = hub.connect(user: 1, resume: nil, now: start)
        hub.publish(user: 1, event: "social.Poke", data: .object([]))
        hub.disconnect(user: 1, id: first.id, now: start)
        #expect(hub.sweep(now: start.advanced(by: .seconds(5))) == 0)
        #expect(hub.sweep(now: start.advanced(by: .seconds(11))) == 1)
        let later = hub.connect(user: 1, resume: (first.epoch, 1), now: start.advanced(by: .seconds(12)))
        #expect(later.epoch != first.epoch && later.start == .reset(sequence: 0))
        // Not swept yet, but past the window when the client comes back: the same.
        hub.disconnect(user: 1, id: later.id, now: start.advanced(by: .seconds(12)))
        let again = hub.connect(user: 1, resume: (later.epoch, 0), now: start.advanced(by: .seconds(40)))
        #expect(again.epoch != later.epoch && again.start == .reset(sequence: 0))
    }

    @Test("a connection that does not read is cut loose, and the others keep their events")
    func slowConsumer() async {
        let hub = EventHub(queueCapacity: 2)
        let slow = hub.connect(user: 1, resume: nil)
        for i in 1...3 { hub.publish(user: 1, event: "geo.Location", data: .number(Double(i))) }
        var got = 0
        for await _ in slow.frames { got += 1 } // ended by the hub: the third did not fit
        #expect(got == 2 && hub.connectionCount == 0)
        let next = hub.connect(user: 1, resume: (slow.epoch, 2))
        guard case .replay(let missed, _) = next.start else { Issue.record("expected a replay"); return }
        #expect(missed.count == 1)
    }

    @Test("the events the gateway relays are all known here, as their messages' JSON")
    func liveEvents() throws {
        #expect(LiveEvents.methods == ["alerts.Event", "geo.FriendNearby", "geo.Location", "geo.PlaceAlert", "social.Poke"])
        let event = GeoV1.LocationEvent(userId: 5, status: "here")
        let text = try #require(LiveEvents.json(Envelope(method: "geo.Location", payload: event.serializedBytes())))
        #expect(text == event.jsonValue.utf8())
        let json = try JSONParser.parse(String(decoding: text, as: UTF8.self))
        #expect(json["userId"] == .string("5") && json["status"] == .string("here"))
        #expect(LiveEvents.json(Envelope(method: "geo.Unknown", payload: [])) == nil)
    }
}
