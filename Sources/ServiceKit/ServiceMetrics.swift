import CoreMetrics
import CSodium
public import Foundation
public import Prometheus
import Synchronization
public import Wire

/// The metrics backend of a Frienso process: swift-metrics bootstrapped once with swift-prometheus's
/// factory over one registry. Every metric gets the `service` label (the member's name), durations
/// are histograms in seconds with buckets from 100 µs to 10 s, and the registry is rendered, with
/// the process's CPU and memory read at that moment, for `<member>.Metrics` (the launcher merges
/// every member's and serves them on its HTTP port).
public enum ServiceMetrics {
    private static let registryBox = Mutex<PrometheusCollectorRegistry?>(nil)

    /// The registry of this process once `bootstrap` ran.
    public static var registry: PrometheusCollectorRegistry? { registryBox.withLock { $0 } }

    /// Request latencies are sub-millisecond when all is well and seconds when it is not.
    public static let durationBuckets: [Duration] = [
        .microseconds(100), .microseconds(250), .microseconds(500), .milliseconds(1), .microseconds(2_500),
        .milliseconds(5), .milliseconds(10), .milliseconds(25), .milliseconds(50), .milliseconds(100),
        .milliseconds(250), .milliseconds(500), .seconds(1), .milliseconds(2_500), .seconds(5), .seconds(10),
    ]
    /// `frienso_request_duration_seconds`' buckets: the same bounds, in seconds, for the `Double`
    /// histogram every host records each request into (`RequestMetrics.answered`, item 99); they
    /// render as the `Duration` buckets do (`le="0.0001"` … `le="10.0"`).
    public static let requestDurationBuckets: [Double] = durationBuckets.map(RequestDuration.seconds)
    /// Sizes (group-commit batches): powers of two.
    public static let sizeBuckets: [Double] = (0...12).map { Double(1 << $0) }

    /// Bootstraps swift-metrics for `service` (once per process; later calls return the same registry).
    /// `FRIENSO_METRICS=off` leaves swift-metrics on its no-op default (only the process figures
    /// are served): the benchmark's A/B of what recording costs.
    @discardableResult
    public static func bootstrap(service: String, environment: [String: String] = ProcessInfo.processInfo.environment) -> PrometheusCollectorRegistry {
        registryBox.withLock { box in
            if let registry = box { return registry }
            let registry = PrometheusCollectorRegistry()
            if environment["FRIENSO_METRICS"] != "off" {
                MetricsSystem.bootstrap(factory(registry: registry, service: service))
            }
            ProcessMetrics.shared.start(registry: registry, service: service)
            box = registry
            return registry
        }
    }

    /// swift-prometheus's factory over `registry`, configured as `bootstrap` installs it.
    public static func factory(registry: PrometheusCollectorRegistry, service: String) -> PrometheusMetricsFactory {
        var factory = PrometheusMetricsFactory(registry: registry)
        factory.defaultDurationHistogramBuckets = durationBuckets
        factory.defaultValueHistogramBuckets = sizeBuckets
        factory.valueHistogramBuckets[RequestDuration.label] = requestDurationBuckets
        factory.valueHistogramBuckets[PeerCallMetrics.durationLabel] = requestDurationBuckets
        factory.nameAndLabelSanitizer = { name, labels in
            (prometheusName(name), [("service", service)] + labels.map { (prometheusName($0.0), $0.1) })
        }
        return factory
    }

    /// Libraries' names in Prometheus's conventions: Hummingbird's HTTP metrics under `frienso_http_`,
    /// and any other character Prometheus does not allow as `_`.
    static func prometheusName(_ name: String) -> String {
        switch name {
        case "hb.requests": return "frienso_http_requests_total"
        case "hb.request.errors": return "frienso_http_request_errors_total"
        case "http.server.request.duration": return "frienso_http_request_duration_seconds"
        case "http.server.active_requests": return "frienso_http_active_requests"
        default:
            func allowed(_ b: UInt8) -> Bool {
                (b >= 0x61 && b <= 0x7A) || (b >= 0x41 && b <= 0x5A) || (b >= 0x30 && b <= 0x39) || b == 0x5F || b == 0x3A
            }
            // Frienso's own names are valid already: no new string for them.
            if name.utf8.allSatisfy(allowed) { return name }
            return String(decoding: name.utf8.map { allowed($0) ? $0 : 0x5F }, as: UTF8.self)
        }
    }

    /// The registry in Prometheus's text format, the process's own figures refreshed first.
    public static func render(_ registry: PrometheusCollectorRegistry) async -> String {
        ProcessMetrics.shared.refresh()
        await MetricsRefresh.run()
        var buffer: [UInt8] = []
        buffer.reserveCapacity(64 << 10)
        registry.emit(into: &buffer)
        return String(decoding: buffer, as: UTF8.self)
    }

    /// What `member`'s hosts answer to `<member>.Metrics`, once metrics are bootstrapped.
    public static func exposition(for member: String, plane: InternalPlane) -> MetricsExposition? {
        guard let registry else { return nil }
        return MetricsExposition(token: plane.scrapeToken(member: member)) { await render(registry) }
    }
}

extension InternalPlane {
    /// The token the launcher proves itself with when it reads `member`'s metrics: BLAKE2b keyed
    /// with the X25519 secret the two share (`crypto_box_beforenm` of one's secret and the other's
    /// public key), over a fixed context. Either side computes it, nobody else can, and no new
    /// secret needs a file. nil on the plaintext plane (no keys: anyone is answered).
    /// - Parameter member: the scraped member (this process, or, for the launcher, the peer).
    public func scrapeToken(member: String) -> [UInt8]? {
        guard let keyring else { return nil }
        let peer = keyring.member == PlanePolicy.launcher ? member : PlanePolicy.launcher
        guard let theirs = (try? keyring.publicKey(of: peer)).flatMap(CurveKeys.binary),
              let mine = CurveKeys.binary(keyring.keys.secretKey) else { return nil }
        var shared = [UInt8](repeating: 0, count: Int(crypto_box_BEFORENMBYTES))
        guard crypto_box_beforenm(&shared, theirs, mine) == 0 else { return nil }
        let context = Array("frienso metrics scrape v1 \(member)".utf8)
        var token = [UInt8](repeating: 0, count: 32)
        guard crypto_generichash(&token, token.count, context, UInt64(context.count), shared, shared.count) == 0 else { return nil }
        return token
    }
}

/// The process's CPU time, memory, threads and open files, in the names Prometheus's own clients
/// use (`process_cpu_seconds_total`, `process_resident_memory_bytes`, …), read from /proc when
/// the metrics are rendered.
final class ProcessMetrics: Sendable {
    static let shared = ProcessMetrics()

    private struct Handles {
        var cpu: Prometheus.Counter
        var lastCPU: Double = 0
        var resident: Prometheus.Gauge
        var virtual: Prometheus.Gauge
        var threads: Prometheus.Gauge
        var openFiles: Prometheus.Gauge
    }

    private let handles = Mutex<Handles?>(nil)

    func start(registry: PrometheusCollectorRegistry, service: String) {
        let labels = [("service", service)]
        // The standard process metrics' names: `process_<name>_<unit>`.
        func name(_ metric: String, _ unit: String, _ help: String) -> MetricNameDescriptor {
            MetricNameDescriptor(namespace: "process", metricName: metric, unitName: unit, helpText: help)
        }
        let start = registry.makeGauge(descriptor: name("start_time", "seconds", "Start time of the process since the Unix epoch, in seconds."),
                                       labels: labels)
        start.set(Date().timeIntervalSince1970 - Self.uptime())
        handles.withLock {
            $0 = Handles(
                cpu: registry.makeCounter(descriptor: name("cpu_seconds", "total", "User and system CPU time spent, in seconds."), labels: labels),
                resident: registry.makeGauge(descriptor: name("resident_memory", "bytes", "Resident memory size, in bytes."), labels: labels),
                virtual: registry.makeGauge(descriptor: name("virtual_memory", "bytes", "Virtual memory size, in bytes."), labels: labels),
                threads: registry.makeGauge(descriptor: name("threads", "", "Threads of the process."), labels: labels),
                openFiles: registry.makeGauge(descriptor: name("open", "fds", "Open file descriptors."), labels: labels))
        }
    }

    func refresh() {
        guard let stat = Self.stat() else { return }
        let ticks = Double(sysconf(Int32(_SC_CLK_TCK)))
        let page = Double(sysconf(Int32(_SC_PAGESIZE)))
        let fds = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd").count) ?? 0
        handles.withLock { h in
            guard var handles = h else { return }
            // Fields after the command: state is [0], utime [11], stime [12], threads [17], vsize [20], rss [21].
            let cpu = (Double(stat[11]) ?? 0) / ticks + (Double(stat[12]) ?? 0) / ticks
            if cpu > handles.lastCPU {
                handles.cpu.increment(by: cpu - handles.lastCPU)
                handles.lastCPU = cpu
            }
            handles.threads.set(Double(stat[17]) ?? 0)
            handles.virtual.set(Double(stat[20]) ?? 0)
            handles.resident.set((Double(stat[21]) ?? 0) * page)
            handles.openFiles.set(Double(max(0, fds - 1))) // the listing's own descriptor
            h = handles
        }
    }

    /// /proc/self/stat's fields after the command name (which may hold spaces).
    private static func stat() -> [Substring]? {
        guard let text = try? String(contentsOfFile: "/proc/self/stat", encoding: .utf8),
              let close = text.lastIndex(of: ")") else { return nil }
        let fields = text[text.index(after: close)...].split(separator: " ")
        return fields.count > 21 ? fields : nil
    }

    /// Seconds since the process started.
    private static func uptime() -> Double {
        guard let fields = stat(), let startTicks = Double(fields[19]),
              let text = try? String(contentsOfFile: "/proc/uptime", encoding: .utf8),
              let systemUp = Double(text.split(separator: " ").first ?? "") else { return 0 }
        return max(0, systemUp - startTicks / Double(sysconf(Int32(_SC_CLK_TCK))))
    }
}
