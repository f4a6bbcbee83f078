public import PostgresNIO
public import Logging
public import Wire
import Foundation
import Synchronization

/// A service's events kept in its database, so that every instance of the service publishes one
/// stream in one order, and an instance that dies loses no event a consumer needs.
///
/// - A mutation's events are written by the mutation, in its transaction (`PostgresServiceDatabase.write`
///   with a `committed` action: the action runs inside the transaction, under `EventCapture`, and
///   what it emits is appended before the commit), unnumbered, with an `id` from a sequence
///   (no lock: writers never wait for each other here).
/// - Numbers are given after the commit, by whichever instance's relay gets there first
///   (`number`): under an advisory lock on the stream, every committed unnumbered event gets the
///   next numbers in `id` order, and `event_heads` moves on, in one transaction. So numbers are
///   gapless, final once given, and every event with a number committed before it got it. Two
///   events about one thing (a user's profile, a pair's friendship) keep their commit order: the
///   second mutation waited for the first's row or advisory lock, so it took its `id` after the
///   first committed. (The first version numbered events in the writers' transactions, on the
///   head's row lock: that put every profile edit of every instance in one line, and cut
///   PostgreSQL's durable edits at 64 in flight from 3,276 to 1,011 a second.)
/// - Every instance relays every event, in number order, on its own PUB socket, under the
///   database's epoch (drawn once, when the table was made): a consumer subscribes to all of
///   them and applies each number once (a number it has is stale), so any instance that is up
///   serves it. The instance that committed relays at once; the others find the rows within
///   `pollInterval`.
/// - `lastSequence` is the last number this instance relayed: every event up to it committed
///   before a snapshot read after it (the Clone pattern's head).
/// - Streams not kept here (`viewer.*`, live pushes) go to the publisher after the commit, as on
///   one instance.
/// - Rows are kept `retention` (a consumer further behind loads a snapshot), and an erased
///   person's rows are deleted with the rest of their data (`erase(subject:)`).
public final class PostgresEventLog: NumberedEventSink, Sendable {
    public static let migrations = [
        PostgresMigration("event_log_v1", [
            "CREATE TABLE event_epoch (epoch bigint NOT NULL)",
            // One epoch for every instance, drawn when the log is made (1 ... 2^62).
            "INSERT INTO event_epoch (epoch) VALUES (1 + floor(random() * 4611686018427387903)::bigint)",
            "CREATE TABLE event_heads (stream text COLLATE \"C\" PRIMARY KEY, seq bigint NOT NULL)",
            """
            CREATE TABLE events (
                id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
                stream text COLLATE "C" NOT NULL,
                seq bigint,
                topic text COLLATE "C" NOT NULL,
                method text NOT NULL,
                payload bytea NOT NULL,
                subject bigint,
                at_ms bigint NOT NULL)
            """,
            "CREATE UNIQUE INDEX events_stream_seq ON events (stream, seq)",
            "CREATE INDEX events_unnumbered ON events (stream, id) WHERE seq IS NULL",
            "CREATE INDEX events_subject ON events (subject) WHERE subject IS NOT NULL",
            "CREATE INDEX events_at ON events (at_ms)",
        ]),
    ]

    public let epoch: UInt64
    /// The streams kept in the database; other topics are published live after the commit.
    public let streams: Set<String>
    private let database: PostgresServiceDatabase
    private let publisher: (any RelayingEventSink)?
    private let relayed: (@Sendable (String, [UInt8]) -> Void)?
    private let pollInterval: Duration
    private let retention: Duration
    private let logger: Logger
    /// The last number relayed per stream.
    private let cursors: Mutex<[String: UInt64]>
    /// One pass at a time (the relay task's and `catchUp`'s): two at once read from the same
    /// cursor and both sent the events after it (a fresh-clone CI run saw social's graph events
    /// 10–12 relayed twice by one instance).
    private let passes = KeyedSerialGate()
    private let nudges: AsyncStream<Void>.Continuation
    private let relayTask = Mutex<Task<Void, Never>?>(nil)

    /// Opens the log of `database` (making its tables first when they are missing), attaches it
    /// to the database's writes, and starts relaying to `publisher` from the current head (what
    /// was numbered before is not sent again; what committed unnumbered is).
    /// - Parameters:
    ///   - streams: the streams kept here (`profiles`, `sessions`); every other topic is live.
    ///   - publisher: this instance's PUB socket; nil: events are kept but not relayed (tests).
    ///   - relayed: told of every kept event as this instance relays it (its own and the other
    ///     instances'), in number order: for caches that must follow every instance's changes.
    public static func open(_ database: PostgresServiceDatabase, streams: Set<String>, publisher: (any RelayingEventSink)?,
                            relayed: (@Sendable (_ topic: String, _ payload: [UInt8]) -> Void)? = nil,
                            pollInterval: Duration = .milliseconds(200), retention: Duration = .seconds(3_600)) async throws -> PostgresEventLog {
        try await database.migrate(migrations)
        let (epoch, heads) = try await database.read { connection -> (Int64?, [String: UInt64]) in
            let epoch = try await PostgresServiceDatabase.first(connection.prepared("SELECT epoch FROM event_epoch", logger: database.logger), Int64.self)
            var heads: [String: UInt64] = [:]
            for try await (stream, seq) in try await connection.prepared("SELECT stream, seq FROM event_heads", logger: database.logger)
                .decode((String, Int64).self) { heads[stream] = UInt64(seq) }
            return (epoch, heads)
        }
        guard let epoch else { throw StoreInvariant("the event log has no epoch (its migration did not run)") }
        let log = PostgresEventLog(database: database, epoch: UInt64(epoch), streams: streams, heads: heads, publisher: publisher,
                                   relayed: relayed, pollInterval: pollInterval, retention: retention)
        database.attach(log)
        log.startRelay()
        return log
    }

    private let inbox: AsyncStream<Void>

    private init(database: PostgresServiceDatabase, epoch: UInt64, streams: Set<String>, heads: [String: UInt64],
                 publisher: (any RelayingEventSink)?, relayed: (@Sendable (String, [UInt8]) -> Void)?, pollInterval: Duration, retention: Duration) {
        self.database = database
        self.relayed = relayed
        self.epoch = epoch
        self.streams = streams
        self.publisher = publisher
        self.pollInterval = pollInterval
        self.retention = retention
        logger = database.logger
        cursors = Mutex(heads.filter { streams.contains($0.key) })
        (inbox, nudges) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
    }

    /// Stops relaying (`PostgresServiceDatabase.close` calls it).
    func stop() async {
        let task = relayTask.withLock { task -> Task<Void, Never>? in defer { task = nil }; return task }
        task?.cancel()
        nudges.finish()
        await task?.value
    }

    // MARK: NumberedEventSink

    public func lastSequence(stream: String) -> UInt64 {
        cursors.withLock { $0[stream] ?? 0 }
    }

    /// Numbers and relays every event committed so far (the relay would within its poll
    /// interval): a snapshot's head read after this covers every change committed before it.
    /// Runs beside the relay task safely: passes take turns (`passes`), each publishing in number
    /// order from the cursor the one before it left, so an instance sends each event once.
    public func catchUp() async {
        do {
            try await relayNew()
        } catch {
            logger.debug("event log catch-up: database not answering", metadata: ["error": "\(PostgresServiceDatabase.describe(error))"])
        }
    }

    public func emit(topic: String, method: String, payload: [UInt8]) {
        emit(topics: [topic], method: method, payload: payload, subject: nil)
    }

    /// A kept stream is always heard (consumers catch up from the log); a live one as this
    /// instance's PUB socket hears its subscribers.
    public func listens(to topic: String) -> Bool {
        streams.contains(Publisher.stream(of: topic)) || (publisher?.listens(to: topic) ?? true)
    }

    public func listens(toViewer user: UInt64) -> Bool {
        streams.contains(ViewerTopic.stream) || (publisher?.listens(toViewer: user) ?? true)
    }

    public func emit(topics: [String], method: String, payload: [UInt8]) {
        emit(topics: topics, method: method, payload: payload, subject: nil)
    }

    public func emit(topic: String, method: String, payload: [UInt8], subject: UInt64) {
        emit(topics: [topic], method: method, payload: payload, subject: subject)
    }

    /// Inside a write's `committed` action (`EventCapture.current`): kept with the mutation.
    /// Outside one, a kept stream's event is appended in a transaction of its own (logged when
    /// that fails: nothing should emit there), and a live one is published at once.
    private func emit(topics: [String], method: String, payload: [UInt8], subject: UInt64?) {
        let events = topics.map { CapturedEvent(topic: $0, method: method, payload: payload, subject: subject) }
        if let capture = EventCapture.current {
            capture.add(events)
            return
        }
        let kept = events.filter { streams.contains(Publisher.stream(of: $0.topic)) }
        for event in events where !streams.contains(Publisher.stream(of: event.topic)) {
            publisher?.emit(topic: event.topic, method: event.method, payload: event.payload)
        }
        guard !kept.isEmpty else { return }
        logger.warning("an event was emitted outside its mutation: appended on its own", metadata: ["method": "\(method)"])
        Task {
            do {
                try await database.transaction { connection in try await self.append(kept, on: connection) }
                self.nudges.yield()
            } catch {
                self.logger.error("an event could not be kept", metadata: ["method": "\(method)", "error": "\(PostgresServiceDatabase.describe(error))"])
            }
        }
    }

    // MARK: In a write

    /// Appends the kept streams' events of `capture` on the write's connection, before its commit.
    func append(_ capture: EventCapture, on connection: PostgresConnection) async throws {
        let kept = capture.events.filter { streams.contains(Publisher.stream(of: $0.topic)) }
        try await append(kept, on: connection)
    }

    private func append(_ events: [CapturedEvent], on connection: PostgresConnection) async throws {
        let now = Int64(Date().timeIntervalSince1970 * 1000)
        for event in events {
            let stream = Publisher.stream(of: event.topic)
            let payload = Data(event.payload), subject = event.subject.map { Int64(bitPattern: $0) }
            try await connection.prepared("""
                INSERT INTO events (stream, topic, method, payload, subject, at_ms)
                VALUES (\(stream), \(event.topic), \(event.method), \(payload), \(subject), \(now))
                """, logger: logger)
        }
    }

    /// For a write's committed action, which runs inside the transaction when the database has an
    /// event log: `body` runs again after the commit (a cache dropped before the commit could be
    /// filled again from the rows as they were). Outside such an action, nothing: it already
    /// runs after the commit.
    public static func alsoAfterCommit(_ body: @escaping @Sendable () -> Void) {
        EventCapture.current?.afterCommit(body)
    }

    /// After the commit: publishes the live events and relays the kept ones now.
    func committed(_ capture: EventCapture) {
        for body in capture.afterCommitActions { body() }
        var kept = false
        for event in capture.events {
            if streams.contains(Publisher.stream(of: event.topic)) {
                kept = true
            } else {
                publisher?.emit(topic: event.topic, method: event.method, payload: event.payload)
            }
        }
        if kept { nudges.yield() }
    }

    /// Deletes the events about `subject` (an erased person), in the erasure's transaction.
    public static func erase(subject: UInt64, on connection: PostgresConnection, logger: Logger) async throws {
        try await connection.prepared("DELETE FROM events WHERE subject = \(Int64(bitPattern: subject))", logger: logger)
    }

    // MARK: Relay

    private func startRelay() {
        relayTask.withLock { $0 = Task { await self.relay() } }
    }

    private func relay() async {
        var lastPrune = ContinuousClock.now
        let inbox = inbox, pollInterval = pollInterval
        await withTaskGroup(of: Void.self) { group in
            // The poll: rows other instances committed (or this one, when a nudge was missed).
            group.addTask { [nudges] in
                while !Task.isCancelled {
                    try? await Task.sleep(for: pollInterval)
                    nudges.yield()
                }
            }
            for await _ in inbox {
                if Task.isCancelled { break }
                do {
                    try await relayNew()
                    if lastPrune.duration(to: .now) >= .seconds(60) {
                        lastPrune = .now
                        try await prune()
                    }
                } catch {
                    logger.debug("event relay: database not answering", metadata: ["error": "\(PostgresServiceDatabase.describe(error))"])
                }
            }
            group.cancelAll()
        }
    }

    /// Numbers the committed unnumbered events of `stream` in `id` order (see the type).
    func number(_ stream: String) async throws {
        while true {
            let numbered = try await database.transaction { connection -> Int in
                try await connection.prepared("SELECT pg_advisory_xact_lock(hashtext('frienso events ' || current_schema() || ' ' || \(stream)))",
                                           logger: logger)
                return try await PostgresServiceDatabase.count(connection.prepared("""
                    WITH head AS (SELECT coalesce((SELECT seq FROM event_heads WHERE stream = \(stream)), 0) AS seq),
                         batch AS (SELECT id, row_number() OVER (ORDER BY id) AS n
                                   FROM (SELECT id FROM events WHERE stream = \(stream) AND seq IS NULL ORDER BY id LIMIT 1000) unnumbered),
                         numbered AS (UPDATE events SET seq = head.seq + batch.n FROM batch, head WHERE events.id = batch.id RETURNING events.seq),
                         moved AS (INSERT INTO event_heads (stream, seq) SELECT \(stream), max(seq) FROM numbered HAVING count(*) > 0
                                   ON CONFLICT (stream) DO UPDATE SET seq = excluded.seq)
                    SELECT 1 FROM numbered
                    """, logger: logger))
            }
            if numbered < 1000 { return }
        }
    }

    /// Numbers what committed, then publishes every kept event after this instance's cursors,
    /// in number order.
    func relayNew() async throws {
        await passes.acquire(nil)
        defer { passes.release(nil) }
        for stream in streams.sorted() {
            try await number(stream)
            while true {
                let after = Int64(lastSequence(stream: stream))
                // One statement, so one snapshot: the rows after the cursor, or (none kept, but
                // a head past it: this instance was so far behind that they were pruned) the
                // head alone, with no topic. Two statements could see the head of a commit that
                // came between them and skip its event.
                let rows = try await database.read { connection -> [(Int64, String, String, Data)] in
                    var rows: [(Int64, String, String, Data)] = []
                    for try await row in try await connection.prepared("""
                        (SELECT seq, topic, method, payload FROM events WHERE stream = \(stream) AND seq > \(after) ORDER BY seq LIMIT 1000)
                        UNION ALL
                        (SELECT seq, '', '', ''::bytea FROM event_heads
                         WHERE stream = \(stream) AND seq > \(after) AND NOT EXISTS (SELECT 1 FROM events WHERE stream = \(stream) AND seq > \(after)))
                        """, logger: logger).decode((Int64, String, String, Data).self) { rows.append(row) }
                    return rows
                }
                guard let last = rows.last else { break }
                for (seq, topic, method, payload) in rows where !topic.isEmpty {
                    let bytes = Array(payload)
                    publisher?.relay(topic: topic, method: method, payload: bytes, epoch: epoch, sequence: UInt64(seq))
                    relayed?(topic, bytes)
                }
                cursors.withLock { $0[stream] = max($0[stream] ?? 0, UInt64(last.0)) }
                if rows.count < 1000 { break }
            }
        }
    }

    private func prune() async throws {
        let horizon = Int64(Date().timeIntervalSince1970 * 1000) - Int64(retention.wholeMilliseconds)
        try await database.transaction { connection in
            try await connection.prepared("DELETE FROM events WHERE at_ms < \(horizon)", logger: logger)
        }
    }
}

/// An event a write's `committed` action emitted, kept until the write commits.
struct CapturedEvent: Sendable {
    var topic: String
    var method: String
    var payload: [UInt8]
    var subject: UInt64?
}

/// The events one write emits (see `PostgresEventLog`): set while its `committed` action runs.
final class EventCapture: Sendable {
    @TaskLocal static var current: EventCapture?
    private let captured = Mutex<[CapturedEvent]>([])

    func add(_ events: [CapturedEvent]) {
        captured.withLock { $0.append(contentsOf: events) }
    }

    var events: [CapturedEvent] { captured.withLock { $0 } }

    private let actions = Mutex<[@Sendable () -> Void]>([])

    func afterCommit(_ body: @escaping @Sendable () -> Void) {
        actions.withLock { $0.append(body) }
    }

    var afterCommitActions: [@Sendable () -> Void] { actions.withLock { $0 } }
}
