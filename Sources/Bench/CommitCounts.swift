import Foundation
import Launcher

/// A service's group commits over a window, from the deployment's merged metrics
/// (`frienso_group_commit_items` and `frienso_group_commit_duration_seconds`, summed over its
/// queues): how many commits (each one transaction and one `fdatasync` on SQLite), how many
/// items they carried, and the seconds they took. `stack` prints them per operation beside the
/// KiB written (`docs/benchmarks.md`, issue 16, item 90): the commits and their items are counts
/// the VM's speed changes little; the mean commit is a time, and moves with it.
struct CommitCounts: Equatable, Sendable {
    var commits: Double = 0
    var items: Double = 0
    var seconds: Double = 0

    /// Per service (its `service` label), from a Prometheus text exposition; services without a
    /// group commit are absent.
    static func parse(_ exposition: String) -> [String: CommitCounts] {
        var found: [String: CommitCounts] = [:]
        for sample in ExpositionSample.samples(exposition, prefixes: ["frienso_group_commit_"]) {
            guard let service = sample.label("service") else { continue }
            switch sample.name {
            case "frienso_group_commit_items_count": found[service, default: CommitCounts()].commits += sample.value
            case "frienso_group_commit_items_sum": found[service, default: CommitCounts()].items += sample.value
            case "frienso_group_commit_duration_seconds_sum": found[service, default: CommitCounts()].seconds += sample.value
            default: break
            }
        }
        return found
    }

    /// Commits per operation, of `operations` in the window.
    func perOperation(_ operations: Int) -> Double { commits / Double(max(1, operations)) }
    /// Items each commit carried, on average.
    var itemsPerCommit: Double { items / max(1, commits) }
    /// The mean commit, in milliseconds.
    var meanMilliseconds: Double { seconds / max(1, commits) * 1e3 }

    /// What happened between two readings.
    static func - (after: CommitCounts, before: CommitCounts) -> CommitCounts {
        CommitCounts(commits: after.commits - before.commits, items: after.items - before.items, seconds: after.seconds - before.seconds)
    }

    /// The window's commits per service: `after` minus `before`, for services that committed.
    static func window(before: [String: CommitCounts], after: [String: CommitCounts]) -> [String: CommitCounts] {
        after.reduce(into: [:]) { result, entry in
            let delta = entry.value - (before[entry.key] ?? CommitCounts())
            if delta.commits > 0 { result[entry.key] = delta }
        }
    }
}

extension Deployment {
    /// The whole deployment's metrics so far, from the launcher's metrics port (nil when it
    /// cannot be read: the report then says so instead of printing zeros).
    func metricsText() -> String? {
        guard let endpoint = (try? LaunchStatus.read(run))?.metricsEndpoint, endpoint.hasSuffix("/metrics"),
              let answer = HTTPProbe.get(String(endpoint.dropLast("/metrics".count)), path: "/metrics", timeout: .seconds(5)),
              answer.status == 200 else { return nil }
        return answer.body
    }
}
