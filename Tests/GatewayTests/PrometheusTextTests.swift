import Launcher
import Testing

/// The launcher's merge of members' expositions: one HELP and TYPE per family, a family's samples
/// together (histogram series included), help added from the catalog where a member gave none.
@Suite struct PrometheusTextTests {
    @Test func mergesFamiliesAcrossMembers_keepingHistogramsTogether() {
        let accounts = """
            # TYPE frienso_requests_total counter
            frienso_requests_total{service="accounts",method="accounts.Ping",status="OK"} 3
            # TYPE frienso_request_duration_seconds histogram
            frienso_request_duration_seconds_bucket{service="accounts",method="accounts.Ping",le="0.001"} 3
            frienso_request_duration_seconds_bucket{service="accounts",method="accounts.Ping",le="+Inf"} 3
            frienso_request_duration_seconds_sum{service="accounts",method="accounts.Ping"} 0.0004
            frienso_request_duration_seconds_count{service="accounts",method="accounts.Ping"} 3

            """
        let geo = """
            # HELP process_threads Threads.
            # TYPE process_threads gauge
            process_threads{service="geo"} 9
            # TYPE frienso_requests_total counter
            frienso_requests_total{service="geo",method="geo.Ping",status="OK"} 1

            """
        let merged = PrometheusText.merge([accounts, geo], help: ["frienso_requests_total": "Requests answered."])
        #expect(merged == """
            # HELP frienso_requests_total Requests answered.
            # TYPE frienso_requests_total counter
            frienso_requests_total{service="accounts",method="accounts.Ping",status="OK"} 3
            frienso_requests_total{service="geo",method="geo.Ping",status="OK"} 1
            # TYPE frienso_request_duration_seconds histogram
            frienso_request_duration_seconds_bucket{service="accounts",method="accounts.Ping",le="0.001"} 3
            frienso_request_duration_seconds_bucket{service="accounts",method="accounts.Ping",le="+Inf"} 3
            frienso_request_duration_seconds_sum{service="accounts",method="accounts.Ping"} 0.0004
            frienso_request_duration_seconds_count{service="accounts",method="accounts.Ping"} 3
            # HELP process_threads Threads.
            # TYPE process_threads gauge
            process_threads{service="geo"} 9

            """)
    }

    @Test func escapesLabelValues() {
        #expect(PrometheusText.escape("a\"b\\c\nd") == #"a\"b\\c\nd"#)
    }
}
