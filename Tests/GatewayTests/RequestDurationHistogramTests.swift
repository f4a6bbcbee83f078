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
        var buffer: [UInt8] = []
        registry.emit(into: &buffer)
        let text = String(decoding: buffer, as: UTF8.self)

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
}
