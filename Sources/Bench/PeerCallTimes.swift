import Foundation

/// The calls services made to each other over a window, from the deployment's merged metrics:
/// for each caller and method, how many, and their mean as the caller saw it
/// (`frienso_peer_call_duration_seconds`), beside the same method's mean in the service that
/// answered it (`frienso_request_duration_seconds` of that service). `stack` prints them: the
/// difference is what crossing from one process to another and back costs under the load (the
/// hops, the wake-ups, the caller's resumption), which item 88 needed a build with timers to see
/// (`docs/benchmarks.md`, issue 16, item 122).
struct PeerCallTimes: Equatable, Sendable {
    /// A count of events and the seconds they took together.
    struct Timed: Equatable, Sendable {
        var count: Double = 0
        var seconds: Double = 0

        var meanMilliseconds: Double { seconds / max(1, count) * 1e3 }

        static func - (after: Timed, before: Timed) -> Timed {
            Timed(count: after.count - before.count, seconds: after.seconds - before.seconds)
        }
    }

    /// A service (the `service` label) and a method.
    struct Key: Hashable, Comparable, Sendable {
        var service: String
        var method: String

        static func < (a: Key, b: Key) -> Bool { (a.service, a.method) < (b.service, b.method) }
    }

    /// By caller and the method it called.
    var calls: [Key: Timed] = [:]
    /// By the service that answered and the method (every request a host answered).
    var answered: [Key: Timed] = [:]
    /// Calls that did not end OK, by caller, method and status (`frienso_peer_calls_total`): a
    /// user's request can still succeed over one (a raise takes its circle from the replica when
    /// social does not answer), so a run that looks clean may not have been.
    var failed: [Failure: Double] = [:]

    /// A caller, the method it called and the status it got.
    struct Failure: Hashable, Comparable, Sendable {
        var key: Key
        var status: String

        static func < (a: Failure, b: Failure) -> Bool { (a.key, a.status) < (b.key, b.status) }
    }

    static func parse(_ exposition: String) -> PeerCallTimes {
        var found = PeerCallTimes()
        let prefixes = ["frienso_peer_call_duration_seconds_", "frienso_request_duration_seconds_", "frienso_peer_calls_total{"]
        for sample in ExpositionSample.samples(exposition, prefixes: prefixes) {
            guard let service = sample.label("service"), let method = sample.label("method") else { continue }
            let key = Key(service: service, method: method), value = sample.value
            switch sample.name {
            case "frienso_peer_call_duration_seconds_count": found.calls[key, default: Timed()].count = value
            case "frienso_peer_call_duration_seconds_sum": found.calls[key, default: Timed()].seconds = value
            case "frienso_request_duration_seconds_count": found.answered[key, default: Timed()].count = value
            case "frienso_request_duration_seconds_sum": found.answered[key, default: Timed()].seconds = value
            case "frienso_peer_calls_total":
                guard let status = sample.label("status"), status != "OK" else { continue }
                found.failed[Failure(key: key, status: status)] = value
            default: break
            }
        }
        return found
    }

    /// What happened between two readings: the calls made in the window, and the requests answered.
    static func window(before: PeerCallTimes, after: PeerCallTimes) -> PeerCallTimes {
        func delta(_ after: [Key: Timed], _ before: [Key: Timed]) -> [Key: Timed] {
            after.reduce(into: [:]) { result, entry in
                let d = entry.value - (before[entry.key] ?? Timed())
                if d.count > 0 { result[entry.key] = d }
            }
        }
        let failed = after.failed.reduce(into: [Failure: Double]()) { result, entry in
            let d = entry.value - (before.failed[entry.key] ?? 0)
            if d > 0 { result[entry.key] = d }
        }
        return PeerCallTimes(calls: delta(after.calls, before.calls), answered: delta(after.answered, before.answered), failed: failed)
    }

    /// The mean of `method` in the service that answers it: the service its name starts with
    /// (`social.CircleOf` is social's), not a gateway that forwarded it.
    func answeredMilliseconds(_ method: String) -> Double? {
        guard let dot = method.firstIndex(of: ".") else { return nil }
        return answeredMilliseconds(method, in: String(method[..<dot]))
    }

    /// The mean of `method` in `service` (a gateway that forwarded it, or the service that owns it).
    func answeredMilliseconds(_ method: String, in service: String) -> Double? {
        answered[Key(service: service, method: method)]?.meanMilliseconds
    }

    /// A user-facing operation as `stack` measured it: its name in the report, the method the load
    /// generator called, and its mean as the client saw it (ms).
    struct Operation: Sendable {
        var name: String
        var method: String
        var clientMilliseconds: Double
    }

    /// One line for the report: each operation's mean as the client saw it, in the gateway that
    /// forwarded it, and in the service that answered it. What separates the three is the hops:
    /// client → gateway → service and back, and the load generator's own time (the first minus
    /// the second); gateway → service and back (the second minus the third). The third is the
    /// service's own work, its commit wait included (`docs/benchmarks.md`, issue 16, item 124).
    func stageLine(_ operations: [Operation]) -> String {
        func ms(_ value: Double?) -> String { value.map { String(format: "%.2f", $0) } ?? "?" }
        let parts = operations.map { op in
            "\(op.name) \(ms(op.clientMilliseconds)) / \(ms(answeredMilliseconds(op.method, in: "gateway"))) / \(ms(answeredMilliseconds(op.method)))"
        }
        return "- each operation's mean (ms; as the client saw it / in the gateway / in the service that answered; "
            + "`frienso_request_duration_seconds`): " + parts.joined(separator: ", ")
    }

    /// The report's line of calls that did not end OK ("none" is a finding too).
    var failureLine: String {
        guard !failed.isEmpty else { return "- calls between services that did not end OK: none" }
        return "- calls between services that did not end OK: "
            + failed.sorted { $0.key < $1.key }.map { "\($0.key.key.service) → \($0.key.key.method) \(Int($0.value)) \($0.key.status)" }
                .joined(separator: ", ")
    }

    /// One line for the report: each caller → method, its calls, and the two means.
    var line: String {
        guard !calls.isEmpty else { return "- calls between services: none in the window" }
        let parts = calls.sorted { $0.key < $1.key }.map { key, timed in
            let inService = answeredMilliseconds(key.method).map { String(format: "%.2f", $0) } ?? "?"
            return "\(key.service) → \(key.method) \(Int(timed.count)) calls, \(String(format: "%.2f", timed.meanMilliseconds)) / \(inService) ms"
        }
        return "- calls between services (mean as the caller saw it / in the service that answered; "
            + "`frienso_peer_call_duration_seconds`, `frienso_request_duration_seconds`): " + parts.joined(separator: ", ")
    }
}
