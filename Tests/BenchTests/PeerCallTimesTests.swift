@testable import Bench
import Testing

@Suite("stack's calls between services")
struct PeerCallTimesTests {
    /// Lines as the launcher's merged `/metrics` has them: alerts' calls, social's and geo's own
    /// requests, the gateway's record of a method it forwarded, and a bucket line.
    static func exposition(circleCalls: Int, circleSeconds: Double, circleAnswered: Int, circleInSocial: Double,
                           circleUnavailable: Int = 0) -> String {
        """
        frienso_peer_call_duration_seconds_bucket{service="alerts",method="social.CircleOf",le="0.001"} 3
        frienso_peer_call_duration_seconds_count{service="alerts",method="social.CircleOf"} \(circleCalls)
        frienso_peer_call_duration_seconds_sum{service="alerts",method="social.CircleOf"} \(circleSeconds)
        frienso_peer_call_duration_seconds_count{service="alerts",method="geo.LatestLocation"} 10
        frienso_peer_call_duration_seconds_sum{service="alerts",method="geo.LatestLocation"} 0.01
        frienso_request_duration_seconds_count{service="social",method="social.CircleOf"} \(circleAnswered)
        frienso_request_duration_seconds_sum{service="social",method="social.CircleOf"} \(circleInSocial)
        frienso_request_duration_seconds_count{service="gateway",method="social.CircleOf"} 99
        frienso_request_duration_seconds_sum{service="gateway",method="social.CircleOf"} 9.9
        frienso_peer_calls_total{service="alerts",method="social.CircleOf",status="OK"} 4
        frienso_peer_calls_total{service="alerts",method="social.CircleOf",status="UNAVAILABLE"} \(circleUnavailable)
        frienso_peer_calls_total{service="alerts",method="geo.LatestLocation",status="DEADLINE_EXCEEDED"} 2
        """
    }

    @Test("a window's calls, by caller and method, beside the answering service's own time for the method")
    func window() {
        let before = PeerCallTimes.parse(Self.exposition(circleCalls: 4, circleSeconds: 0.004, circleAnswered: 4, circleInSocial: 0.001))
        let after = PeerCallTimes.parse(Self.exposition(circleCalls: 1_004, circleSeconds: 1.204, circleAnswered: 1_004, circleInSocial: 0.301))
        #expect(before.calls[.init(service: "alerts", method: "social.CircleOf")] == .init(count: 4, seconds: 0.004))
        let window = PeerCallTimes.window(before: before, after: after)
        // geo.LatestLocation made no call in the window: it is left out.
        #expect(window.calls.count == 1)
        let circle = window.calls[.init(service: "alerts", method: "social.CircleOf")]
        #expect(circle?.count == 1_000)
        #expect(abs((circle?.meanMilliseconds ?? 0) - 1.2) < 1e-9)
        // Social's own time for the method, not the gateway's.
        #expect(abs((window.answeredMilliseconds("social.CircleOf") ?? 0) - 0.3) < 1e-9)
        #expect(window.answeredMilliseconds("geo.LatestLocation") == nil)
        #expect(window.line.hasSuffix("alerts → social.CircleOf 1000 calls, 1.20 / 0.30 ms"), "\(window.line)")
        #expect(PeerCallTimes.window(before: after, after: after).line == "- calls between services: none in the window")
        // Nothing failed in this window (geo's two expired calls were before it).
        #expect(window.failureLine == "- calls between services that did not end OK: none")
    }

    @Test("calls that did not end OK in the window are named, by caller, method and status")
    func failures() {
        let before = PeerCallTimes.parse(Self.exposition(circleCalls: 4, circleSeconds: 0.004, circleAnswered: 4, circleInSocial: 0.001,
                                                         circleUnavailable: 1))
        let after = PeerCallTimes.parse(Self.exposition(circleCalls: 10, circleSeconds: 0.01, circleAnswered: 7, circleInSocial: 0.002,
                                                        circleUnavailable: 4))
        #expect(before.failed.count == 2)
        let window = PeerCallTimes.window(before: before, after: after)
        #expect(window.failed == [.init(key: .init(service: "alerts", method: "social.CircleOf"), status: "UNAVAILABLE"): 3])
        #expect(window.failureLine == "- calls between services that did not end OK: alerts → social.CircleOf 3 UNAVAILABLE")
    }

    @Test("each operation's mean as the client saw it, in the gateway that forwarded it and in the service that answered it")
    func stages() {
        let before = PeerCallTimes.parse(Self.exposition(circleCalls: 4, circleSeconds: 0.004, circleAnswered: 4, circleInSocial: 0.001))
        let after = PeerCallTimes.parse(Self.exposition(circleCalls: 1_004, circleSeconds: 1.204, circleAnswered: 1_004, circleInSocial: 0.301)
                                        .replacingOccurrences(of: "} 99\n", with: "} 1099\n").replacingOccurrences(of: "} 9.9\n", with: "} 10.4\n"))
        let window = PeerCallTimes.window(before: before, after: after)
        #expect(abs((window.answeredMilliseconds("social.CircleOf", in: "gateway") ?? 0) - 0.5) < 1e-9)
        #expect(abs((window.answeredMilliseconds("social.CircleOf", in: "social") ?? 0) - 0.3) < 1e-9)
        let line = window.stageLine([.init(name: "circle", method: "social.CircleOf", clientMilliseconds: 1.25),
                                     .init(name: "nearby", method: "geo.Nearby", clientMilliseconds: 2)])
        #expect(line.hasSuffix("`frienso_request_duration_seconds`): circle 1.25 / 0.50 / 0.30, nearby 2.00 / ? / ?"), "\(line)")
    }
}
