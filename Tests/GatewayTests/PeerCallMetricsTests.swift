import FriensoProto
import FriensoTesting
import Prometheus
import ServiceKit
import Testing
@testable import Wire

/// What a service records of its calls to other services (`frienso_peer_call_duration_seconds`,
/// `frienso_peer_calls_total`), through the factory `ServiceMetrics.bootstrap` installs.
@Suite("peer call metrics", .timeLimit(.minutes(1)))
struct PeerCallMetricsTests {
    @Test("durations in the request histogram's buckets, calls by method and status, unnamed methods as other")
    func recordsByMethodAndStatus() throws {
        let registry = PrometheusCollectorRegistry()
        let metrics = PeerCallMetrics(factory: ServiceMetrics.factory(registry: registry, service: "alerts"))
        metrics.record(method: "social.CircleOf", status: .ok, afterNanoseconds: 300_000)
        metrics.record(method: "social.CircleOf", status: .ok, afterNanoseconds: 1_200_000)
        metrics.record(method: "social.CircleOf", status: .unavailable, afterNanoseconds: 1_000_000_000)
        metrics.record(method: "geo.LatestLocation", status: .deadlineExceeded, afterNanoseconds: 1_000_000_000)
        metrics.record(method: "no.such/Method", status: .ok, afterNanoseconds: 100_000)
        let text = registry.exposition

        let calls = exposedLines(text, startingWith: "frienso_peer_calls_total{")
        #expect(calls == [
            #"frienso_peer_calls_total{service="alerts",method="social.CircleOf",status="OK"} 2"#,
            #"frienso_peer_calls_total{service="alerts",method="social.CircleOf",status="UNAVAILABLE"} 1"#,
            #"frienso_peer_calls_total{service="alerts",method="geo.LatestLocation",status="DEADLINE_EXCEEDED"} 1"#,
            #"frienso_peer_calls_total{service="alerts",method="other",status="OK"} 1"#,
        ], "\(text)")
        let series = #"frienso_peer_call_duration_seconds_bucket{service="alerts",method="social.CircleOf",le=""#
        let circle = text.split(separator: "\n").filter { $0.hasPrefix(series) }.map { String($0.dropFirst(series.count)) }
        // The request histogram's bounds (100 µs … 10 s), not swift-prometheus's defaults.
        #expect(circle == [
            #"0.0001"} 0"#, #"0.00025"} 0"#, #"0.0005"} 1"#, #"0.001"} 1"#, #"0.0025"} 2"#, #"0.005"} 2"#,
            #"0.01"} 2"#, #"0.025"} 2"#, #"0.05"} 2"#, #"0.1"} 2"#, #"0.25"} 2"#, #"0.5"} 2"#,
            #"1.0"} 3"#, #"2.5"} 3"#, #"5.0"} 3"#, #"10.0"} 3"#, #"+Inf"} 3"#,
        ], "\(text)")
        #expect(text.contains(#"frienso_peer_call_duration_seconds_count{service="alerts",method="other"} 1"#), "\(text)")
        #expect(text.contains("# TYPE frienso_peer_call_duration_seconds histogram"), "\(text)")
        #expect(MetricCatalog.help[PeerCallMetrics.durationLabel] != nil && MetricCatalog.help[PeerCallMetrics.callsLabel] != nil)
    }

    @Test("a client's typed calls are recorded as its caller saw them: answered by the peer, or failed by the client")
    func aClientsCallsAreRecorded() async throws {
        let logs = CapturedLogs()
        let registry = PrometheusCollectorRegistry()
        let options = Self.recording(into: registry)
        let host = ServiceHost(options: HostOptions(name: "accounts", endpoint: "tcp://127.0.0.1:*"), handler: MethodRouter(),
                               logger: logs.logger("accounts"))
        let endpoint = try await withRunningServices([host], logger: logs.logger("group")) {
            let endpoint = try await host.boundEndpoint()
            let client = WireClient(endpoint: endpoint, options: options, logger: logs.logger("client"))
            for _ in 0..<3 { _ = try await client.ping(service: "accounts") }
            await client.close()
            return endpoint
        }
        // The same method at the endpoint nobody serves any more: the client's own error.
        let gone = WireClient(endpoint: endpoint, options: options, logger: logs.logger("gone"))
        let failure = await #expect(throws: RPCError.self) { try await gone.ping(service: "accounts", deadline: .milliseconds(300)) }
        await gone.close()
        let code = try #require(failure?.code)
        #expect(code == .unavailable || code == .deadlineExceeded, "\(String(describing: failure))")

        let text = registry.exposition
        #expect(text.contains(#"frienso_peer_calls_total{service="alerts",method="accounts.Ping",status="OK"} 3"#), "\(text)\n\(logs.dump())")
        #expect(text.contains(#"frienso_peer_calls_total{service="alerts",method="accounts.Ping",status="\#(RequestMetrics.label(code))"} 1"#),
                "\(text)\n\(logs.dump())")
        #expect(text.contains(#"frienso_peer_call_duration_seconds_count{service="alerts",method="accounts.Ping"} 4"#), "\(text)")
    }

    @Test("a call its caller cancels is not recorded: it says nothing of the peer")
    func aCancelledCallIsNotRecorded() async throws {
        let logs = CapturedLogs()
        let registry = PrometheusCollectorRegistry()
        let options = Self.recording(into: registry)
        let hold = RPCMethod<CommonV1.PingRequest, CommonV1.PingResponse>(service: "accounts", name: "Hold", access: .public)
        let (arrivals, arrived) = AsyncStream<Void>.makeStream()
        var router = MethodRouter()
        router.register(hold) { _, _ in
            arrived.yield()
            try await Task.sleep(for: .seconds(30)) // a peer slower than the caller's patience
            return CommonV1.PingResponse()
        }
        var hostOptions = HostOptions(name: "accounts", endpoint: "tcp://127.0.0.1:*")
        hostOptions.drainTimeout = .milliseconds(50) // the held handler is not waited for at the end
        let host = ServiceHost(options: hostOptions, handler: router, logger: logs.logger("accounts"))
        try await withRunningServices([host], logger: logs.logger("group")) {
            let client = WireClient(endpoint: try await host.boundEndpoint(), options: options, logger: logs.logger("client"))
            let call = Task { try await client.call(hold, CommonV1.PingRequest(), options: CallOptions(deadline: .seconds(60))) }
            for await _ in arrivals { break } // the host has it: the call is in flight
            call.cancel()
            let failure = await #expect(throws: RPCError.self) { _ = try await call.value }
            #expect(failure?.code == .unavailable, "answered by the client, as it always was")
            _ = try await client.ping(service: "accounts")
            await client.close()
        }
        let text = registry.exposition
        // Recorded, it would be an UNAVAILABLE call (of method "other": `Hold` is no known method).
        #expect(!text.contains(#"status="UNAVAILABLE""#) && !text.contains(#"method="other""#), "\(text)")
        #expect(text.contains(#"frienso_peer_calls_total{service="alerts",method="accounts.Ping",status="OK"} 1"#), "\(text)\n\(logs.dump())")
    }

    /// A patient client's options that record its calls as alerts' in `registry`.
    static func recording(into registry: PrometheusCollectorRegistry) -> ClientOptions {
        var options = ClientOptions.patient
        options.metrics = PeerCallMetrics(factory: ServiceMetrics.factory(registry: registry, service: "alerts"))
        return options
    }
}
