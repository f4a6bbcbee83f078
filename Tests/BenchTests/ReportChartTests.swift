@testable import Bench
import Foundation
#if canImport(FoundationXML)
import FoundationXML
#endif
import Testing

@Suite("frienso-bench report's charts")
struct ReportChartTests {
    @Test("figures print to the digits that tell runs apart, the same in every locale",
          arguments: [
              (17_962.0, "17,962"), (1_234_567.4, "1,234,567"), (100.0, "100"), (99.94, "99.9"), (24.44, "24.4"),
              (9.5, "9.50"), (1.0, "1.00"), (0.044, "0.044"), (0.0659, "0.0659"), (0.3, "0.3"), (0.00031, "0.00031"),
              (0.0, "0"), (-2_500.0, "-2,500"),
          ])
    func numbers(value: Double, printed: String) {
        #expect(ReportChart.number(value) == printed)
    }

    @Test("notes wrap at spaces, and a word longer than a line stays whole")
    func wrapping() {
        #expect(ReportChart.wrap("aa bb cc dd", width: 5) == ["aa bb", "cc dd"])
        #expect(ReportChart.wrap("a verylongword b", width: 4) == ["a", "verylongword", "b"])
        #expect(ReportChart.wrap("", width: 10).isEmpty)
    }

    static func run(_ label: String, commits: Double, idle: Double, rate: Double) -> Results.File {
        Results.File(scenario: "stack", command: "frienso-bench stack --label \(label)", label: label, startedAt: "2026-12-04T16:36:25Z", tables: [
            Results.Table(section: "", rows: [
                Results.Row(name: "location update", inFlight: 64, requests: 1_000, p50Us: 3_914, p99Us: 7_086, p999Us: 10_461, perSecond: rate, errors: 0),
                Results.Row(name: "helpNow raise", inFlight: 64, requests: 0, p50Us: 0, p99Us: 0, p999Us: 0, perSecond: 0, errors: 0),
            ], metrics: ["commits_per_op_geo": commits, "cpu_us_per_op_media": idle, "major_faults_geo": 0]),
        ])
    }

    @Test("a figure that was 0 in every run is named in a note, not drawn; small figures keep their digits; the SVG parses")
    func chart() throws {
        let svg = try #require(ReportChart.charts([Self.run("before", commits: 0.066, idle: 0, rate: 8_977),
                                                   Self.run("after", commits: 0.044, idle: 0, rate: 9_512)])["stack.svg"])
        #expect(svg.contains("0.066") && svg.contains("0.044"))
        #expect(svg.contains("8,977 /s") && svg.contains("9,512 /s"))
        #expect(svg.contains("2 more figures were 0 in every run: cpu_us_per_op_media, major_faults_geo"))
        #expect(!svg.contains(">cpu_us_per_op_media<") && !svg.contains(">major_faults_geo<"))
        #expect(svg.contains(">commits_per_op_geo<"))
        // A path no run measured (the mix left helpNow out) is not drawn either.
        #expect(!svg.contains("helpNow raise"))
        let parser = XMLParser(data: Data(svg.utf8))
        #expect(parser.parse(), "the chart is not well-formed XML: \(String(describing: parser.parserError))")
    }

    @Test("a figure that is 0 in one run only is still drawn")
    func zeroInOneRun() throws {
        let svg = try #require(ReportChart.charts([Self.run("before", commits: 0, idle: 0, rate: 1),
                                                   Self.run("after", commits: 0.05, idle: 3, rate: 1)])["stack.svg"])
        #expect(svg.contains(">commits_per_op_geo<") && svg.contains(">cpu_us_per_op_media<"))
        #expect(svg.contains("1 more figure was 0 in every run: major_faults_geo"))
    }
}
