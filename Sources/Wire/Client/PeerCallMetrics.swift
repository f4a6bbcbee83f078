public import CoreMetrics
import FriensoProto
import Synchronization

/// What a process records of each typed call it makes to a peer (`WireClient.call`: one service
/// asking another, as alerts asks social and geo for a helpNow's circle and location), through
/// swift-metrics:
/// - `frienso_peer_call_duration_seconds{method}`: from the call to its answer as the caller
///   sees it: the peer's work (`frienso_request_duration_seconds` on the peer), both hops and
///   the caller's resumption. The difference between the two is what crossing processes cost,
///   which the peer's own metrics cannot show (item 88 needed a build with timers for it);
/// - `frienso_peer_calls_total{method,status}`: by the status the caller got, the client's own
///   UNAVAILABLE and DEADLINE_EXCEEDED included: a peer that is down or slow shows here, where
///   its own metrics are silent.
///
/// The gateway's forwarded requests do not come here (`relayOnReactor`): the gateway's host
/// records them as its requests. A method no contract names is recorded as `other`. Any thread
/// may record (a call ends on its caller's task); one lock a call, its handles made once per
/// method and status.
public final class PeerCallMetrics: Sendable {
    public static let durationLabel = "frienso_peer_call_duration_seconds"
    public static let callsLabel = "frienso_peer_calls_total"

    /// The process's: every `WireClient` records here unless its options name another.
    public static let shared = PeerCallMetrics()

    /// By `KnownMethod` ordinal, `other` last; an array, not a dictionary: a call's entry is
    /// found without hashing (item 122).
    private let methods = Mutex<[MethodMetricHandles?]>(Array(repeating: nil, count: KnownMethod.count + 1))
    /// nil: the process's bootstrapped backend, read when a method's handles are first made
    /// (after `ServiceMetrics.bootstrap`, which a service runs before it calls anyone).
    private let factory: (any MetricsFactory)?

    /// - Parameter factory: a test's own backend; nil for the process's.
    public init(factory: (any MetricsFactory)? = nil) {
        self.factory = factory
    }

    /// Records a call to `method` answered with `status` after `elapsed` nanoseconds.
    func record(method: String, status: StatusCode, afterNanoseconds elapsed: Int64) {
        let known = KnownMethod(method)
        let index = known?.ordinal ?? KnownMethod.count
        let (duration, calls) = methods.withLock { table -> (any RecorderHandler, Counter) in
            // The usual case: the method's handles made already, and the status's.
            if let entry = table[index], let counter = entry.counter(status) { return (entry.duration, counter) }
            let factory = factory ?? MetricsSystem.factory
            let label = known?.name ?? "other"
            let entry = table[index]
                ?? MethodMetricHandles(duration: factory.makeRecorder(label: Self.durationLabel, dimensions: [("method", label)], aggregate: true))
            table[index] = entry
            let counter = Counter(label: Self.callsLabel, dimensions: [("method", label), ("status", RequestMetrics.label(status))],
                                  factory: factory)
            entry.setCounter(counter, for: status)
            return (entry.duration, counter)
        }
        calls.increment()
        duration.record(RequestDuration.seconds(nanoseconds: elapsed))
    }
}
