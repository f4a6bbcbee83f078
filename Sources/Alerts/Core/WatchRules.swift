import FriensoProto

/// The watchMe rules as values: what a start or an extension may do, who watches, who may see
/// the initiator. No store, no clock of its own, no status codes: the handlers (`Watch.swift`)
/// read and write, and map a `Refusal` to its status.
struct WatchRules: Sendable {
    /// The bounds of a session, in milliseconds (`alerts.minWatchSeconds`/`maxWatchSeconds`).
    var minimumMs: Int64
    var maximumMs: Int64
    /// The shortest extension.
    static let minimumExtensionMs: Int64 = 60_000
    static let maximumNoteLength = 280

    enum Refusal: Error, Equatable, Sendable {
        /// The requested duration is outside the bounds.
        case duration(leastMs: Int64, mostMs: Int64)
        case noteTooLong(limit: Int)
        /// Nobody in the circle can watch (invited numbers cannot: they are not users).
        case noWatcher
        /// The requested extension is outside 1 min … the maximum.
        case extension_(mostMs: Int64)
        /// Extended, the session would end further from now than the maximum.
        case tooLong(mostMs: Int64, endsInMs: Int64)
    }

    /// A new session's length in milliseconds, or why it cannot start.
    func start(durationSeconds: UInt32, note: String) -> Result<Int64, Refusal> {
        let duration = Int64(durationSeconds) * 1000
        guard (minimumMs...maximumMs).contains(duration) else { return .failure(.duration(leastMs: minimumMs, mostMs: maximumMs)) }
        guard note.count <= Self.maximumNoteLength else { return .failure(.noteTooLong(limit: Self.maximumNoteLength)) }
        return .success(duration)
    }

    /// Who is asked to watch: the circle's users, in circle order (invited numbers cannot watch).
    static func watchers(in circle: [CircleContact]) -> Result<[UInt64], Refusal> {
        let users = circle.compactMap { if case .user(let user) = $0 { user } else { nil } }
        return users.isEmpty ? .failure(.noWatcher) : .success(users)
    }

    /// An extension's length in milliseconds, or why it is out of bounds (whatever the session).
    func extensionMs(seconds: UInt32) -> Result<Int64, Refusal> {
        let extra = Int64(seconds) * 1000
        return (Self.minimumExtensionMs...maximumMs).contains(extra) ? .success(extra) : .failure(.extension_(mostMs: maximumMs))
    }

    /// The new end of a session ending at `endsAtMs`, extended by `extraMs` at `now`.
    func extended(endsAtMs: Int64, byMs extraMs: Int64, now: Int64) -> Result<Int64, Refusal> {
        let ends = endsAtMs + extraMs
        guard ends - now <= maximumMs else { return .failure(.tooLong(mostMs: maximumMs, endsInMs: endsAtMs - now)) }
        return .success(ends)
    }

    /// Who may see the initiator until `until`: the watchers who accepted.
    static func grants(of initiator: UInt64, watchers: [WatcherRecord], until: Int64) -> [GrantRecord] {
        watchers.filter { $0.answer == .accepted }.map { GrantRecord(subject: initiator, viewer: $0.user, reason: "watch", expiresMs: until) }
    }
}
