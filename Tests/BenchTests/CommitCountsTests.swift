@testable import Bench
import Foundation
import Testing

@Suite("stack's group commit counts")
struct CommitCountsTests {
    /// Lines as the launcher's merged `/metrics` has them (taken from a `stack` run), with a
    /// second queue for geo and a bucket line that must not count.
    static let earlier = """
        # HELP frienso_group_commit_items Items written per group commit (one transaction and one fsync each).
        # TYPE frienso_group_commit_items histogram
        frienso_group_commit_items_bucket{service="geo",queue="service-database-writes",le="1.0"} 900
        frienso_group_commit_items_sum{service="geo",queue="service-database-writes"} 7000.0
        frienso_group_commit_items_count{service="geo",queue="service-database-writes"} 1000
        frienso_group_commit_items_sum{service="geo",queue="reply-store"} 10.0
        frienso_group_commit_items_count{service="geo",queue="reply-store"} 5
        frienso_group_commit_duration_seconds_sum{service="geo",queue="service-database-writes"} 0.7
        frienso_group_commit_duration_seconds_sum{service="geo",queue="reply-store"} 0.005
        frienso_group_commit_items_sum{service="social",queue="service-database-writes"} 1647.0
        frienso_group_commit_items_count{service="social",queue="service-database-writes"} 66
        frienso_group_commit_duration_seconds_sum{service="social",queue="service-database-writes"} 0.02
        frienso_request_duration_seconds_count{service="geo",method="geo.Nearby"} 11015
        """

    @Test("commits, items and seconds are summed over a service's queues; other families and buckets are not read")
    func parsesEachServicesCommits() {
        let counts = CommitCounts.parse(Self.earlier)
        #expect(counts["geo"] == CommitCounts(commits: 1_005, items: 7_010, seconds: 0.705))
        #expect(counts["social"] == CommitCounts(commits: 66, items: 1_647, seconds: 0.02))
        #expect(counts.count == 2)
    }

    @Test("a window keeps the services that committed in it, and the line reads per operation")
    func windowAndLine() {
        let later = Self.earlier
            .replacingOccurrences(of: "} 7000.0", with: "} 9000.0")
            .replacingOccurrences(of: "\"service-database-writes\"} 1000", with: "\"service-database-writes\"} 1250")
            .replacingOccurrences(of: "\"service-database-writes\"} 0.7", with: "\"service-database-writes\"} 0.9")
        let window = CommitCounts.window(before: CommitCounts.parse(Self.earlier), after: CommitCounts.parse(later))
        #expect(window.keys.sorted() == ["geo"], "social made no commit in the window")
        let geo = window["geo"]
        #expect(geo?.commits == 250)
        #expect(geo?.items == 2_000)
        #expect(abs((geo?.seconds ?? 0) - 0.2) < 1e-9)
        let line = StackScenario.commitLine(window, operations: 5_000)
        #expect(line.contains("geo 0.050 (8.00 items each, 0.80 ms)"), "\(line)")
        #expect(StackScenario.commitLine(nil, operations: 5_000).contains("not read"))
        #expect(StackScenario.commitLine([:], operations: 5_000).contains("none in the window"))
    }
}
