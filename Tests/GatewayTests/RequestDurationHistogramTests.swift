import Foundation
import Prometheus
import ServiceKit
import Testing
@testable import Wire

/// A host's request metrics through the factory `ServiceMetrics.bootstrap` installs: the
/// duration histogram is recorded in seconds (a `Double` histogram since item 99) and must render
/// as the `Duration` histogram did, bucket bounds included, so dashboards and the launcher's merge
/// see the same series.
@Suite struct RequestDurationHistogramTests {
    @Test func durationsRenderInTheBucketsTheDurationHistogramHad() async throws {
        let registry = PrometheusCollectorRegistry()
        let metrics = RequestMetrics(factory: ServiceMetrics.factory(registry: registry, service: "accounts"))
        // On a bound (≤ counts), inside a bucket, past the last bound, and a second method.
        metrics.answered(method: "accounts.Ping", status: .ok, after: .microseconds(100))
        metrics.answered(method: "accounts.Ping", status: .ok, after: .microseconds(300))
        metrics.answered(method: "accounts.Ping", status: .notFound, after: .seconds(12))
        metrics.answered(method: "accounts.Register", status: .ok, after: .milliseconds(2))
        let text = registry.exposition

        let series = #"frienso_request_duration_seconds_bucket{service="accounts",method="accounts.Ping",le=""#
        let ping = text.split(separator: "\n").filter { $0.hasPrefix(series) }.map { String($0.dropFirst(series.count)) }
        #expect(ping == [
            #"0.0001"} 1"#, #"0.00025"} 1"#, #"0.0005"} 2"#, #"0.001"} 2"#, #"0.0025"} 2"#, #"0.005"} 2"#,
            #"0.01"} 2"#, #"0.025"} 2"#, #"0.05"} 2"#, #"0.1"} 2"#, #"0.25"} 2"#, #"0.5"} 2"#,
            #"1.0"} 2"#, #"2.5"} 2"#, #"5.0"} 2"#, #"10.0"} 2"#, #"+Inf"} 3"#,
        ], "\(text)")
        // The bounds as the `Duration` buckets render them (what the histogram was before item 99).
        #expect(ServiceMetrics.durationBuckets.map(\.bucketRepresentation) + ["+Inf"]
                == ping.map { String($0.prefix { $0 != "\"" }) })
        #expect(text.contains(#"frienso_request_duration_seconds_count{service="accounts",method="accounts.Ping"} 3"#), "\(text)")
        let sumPrefix = #"frienso_request_duration_seconds_sum{service="accounts",method="accounts.Ping"} "#
        let sum = try #require(text.split(separator: "\n").first { $0.hasPrefix(sumPrefix) }.flatMap { Double($0.dropFirst(sumPrefix.count)) })
        #expect(abs(sum - 12.0004) < 1e-9, "\(sum)")
        #expect(text.contains(#"frienso_request_duration_seconds_bucket{service="accounts",method="accounts.Register",le="0.001"} 0"#), "\(text)")
        #expect(text.contains(#"frienso_request_duration_seconds_bucket{service="accounts",method="accounts.Register",le="0.0025"} 1"#), "\(text)")
        #expect(text.contains(#"# TYPE frienso_request_duration_seconds histogram"#), "\(text)")
        #expect(text.contains(#"frienso_requests_total{service="accounts",method="accounts.Ping",status="NOT_FOUND"} 1"#), "\(text)")
    }

    /// `frienso_requests_total` by method and status: the counters are kept by status code in a
    /// table indexed by its raw value since item 105, with codes past the contract's apart.
    @Test func repliesAreCountedByMethodAndStatus_unnamedMethodsAsOther() async throws {
        let registry = PrometheusCollectorRegistry()
        let metrics = RequestMetrics(factory: ServiceMetrics.factory(registry: registry, service: "geo"))
        let replies: [(String, StatusCode)] = [
            ("geo.Ping", .ok), ("geo.Ping", .ok), ("geo.Ping", .ok),
            ("geo.Ping", .internal),                                // a status after the method's first
            ("geo.Ping", .unspecified),                             // raw value 0
            ("geo.Ping", .unrecognized(42)), ("geo.Ping", .unrecognized(42)), ("geo.Ping", .unrecognized(-1)), // past the contract's codes
            ("no.such/Method", .invalidArgument), ("another.unknown/One", .invalidArgument), ("another.unknown/One", .ok),
        ]
        for (method, status) in replies { metrics.answered(method: method, status: status, after: .microseconds(50)) }
        let text = registry.exposition
        let totals = exposedLines(text, startingWith: "frienso_requests_total{")
        #expect(totals == [
            #"frienso_requests_total{service="geo",method="geo.Ping",status="OK"} 3"#,
            #"frienso_requests_total{service="geo",method="geo.Ping",status="INTERNAL"} 1"#,
            #"frienso_requests_total{service="geo",method="geo.Ping",status="UNSPECIFIED"} 1"#,
            #"frienso_requests_total{service="geo",method="geo.Ping",status="42"} 2"#,
            #"frienso_requests_total{service="geo",method="geo.Ping",status="-1"} 1"#,
            #"frienso_requests_total{service="geo",method="other",status="INVALID_ARGUMENT"} 2"#,
            #"frienso_requests_total{service="geo",method="other",status="OK"} 1"#,
        ], "\(text)")
        #expect(text.contains(#"frienso_request_duration_seconds_count{service="geo",method="geo.Ping"} 8"#), "\(text)")
        #expect(text.contains(#"frienso_request_duration_seconds_count{service="geo",method="other"} 3"#), "\(text)")
    }
}
