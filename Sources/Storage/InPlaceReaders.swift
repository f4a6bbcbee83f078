import Foundation
import GRDB
import Synchronization

/// Read-only connections of a service's database for the reads a request makes in place (see
/// `ServiceDatabase.read`), taken from a list of idle ones under a lock. GRDB's pool does the same
/// job for every read with more machinery: a barrier on a concurrent dispatch queue, a semaphore,
/// a dispatch group, a lock, and a key path on its generic item type, which the Swift runtime
/// instantiates anew on every call (`_swift_getKeyPath`, type lookups by mangled name): 3.7% of
/// social's CPU in `stack` for its one read per `CircleOf`, and about 1.5% of alerts'
/// (`docs/benchmarks.md`, issue 16, item 75). GRDB has no public way to keep a pool reader, hence
/// this list; the connections are opened as GRDB opens its pool readers (read-only, with the
/// pool's configuration and busy timeout), and each read is one read transaction, as before.
///
/// At most `limit` connections are open; a read that finds none idle and the limit reached goes
/// to GRDB's pool instead (it never waits here). `FRIENSO_READERS=pool` sends every read to the
/// pool, as before item 75, for A/B runs.
final class InPlaceReaders: Sendable {
    private struct State {
        var idle: [Reader] = []
        var opened = 0
    }

    /// A connection and its read transactions' statements (made on it at its first read). Only
    /// whoever took it from the idle list uses it, inside its `inDatabase`, so the statements,
    /// which GRDB does not let cross threads (not `Sendable`), are never used by two at once.
    private final class Reader: @unchecked Sendable {
        let connection: DatabaseQueue
        var transactions: ReadTransactionStatements?

        init(_ connection: DatabaseQueue) {
            self.connection = connection
        }

        func read<T>(_ value: (Database) throws -> T) throws -> T {
            try connection.inDatabase { db in
                guard CachedTransactions.enabled else { return try CachedTransactions.inReadTransaction(db, value) }
                let transactions = try self.transactions ?? ReadTransactionStatements(db)
                self.transactions = transactions
                return try transactions.run(db, value)
            }
        }

        /// Closes the connection, its statements finalized first (on its queue).
        func close() {
            connection.inDatabase { _ in self.transactions = nil }
            try? connection.close()
        }

        deinit {
            transactions = nil // before the connection: GRDB warns of a close with statements alive
        }
    }

    private let state = Mutex(State())
    private let path: String
    private let configuration: Configuration
    private let limit: Int

    static let enabled = ProcessInfo.processInfo.environment["FRIENSO_READERS"] != "pool"

    /// - Parameter configuration: the pool's (made read-only here).
    init(path: String, configuration: Configuration, limit: Int) {
        var configuration = configuration
        configuration.readonly = true // the pool's busy timeout stays: SQLite's rare WAL cases wait, as in GRDB's readers
        self.path = path
        self.configuration = configuration
        self.limit = limit
    }

    /// Connections open now (tests).
    var opened: Int { state.withLock { $0.opened } }

    /// `value` in a read transaction of an idle connection (opened if none is idle and fewer than
    /// `limit` are open). - Returns: nil when every allowed connection is busy (nothing ran).
    func read<T>(_ value: (Database) throws -> T) throws -> T? {
        guard let reader = try take() else { return nil }
        defer { state.withLock { $0.idle.append(reader) } }
        return try reader.read(value)
    }

    private func take() throws -> Reader? {
        enum Next { case idle(Reader), open, none }
        let next = state.withLock { s -> Next in
            if let reader = s.idle.popLast() { return .idle(reader) }
            guard s.opened < limit else { return .none }
            s.opened += 1
            return .open
        }
        switch next {
        case .idle(let reader): return reader
        case .none: return nil
        case .open:
            do {
                return Reader(try DatabaseQueue(path: path, configuration: configuration))
            } catch {
                state.withLock { $0.opened -= 1 }
                throw error
            }
        }
    }

    /// Closes the idle connections (before the pool's writer closes: GRDB closes its readers
    /// first too).
    func close() {
        let idle = state.withLock { s -> [Reader] in
            defer { s.opened -= s.idle.count; s.idle.removeAll() }
            return s.idle
        }
        for reader in idle { reader.close() }
    }
}
