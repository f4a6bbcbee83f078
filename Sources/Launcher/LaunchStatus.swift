import Foundation

/// What the launcher knows of its members, written to `<runDir>/status.json` at every change and
/// read by `frienso-launch status` (another process). Liveness is the process (its PID alive);
/// readiness is its last probe (Ping, or `GET /v1/health` for the edge), which the launcher
/// repeats every `Supervisor.probeInterval`.
public struct LaunchStatus: Codable, Sendable, Equatable {
    public var launcherPID: Int32
    public var startedAtMs: Int64
    public var members: [Member]
    /// Where the launcher serves the whole deployment's metrics (`http://127.0.0.1:9100/metrics`),
    /// once it listens; nil when metrics are off.
    public var metricsEndpoint: String?
    /// Why the metrics are not served, when the launcher could not bind `metricsListen`.
    public var metricsError: String?

    public struct Member: Codable, Sendable, Equatable {
        public var name: String
        /// starting, ready, not answering, restarting, failed, stopped.
        public var state: String
        public var pid: Int32?
        public var endpoint: String
        public var restarts: Int
        /// When the running process started.
        public var startedAtMs: Int64?
        /// The last probe it answered, and when the last probe ran.
        public var lastReadyAtMs: Int64?
        public var lastProbeAtMs: Int64?
        /// How its last run ended ("exit status 1", "signal 9"), and the first line of the last
        /// error its log shows.
        public var lastExit: String?
        public var lastError: String?
        /// The version it reports (Ping's, the edge's health check).
        public var version: String?
    }

    public static func path(_ runDirectory: String) -> String { "\(runDirectory)/status.json" }

    public static func read(_ runDirectory: String) throws -> LaunchStatus {
        try JSONDecoder().decode(LaunchStatus.self, from: Data(contentsOf: URL(fileURLWithPath: path(runDirectory))))
    }

    func write(_ runDirectory: String) {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        guard let data = try? encoder.encode(self) else { return }
        try? data.write(to: URL(fileURLWithPath: Self.path(runDirectory)), options: .atomic)
    }

    /// What `frienso-launch status` prints: a line per member, or JSON (this status with each
    /// member's `live` and `ready`); and whether every member is live and ready.
    public func report(json: Bool, nowMs now: Int64) throws -> (text: String, allReady: Bool) {
        let members = self.members.map { m in (m, live: Self.alive(m.pid), ready: m.state == "ready") }
        let allReady = members.allSatisfy { $0.live && $0.ready }
        if json {
            struct Report: Encodable {
                var launcherPID: Int32, startedAtMs: Int64, members: [Entry], metricsEndpoint: String?, metricsError: String?
                struct Entry: Encodable { var member: Member, live: Bool, ready: Bool }
            }
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
            let report = Report(launcherPID: launcherPID, startedAtMs: startedAtMs,
                                members: members.map { Report.Entry(member: $0.0, live: $0.live, ready: $0.ready) },
                                metricsEndpoint: metricsEndpoint, metricsError: metricsError)
            return (String(decoding: try encoder.encode(report), as: UTF8.self), allReady)
        }
        var lines = ["frienso-launch \(launcherPID), up \(Self.span(now - startedAtMs))"]
        for (m, live, _) in members {
            var line = "\(m.name.padding(toLength: 9, withPad: " ", startingAt: 0)) \(m.state.padding(toLength: 14, withPad: " ", startingAt: 0))"
            line += live ? " pid \(m.pid ?? 0)" : " not running"
            if let version = m.version { line += ", v\(version)" }
            if let started = m.startedAtMs, live { line += ", up \(Self.span(now - started))" }
            line += ", \(m.restarts) restart\(m.restarts == 1 ? "" : "s")"
            if let probe = m.lastProbeAtMs { line += ", probed \(Self.span(now - probe)) ago" }
            if let exit = m.lastExit { line += ", last run ended: \(exit)" }
            if let error = m.lastError { line += "\n          last error: \(error)" }
            lines.append(line)
        }
        if let metricsEndpoint { lines.append("metrics   \(metricsEndpoint)") }
        if let metricsError { lines.append("metrics   NOT SERVED: \(metricsError)") }
        return (lines.joined(separator: "\n"), allReady)
    }

    static func span(_ ms: Int64) -> String {
        let s = max(0, ms / 1_000)
        return s < 120 ? "\(s) s" : s < 7_200 ? "\(s / 60) min" : "\(s / 3_600) h \(s % 3_600 / 60) min"
    }

    /// Whether a process with this PID exists (signal 0 checks without sending anything).
    public static func alive(_ pid: Int32?) -> Bool {
        guard let pid, pid > 0 else { return false }
        return kill(pid, 0) == 0 || errno == EPERM
    }

    /// The first line of the last `error` or `critical` entry in the tail of a log (swift-log's
    /// stream format: "<time> <level> <label> : <message>"; or a JSON line, `logFormat: json`,
    /// given as "<ts> <level> <msg>").
    public static func lastError(inLog path: String, tail: Int = 65_536) -> String? {
        guard let handle = FileHandle(forReadingAtPath: path) else { return nil }
        defer { try? handle.close() }
        let size = (try? handle.seekToEnd()) ?? 0
        try? handle.seek(toOffset: size > UInt64(tail) ? size - UInt64(tail) : 0)
        guard let data = try? handle.readToEnd(), let text = String(data: data, encoding: .utf8) else { return nil }
        return text.split(separator: "\n").last { line in
            if line.hasPrefix("{") { return line.contains(#""level":"error""#) || line.contains(#""level":"critical""#) }
            let words = line.split(separator: " ", maxSplits: 3)
            return words.count > 2 && (words[1] == "error" || words[1] == "critical")
        }.map { line in
            if line.hasPrefix("{"), let object = (try? JSONSerialization.jsonObject(with: Data(line.utf8))) as? [String: Any] {
                let parts = [object["ts"], object["level"], object["msg"]].compactMap { $0 as? String }
                let error = (object["error"] as? String).map { " (error: \($0))" } ?? ""
                return String((parts.joined(separator: " ") + error).prefix(300))
            }
            return String(line.prefix(300))
        }
    }
}
