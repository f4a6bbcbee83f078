import Synchronization

/// A member's metrics as the launcher reads them (`<name>.Metrics`, or the edge's `GET /metrics`).
public struct MetricsExposition: Sendable {
    /// Every metric of the process, in Prometheus's text exposition format (0.0.4).
    public var render: @Sendable () async -> String
    /// What a scrape must carry: derived from the launcher's and this member's CurveZMQ keys
    /// (`ScrapeToken`). nil answers any caller: only on the insecure plaintext plane.
    public var token: [UInt8]?

    public init(token: [UInt8]?, render: @escaping @Sendable () async -> String) {
        self.token = token
        self.render = render
    }
}

/// The secret a metrics scrape carries. ServiceKit derives it from the keyring; here, only its
/// comparison.
public enum ScrapeToken {
    /// Compares in time that depends on the lengths only, not on where the bytes differ.
    public static func equal(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        guard a.count == b.count, !a.isEmpty else { return false }
        var difference: UInt8 = 0
        for i in a.indices { difference |= a[i] ^ b[i] }
        return difference == 0
    }
}

/// Figures read when the metrics are rendered rather than recorded as they change (an outbox's
/// backlog, an index's size): each service registers a hook that records its gauges, and the
/// renderer runs them all first.
public enum MetricsRefresh {
    private static let hooks = Mutex<[@Sendable () async -> Void]>([])

    public static func register(_ hook: @escaping @Sendable () async -> Void) {
        hooks.withLock { $0.append(hook) }
    }

    public static func run() async {
        for hook in hooks.withLock({ $0 }) { await hook() }
    }
}
