import DequeModule
public import FriensoProto
import Synchronization

/// The edge's live events, per user: each event numbered in the user's own sequence, kept in a
/// short log, and handed to every WebSocket connection of that user. A log is made when the
/// user's first connection arrives and dropped `resumeWindow` after their last one left; each log
/// gets a random epoch, so numbers from a dropped log (or another edge run) are never mistaken
/// for this one's.
///
/// The log is what lets a client that lost its connection resume: it reconnects with the epoch
/// and the last sequence it processed and gets what it missed, in order, with no duplicate. When
/// that is impossible (another epoch: the edge restarted; the log no longer reaches back that far;
/// the user's log was dropped after the resume window) the client is told to `reset`: fetch the
/// state again. A connection that cannot keep up (its queue full) is closed so that it resumes.
///
/// No sockets here: the WebSocket handler feeds connections' streams to the socket, and the tests
/// drive the hub directly.
public final class EventHub: Sendable {
    /// A text frame for a connection.
    public typealias Frame = String

    /// What a connecting client gets first.
    public enum Start: Equatable, Sendable {
        /// Nothing to replay (a new client, or one that missed nothing); live from `sequence` on.
        case live(sequence: UInt64)
        /// These frames were missed; live after them.
        case replay([Frame], sequence: UInt64)
        /// The client cannot resume: it must fetch the state again; live from `sequence` on.
        case reset(sequence: UInt64)
    }

    private struct Entry {
        var sequence: UInt64
        var frame: Frame
    }

    private struct Connection {
        var continuation: AsyncStream<Frame>.Continuation
    }

    private struct UserLog {
        var epoch = UInt64.random(in: 1...UInt64(Int64.max))
        var last: UInt64 = 0
        var entries = Deque<Entry>()
        var connections: [UInt64: Connection] = [:]
        var idleSince: ContinuousClock.Instant?
    }

    private struct State {
        var users: [UInt64: UserLog] = [:]
        var nextConnection: UInt64 = 1
    }

    /// Events kept per user for resuming.
    public let logCapacity: Int
    /// Frames queued per connection before it is closed as too slow.
    public let queueCapacity: Int
    /// How long a user's log outlives their last connection.
    public let resumeWindow: Duration
    private let state = Mutex(State())

    public init(logCapacity: Int = 1_024, queueCapacity: Int = 4_096, resumeWindow: Duration = .seconds(30)) {
        self.logCapacity = logCapacity
        self.queueCapacity = queueCapacity
        self.resumeWindow = resumeWindow
    }

    /// A new connection of `user`.
    /// - Parameter resume: the epoch and last sequence the client processed, when it is resuming.
    /// - Returns: the connection's id, the epoch of the user's numbering, what to send first, and
    ///   the stream of frames after that.
    public func connect(user: UInt64, resume: (epoch: UInt64, sequence: UInt64)?, now: ContinuousClock.Instant = .now)
        -> (id: UInt64, epoch: UInt64, start: Start, frames: AsyncStream<Frame>) {
        let (stream, continuation) = AsyncStream.makeStream(of: Frame.self, bufferingPolicy: .bufferingOldest(queueCapacity))
        let (id, epoch, start) = state.withLock { state in
            let id = state.nextConnection
            state.nextConnection += 1
            var log = state.users[user] ?? UserLog()
            if let idle = log.idleSince, idle.duration(to: now) >= resumeWindow {
                log = UserLog() // past the window: events may have been missed since; a new numbering
            }
            let epoch = log.epoch
            log.connections[id] = Connection(continuation: continuation)
            log.idleSince = nil
            let start: Start
            if let resume {
                if resume.epoch != log.epoch || resume.sequence > log.last {
                    start = .reset(sequence: log.last)
                } else if resume.sequence == log.last {
                    start = .live(sequence: log.last)
                } else if let first = log.entries.first, first.sequence <= resume.sequence + 1 {
                    start = .replay(log.entries.filter { $0.sequence > resume.sequence }.map(\.frame), sequence: log.last)
                } else {
                    start = .reset(sequence: log.last)
                }
            } else {
                start = .live(sequence: log.last)
            }
            state.users[user] = log
            return (id, epoch, start)
        }
        return (id, epoch, start, stream)
    }

    /// The connection went away; the user's log stays for `resumeWindow`.
    public func disconnect(user: UInt64, id: UInt64, now: ContinuousClock.Instant = .now) {
        let gone = state.withLock { state -> Connection? in
            guard var log = state.users[user], let connection = log.connections.removeValue(forKey: id) else { return nil }
            if log.connections.isEmpty { log.idleSince = now }
            state.users[user] = log
            return connection
        }
        gone?.continuation.finish()
    }

    /// Numbers `data` in `user`'s sequence, logs it and queues it on every connection of the user.
    /// A user with no log here (never connected, or swept) is skipped.
    /// - Returns: the sequence given, or nil when skipped.
    @discardableResult
    public func publish(user: UInt64, event method: String, data: JSONValue) -> UInt64? {
        publish(user: user, event: method, text: data.utf8())
    }

    /// `publish(user:event:data:)` with the data's JSON text already written (`LiveEvents.json`).
    @discardableResult
    public func publish(user: UInt64, event method: String, text data: [UInt8]) -> UInt64? {
        var overflowed: [AsyncStream<Frame>.Continuation] = []
        // The event's JSON is written once, outside the lock; only the numbered header is
        // written under it.
        var bytes = Array(#""event":"#.utf8)
        bytes.reserveCapacity(bytes.count + method.utf8.count + data.count + 12)
        JSONValue.quote(method, into: &bytes)
        bytes.append(contentsOf: #","data":"#.utf8)
        bytes.append(contentsOf: data)
        bytes.append(UInt8(ascii: "}"))
        let body = String(decoding: bytes, as: UTF8.self)
        let sequence = state.withLock { state -> UInt64? in
            guard var log = state.users[user] else { return nil }
            log.last += 1
            let frame = #"{"type":"event","epoch":""# + String(log.epoch) + #"","sequence":"# + String(log.last) + "," + body
            log.entries.append(Entry(sequence: log.last, frame: frame))
            if log.entries.count > logCapacity { log.entries.removeFirst() }
            for (id, connection) in log.connections {
                if case .dropped = connection.continuation.yield(frame) {
                    overflowed.append(connection.continuation)
                    log.connections[id] = nil
                    if log.connections.isEmpty { log.idleSince = .now }
                }
            }
            state.users[user] = log
            return log.last
        }
        // Ends those streams: their sockets close and their clients resume from what they got.
        for continuation in overflowed { continuation.finish() }
        return sequence
    }

    /// The last sequence given to `user`'s events (0 when none).
    public func lastSequence(user: UInt64) -> UInt64 {
        state.withLock { $0.users[user]?.last ?? 0 }
    }

    /// Drops the logs of users with no connection for longer than `resumeWindow`.
    /// - Returns: how many were dropped.
    @discardableResult
    public func sweep(now: ContinuousClock.Instant = .now) -> Int {
        state.withLock { state in
            let before = state.users.count
            state.users = state.users.filter { _, log in
                guard let idle = log.idleSince else { return true }
                return idle.duration(to: now) < resumeWindow
            }
            return before - state.users.count
        }
    }

    /// Open connections, all users together.
    public var connectionCount: Int {
        state.withLock { $0.users.values.reduce(0) { $0 + $1.connections.count } }
    }

    /// Users with a log here.
    public var userCount: Int { state.withLock { $0.users.count } }
}
