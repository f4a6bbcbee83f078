import CoreMetrics
import FriensoProto

/// A method's metric handles: its duration recorder, and its counters by status code. A class:
/// the lookup on every reply or call hands out one reference, where a struct was copied out of
/// the table whole (its handler and its table of counters each retained and released again: about
/// 200 instructions a reply, item 105). Unchecked exclusivity: each owner touches it from one
/// thread at a time (`RequestMetrics` from its host's reactor, `PeerCallMetrics` under its lock),
/// and no access encloses another.
final class MethodMetricHandles {
    /// The backend's handler itself: `Recorder.record`'s generic conversion to `Double` was
    /// not specialized here and cost 300 instructions a request (dynamic casts included).
    let duration: any RecorderHandler
    /// By status code, indexed by its raw value: the contract's codes are 0 to 11, so a
    /// reply's counter is found without hashing (a `[Int32: Counter]` lookup was about 115
    /// instructions a reply). A code past them (`.unrecognized`) goes to `otherStatuses`.
    @exclusivity(unchecked) var byStatus: [Counter?] = Array(repeating: nil, count: StatusCode.allKnownCases.count)
    @exclusivity(unchecked) var otherStatuses: [Int32: Counter] = [:]

    init(duration: any RecorderHandler) {
        self.duration = duration
    }

    func counter(_ status: StatusCode) -> Counter? {
        let index = Int(status.rawValue)
        return byStatus.indices.contains(index) ? byStatus[index] : otherStatuses[status.rawValue]
    }

    func setCounter(_ counter: Counter, for status: StatusCode) {
        let index = Int(status.rawValue)
        if byStatus.indices.contains(index) { byStatus[index] = counter } else { otherStatuses[status.rawValue] = counter }
    }
}

/// What a host records of every request it answers, through swift-metrics (an executable
/// bootstraps the Prometheus backend, which adds the `service` label; in tests the default no-op
/// backend records nothing):
/// - `frienso_requests_total{method,status}`: every reply, by the method asked and the status
///   answered (refusals, busy, shutting down and expired deadlines included);
/// - `frienso_request_duration_seconds{method}`: from the request's arrival to its reply, a
///   histogram of seconds (an aggregating recorder of `Double`s, not a `Timer`: see `answered`);
/// - `frienso_requests_in_flight`: requests accepted and not answered yet (the host's queue);
/// - `frienso_batch_frames_total{direction}`: batch frames taken (`in`) and replies sent in
///   batches (`out`, one per frame of several replies; `WireBatch`).
///
/// A method no contract names is recorded as `other`: a client picks the method name, and must
/// not pick the series. Confined to the host's reactor thread, so no lock; the metric handles are
/// made once per method and status, not per request.
final class RequestMetrics {
    /// By `KnownMethod` ordinal: a reply's entry is found without hashing its method's name
    /// (a `[String: MethodMetricHandles]` lookup was about 390 instructions a reply, item 110); any other
    /// name is recorded as `other`. Unchecked exclusivity: confined to one thread, and no access
    /// encloses another (see `HostLoop`'s note).
    @exclusivity(unchecked) private var methods: [MethodMetricHandles?] = Array(repeating: nil, count: KnownMethod.count)
    @exclusivity(unchecked) private var other: MethodMetricHandles?
    private let factory: any MetricsFactory
    private let inFlight: Gauge
    let batchesIn: Counter, batchesOut: Counter

    /// - Parameter factory: the metrics backend (the process's bootstrapped one; a test passes its own).
    init(factory: any MetricsFactory = MetricsSystem.factory) {
        self.factory = factory
        inFlight = Gauge(label: "frienso_requests_in_flight", factory: factory)
        batchesIn = Counter(label: "frienso_batch_frames_total", dimensions: [("direction", "in")], factory: factory)
        batchesOut = Counter(label: "frienso_batch_frames_total", dimensions: [("direction", "out")], factory: factory)
    }

    /// The duration goes to the histogram as seconds (`RequestDuration.seconds`), through an
    /// aggregating recorder: swift-prometheus keeps a `Timer` in a histogram of `Duration`s, whose `record`
    /// compares the value with each of the 16 buckets through a call into the runtime
    /// (`Duration.<`, not inlined): about 750 of the 940 instructions a request's metrics cost
    /// (item 99).
    /// A `Double` histogram compares inline; the buckets' bounds and their rendering are the same
    /// (`ServiceMetrics.requestDurationBuckets`).
    func answered(method: String, status: StatusCode, after elapsed: Duration) {
        answered(method: method, known: KnownMethod(method), status: status, afterNanoseconds: elapsed.wholeNanoseconds)
    }

    /// The same, the method found already (`known`: `method` in `KnownMethod`'s index, nil for a
    /// name this build does not know) and the time taken in nanoseconds (a host's moments
    /// subtracted: no `Duration` made).
    func answered(method: String, known: KnownMethod?, status: StatusCode, afterNanoseconds elapsed: Int64) {
        assert(known == KnownMethod(method), "\(method) recorded with another method's ordinal")
        let seconds = RequestDuration.seconds(nanoseconds: elapsed)
        let entry = known.map { methods[$0.ordinal] } ?? other
        // The usual case: the method's handles made already, and the status's.
        if let entry, let counter = entry.counter(status) {
            counter.increment()
            entry.duration.record(seconds)
            return
        }
        let label = known?.name ?? "other"
        let made: MethodMetricHandles
        if let entry {
            made = entry
        } else {
            made = MethodMetricHandles(duration: factory.makeRecorder(label: RequestDuration.label, dimensions: [("method", label)], aggregate: true))
            if let known { methods[known.ordinal] = made } else { other = made }
        }
        let counter = Counter(label: "frienso_requests_total", dimensions: [("method", label), ("status", Self.label(status))], factory: factory)
        made.setCounter(counter, for: status)
        counter.increment()
        made.duration.record(seconds)
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

/// The request-duration histogram's name and unit, shared with the backend's configuration
/// (`ServiceMetrics` gives this label its buckets).
public enum RequestDuration {
    public static let label = "frienso_request_duration_seconds"

    /// `duration` in seconds, as the histogram records it: whole nanoseconds divided once, so a
    /// bucket's bound made by the same function from the same duration compares equal to it.
    @inlinable public static func seconds(_ duration: Duration) -> Double {
        seconds(nanoseconds: duration.wholeNanoseconds)
    }

    @inlinable public static func seconds(nanoseconds: Int64) -> Double {
        Double(nanoseconds) / 1_000_000_000
    }
}

/// The method names a metric label may carry: every contract method, every member's `Ping` and
/// `Metrics`, and the gateway's own.
public enum MethodLabels {
    public static let known: Set<String> = Set(KnownMethod.names)
}
