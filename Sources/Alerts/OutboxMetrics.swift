import CoreMetrics
import FriensoProto
import Synchronization

/// The outbox in metrics (through swift-metrics; the executable's backend renders them):
/// - `frienso_delivery_attempts_total{channel,provider,outcome}`: each provider answer recorded;
/// - `frienso_deliveries_failed_total{channel,kind}`: deliveries that failed for good;
/// - `frienso_outbox_pending{channel}` and `frienso_outbox_oldest_pending_seconds{channel}`:
///   read from the database when the metrics are rendered.
/// `kind` is what raised the message (`help_now`, `timer_warning`, `watch`, …): the part of its source
/// before the colon, never the ids after it.
enum OutboxMetrics {
    /// Sources are made by this service's code (`help_now:<alert>`, `timer_warning:<timer>`, …):
    /// the name before the colon is one of a few dozen, the rest is ids.
    static func kind(of source: String) -> String {
        let head = source.prefix { $0 != ":" }
        guard !head.isEmpty, head.count <= 32, head.allSatisfy({ $0 == "_" || ($0.isASCII && $0.isLowercase) }) else { return "other" }
        return String(head)
    }

    static func label(_ channel: AlertsV1.Channel) -> String {
        switch channel {
        case .push: "push"
        case .sms: "sms"
        default: "other"
        }
    }

    /// Counters by their labels, made once (a helpNow makes a dozen attempts).
    private static let counters = Mutex<[String: Counter]>([:])

    private static func counter(_ name: String, _ dimensions: [(String, String)]) -> Counter {
        let key = ([name] + dimensions.map(\.1)).joined(separator: "|")
        return counters.withLock { made in
            if let counter = made[key] { return counter }
            let counter = Counter(label: name, dimensions: dimensions)
            made[key] = counter
            return counter
        }
    }

    /// `DELIVERED` for `ATTEMPT_OUTCOME_DELIVERED`, and so on.
    static func label(_ outcome: AlertsV1.AttemptOutcome) -> String {
        let name = outcome.protoName
        return name.hasPrefix("ATTEMPT_OUTCOME_") ? String(name.dropFirst("ATTEMPT_OUTCOME_".count)) : name
    }

    static func attempted(channel: AlertsV1.Channel, provider: String, result: DeliveryResult) {
        counter("frienso_delivery_attempts_total",
                [("channel", label(channel)), ("provider", provider.isEmpty ? "none" : provider), ("outcome", label(result.outcome))]).increment()
    }

    static func failed(channel: AlertsV1.Channel, source: String) {
        counter("frienso_deliveries_failed_total", [("channel", label(channel)), ("kind", kind(of: source))]).increment()
    }
}

extension AlertsService {
    /// Records the outbox's backlog gauges (a hook the executable runs when metrics are rendered).
    public func recordOutboxMetrics(nowMs: Int64) async {
        guard let rows = try? await store.pendingByChannel() else { return }
        var pending: [String: (Int, Int64)] = ["push": (0, nowMs), "sms": (0, nowMs)]
        for row in rows { pending[OutboxMetrics.label(row.channel)] = (row.count, row.oldestMs) }
        for (channel, (count, oldest)) in pending {
            Gauge(label: "frienso_outbox_pending", dimensions: [("channel", channel)]).record(count)
            Gauge(label: "frienso_outbox_oldest_pending_seconds", dimensions: [("channel", channel)])
                .record(Double(max(0, nowMs - oldest)) / 1_000)
        }
    }
}
