import Foundation

/// What the launcher knows of its members, written to `<runDir>/status.json` at every change and
/// read by `frienso-launch status` (another process). Liveness is the process (its PID alive);
/// readiness is its last probe (Ping, or `GET /v1/health` for the edge), which the launcher
/// repeats every `Supervisor.probeInterval`.
public struct LaunchStatus: Codable, Sendable, Equatable {
    public var launcherPID: Int32
    public var startedAtMs: Int64
    public var members: [Member]

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

    /// Whether a process with this PID exists (signal 0 checks without sending anything).
    public static func alive(_ pid: Int32?) -> Bool {
        guard let pid, pid > 0 else { return false }
        return kill(pid, 0) == 0 || errno == EPERM
    }

    /// The first line of the last `error` or `critical` entry in the tail of a log (swift-log's
    /// stream format: "<time> <level> <label> : <message>").
    static func lastError(inLog path: String, tail: Int = 65_536) -> String? {
        guard let handle = FileHandle(forReadingAtPath: path) else { return nil }
        defer { try? handle.close() }
        let size = (try? handle.seekToEnd()) ?? 0
        try? handle.seek(toOffset: size > UInt64(tail) ? size - UInt64(tail) : 0)
        guard let data = try? handle.readToEnd(), let text = String(data: data, encoding: .utf8) else { return nil }
        return text.split(separator: "\n").last { line in
            let words = line.split(separator: " ", maxSplits: 3)
            return words.count > 2 && (words[1] == "error" || words[1] == "critical")
        }.map { String($0.prefix(300)) }
    }
}
