import CoreMetrics
import CoreMetrics
import FriensoProto

/// What a host records of every request it answers, through swift-metrics (an executable
/// bootstraps the Prometheus backend, which adds the `service` label; in tests the default no-op
/// backend records nothing):
/// - `frienso_requests_total{method,status}`: every reply, by the method asked and the status
///   answered (refusals, busy, shutting down and expired deadlines included);
/// - `frienso_request_duration_seconds{method}`: from the request's arrival to its reply;
/// - `frienso_requests_in_flight`: requests accepted and not answered yet (the host's queue).
///
/// A method no contract names is recorded as `other`: a client picks the method name, and must
/// not pick the series. Confined to the host's reactor thread, so no lock; the metric handles are
/// made once per method and status, not per request.
final class RequestMetrics {
    /// Unchecked exclusivity: confined to one thread, and no access encloses another (see
    /// `HostLoop`'s note).
    private struct PerMethod {
        let label: String
        let duration: CoreMetrics.Timer
        var byStatus: [Int32: Counter] = [:]
    }

    @exclusivity(unchecked) private var methods: [String: PerMethod] = [:]
    private let inFlight = Gauge(label: "frienso_requests_in_flight")

    init() {}

    func answered(method: String, status: StatusCode, after elapsed: Duration) {
        let nanoseconds = elapsed.wholeNanoseconds
        // The usual case: one lookup for the method, one for the status.
        if let entry = methods[method], let counter = entry.byStatus[status.rawValue] {
            counter.increment()
            entry.duration.recordNanoseconds(nanoseconds)
            return
        }
        let key = methods[method] != nil || MethodLabels.known.contains(method) ? method : "other"
        var entry = methods[key] ?? PerMethod(
            label: key, duration: CoreMetrics.Timer(label: "frienso_request_duration_seconds", dimensions: [("method", key)]))
        let counter: Counter
        if let known = entry.byStatus[status.rawValue] {
            counter = known
        } else {
            counter = Counter(label: "frienso_requests_total", dimensions: [("method", key), ("status", Self.label(status))])
            entry.byStatus[status.rawValue] = counter
            methods[key] = entry
        }
        counter.increment()
        entry.duration.recordNanoseconds(nanoseconds)
    }

    func inFlight(_ count: Int) {
        inFlight.record(count)
    }

    /// `STATUS_CODE_NOT_FOUND` → `NOT_FOUND`.
    static func label(_ status: StatusCode) -> String {
        let name = status.protoName
        return name.hasPrefix("STATUS_CODE_") ? String(name.dropFirst("STATUS_CODE_".count)) : name
    }
}

/// The method names a metric label may carry: every contract method, every member's `Ping` and
/// `Metrics`, and the gateway's own.
public enum MethodLabels {
    public static let known: Set<String> = {
        var names = Set(ProtoIndex.methods.map(\.fullName))
        for member in Set(ProtoIndex.methods.map(\.service)).union(["gateway", "edge"]) {
            names.insert("\(member).Ping")
            names.insert("\(member).Metrics")
        }
        names.insert(CommonMethods.subscribe.fullName)
        names.insert(CommonMethods.unsubscribe.fullName)
        return names
    }()
}
