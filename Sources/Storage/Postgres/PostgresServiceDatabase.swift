public import PostgresNIO
public import Logging
import Wire
import Foundation
import NIOCore
import NIOSSL
import Synchronization

/// A service's PostgreSQL storage: a connection pool (postgres-nio's `PostgresClient`) on the
/// service's own schema, versioned migrations that several instances may run at once, and the
/// same contract as `ServiceDatabase` for mutations: one mutation is one transaction, committed
/// (PostgreSQL's default `synchronous_commit = on`: in the server's WAL, flushed) before it
/// returns; a request with an idempotency key commits its claim in that transaction, and its dry
/// run after a crash rolls back (ALREADY_EXISTS when it would have changed rows).
///
/// `open` starts the pool (its own task) and waits for the server; `close` stops it.
public final class PostgresServiceDatabase: Sendable {
    public let settings: PostgresSettings
    public let client: PostgresClient
    public let logger: Logger
    /// Mutations with a `committed` action and the same ordering key run one at a time, so their
    /// actions (events) follow the order of their commits (see `write`).
    private let ordered = KeyedSerialGate()

    private let runner = Mutex<Task<Void, Never>?>(nil)
    private let monitor = Mutex<Task<Void, Never>?>(nil)
    /// The health probe's own connection, outside the pool (see `watch`); nil until the first
    /// probe, and again after a probe failed on it.
    let probeConnection = Mutex<PostgresConnection?>(nil)
    let probeConfiguration: PostgresConnection.Configuration?
    /// How many health probes were answered (`answeredProbes`).
    let probesAnswered = Atomic<Int>(0)
    /// Whether the last health probe was answered (see `watch`): while it is not, requests are
    /// refused at once with UNAVAILABLE instead of queueing for a connection the pool cannot make.
    let reachable = Atomic<Bool>(true)
    /// The service's event log, when it keeps its events here (`PostgresEventLog.open`).
    private let eventLog = Mutex<PostgresEventLog?>(nil)

    /// Makes `log` the place where writes keep the events their `committed` actions emit.
    func attach(_ log: PostgresEventLog) {
        eventLog.withLock { $0 = log }
    }

    /// Starts the pool and waits (at most `timeout`) until the server answers.
    public static func open(_ settings: PostgresSettings, logger: Logger, timeout: Duration = .seconds(15)) async throws -> PostgresServiceDatabase {
        let database = PostgresServiceDatabase(settings: settings, logger: logger)
        let client = database.client
        database.runner.withLock { $0 = Task { await client.run() } }
        do {
            try await database.waitForServer(timeout: timeout)
        } catch {
            await database.close()
            throw error
        }
        database.monitor.withLock { $0 = Task { await database.watch() } }
        return database
    }

    /// Closes every connection and stops the pool.
    public func close() async {
        let log = eventLog.withLock { log -> PostgresEventLog? in defer { log = nil }; return log }
        await log?.stop()
        let watching = monitor.withLock { task -> Task<Void, Never>? in defer { task = nil }; return task }
        watching?.cancel()
        await watching?.value
        await dropProbeConnection()
        guard let task = runner.withLock({ task -> Task<Void, Never>? in defer { task = nil }; return task }) else { return }
        task.cancel()
        await task.value
    }

    init(settings: PostgresSettings, logger: Logger) {
        self.settings = settings
        self.logger = logger
        // TLS checks the server's certificate (chain and host name) against the system's roots,
        // or against `caFile` when the URL names one.
        var tlsConfiguration = TLSConfiguration.makeClientConfiguration()
        if let caFile = settings.caFile { tlsConfiguration.trustRoots = .file(caFile) }
        let tls: PostgresClient.Configuration.TLS = switch settings.tls {
        case .disable: .disable
        case .prefer: .prefer(tlsConfiguration)
        case .require: .require(tlsConfiguration)
        }
        var configuration: PostgresClient.Configuration
        if let socket = settings.unixSocketPath {
            configuration = .init(unixSocketPath: socket, username: settings.username, password: settings.password, database: settings.database)
        } else {
            configuration = .init(host: settings.host, port: settings.port, username: settings.username, password: settings.password,
                                  database: settings.database, tls: tls)
        }
        // Every unqualified table name is the service's own. A transaction left open by an
        // instance whose host was cut off mid-way would hold its locks (a request's claim, a
        // pair's lock) until the server noticed the dead connection, hours by TCP's defaults:
        // the server ends a session idle inside a transaction for 15 s (ours never idle there:
        // a transaction runs its statements back to back).
        configuration.options.additionalStartupParameters = [("search_path", settings.schema), ("application_name", "frienso-\(settings.schema)"),
                                                             ("idle_in_transaction_session_timeout", "15s")]
        configuration.options.maximumConnections = settings.maximumConnections
        configuration.options.connectTimeout = .seconds(5)
        client = PostgresClient(configuration: configuration, backgroundLogger: logger)
        // The probe's connection: the same server, user, TLS and checks, outside the pool.
        var probe: PostgresConnection.Configuration?
        if let socket = settings.unixSocketPath {
            probe = .init(unixSocketPath: socket, username: settings.username, password: settings.password, database: settings.database)
        } else {
            let probeTLS: PostgresConnection.Configuration.TLS? = switch settings.tls {
            case .disable: .disable
            case .prefer: (try? NIOSSLContext(configuration: tlsConfiguration)).map { .prefer($0) }
            case .require: (try? NIOSSLContext(configuration: tlsConfiguration)).map { .require($0) }
            }
            if let probeTLS {
                probe = .init(host: settings.host, port: settings.port, username: settings.username, password: settings.password,
                              database: settings.database, tls: probeTLS)
            }
        }
        probe?.options.additionalStartupParameters = [("application_name", "frienso-\(settings.schema)-probe")]
        probe?.options.connectTimeout = .seconds(2)
        probeConfiguration = probe
    }

    // MARK: Migrations

    /// Applies the migrations not applied yet, in order, each in the one transaction that also
    /// records it. Instances starting together take turns (an advisory lock on the schema), so
    /// each migration runs once.
    public func migrate(_ migrations: [PostgresMigration]) async throws {
        let schema = settings.schema
        try await transaction { connection in
            try await connection.query(PostgresQuery(unsafeSQL: "SELECT pg_advisory_xact_lock(hashtext('frienso schema \(schema)'))"), logger: self.logger)
            try await connection.query(PostgresQuery(unsafeSQL: "CREATE SCHEMA IF NOT EXISTS \(schema)"), logger: self.logger)
            try await connection.query(PostgresQuery(unsafeSQL: """
                CREATE TABLE IF NOT EXISTS \(schema).schema_migrations (name text PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())
                """), logger: self.logger)
            var applied = Set<String>()
            for try await name in try await connection.query("SELECT name FROM schema_migrations", logger: self.logger).decode(String.self) {
                applied.insert(name)
            }
            for migration in migrations where !applied.contains(migration.name) {
                for statement in migration.statements {
                    try await connection.query(PostgresQuery(unsafeSQL: statement), logger: self.logger)
                }
                try await connection.query("INSERT INTO schema_migrations (name) VALUES (\(migration.name))", logger: self.logger)
                self.logger.info("migrated", metadata: ["schema": "\(schema)", "migration": "\(migration.name)"])
            }
        }
    }

    /// Waits until the server takes connections (a server still starting, a network path coming
    /// up), at most `timeout`; then UNAVAILABLE with the last error. Each try is bounded too: the
    /// pool keeps a query waiting while it cannot connect.
    public func waitForServer(timeout: Duration = .seconds(15)) async throws {
        let deadline = ContinuousClock.now.advanced(by: timeout)
        var lastError: (any Error)?
        var attempt = 0
        while ContinuousClock.now < deadline {
            attempt += 1
            let (answered, error) = await probe(timeout: .seconds(2))
            if answered { return }
            lastError = error ?? lastError
            if attempt == 1 { logger.info("waiting for PostgreSQL", metadata: ["at": "\(settings.description)"]) }
            try await Task.sleep(for: .milliseconds(100))
        }
        throw RPCError.unavailable("PostgreSQL at \(settings.description) does not answer: \(lastError.map { Self.describe($0) } ?? "no connection within \(timeout)")")
    }

    // MARK: Reads and writes

    /// A read: one pooled connection, autocommit (each statement sees the latest commits).
    @discardableResult
    public func read<T>(_ body: (PostgresConnection) async throws -> T) async throws -> T {
        try await guarded {
            try await client.withConnection { connection in OneTask(try await connection.onItsLoop { try await body(connection) }) }.value
        }
    }

    /// Several reads that must agree: one read-only transaction on one snapshot (REPEATABLE READ).
    @discardableResult
    public func snapshot<T>(_ body: (PostgresConnection) async throws -> T) async throws -> T {
        try await guarded { try await inTransaction(begin: "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY") { (try await body($0), .commit) } }
    }

    /// One mutation, committed when this returns (see the type's comment for idempotent requests).
    /// - Parameters:
    ///   - committed: runs once the mutation committed, before the caller is answered.
    ///   - orderedBy: mutations with a `committed` action and the same key run one after another
    ///     (transaction and action), so their actions follow their commits: the key of what the
    ///     action announces (a user id for a profile event). Mutations of different keys run at
    ///     once, as PostgreSQL allows. Nil: one order for all of them (every such mutation waits
    ///     for the one before). SQLite's write queue orders everything; measured, one order for all
    ///     cut PostgreSQL's durable edits at 64 in flight to a single connection's commit rate.
    @discardableResult
    public func write<T: Sendable>(_ body: (PostgresConnection) async throws -> T,
                                   committed: (@Sendable (T) -> Void)? = nil, orderedBy key: UInt64? = nil) async throws -> T {
        try await write(body, committed: committed, orderedBy: key.map { [$0] })
    }

    /// As `write(_:committed:orderedBy:)`, ordered by several keys at once: a mutation whose
    /// action announces facts about several things (two people) holds each one's turn, so it is
    /// ordered with every mutation that shares any of them. Keys are taken in ascending order, so
    /// two mutations never wait for each other. Nil: one order for all.
    ///
    /// - Parameter reply: the encoded response the handler answers with for `body`'s result:
    ///   written over the claim in the same transaction when the request's scope keeps its reply
    ///   (a keyed request started on the host's reactor: `IdempotencyScope.reply(payload:)`), so
    ///   the host saves nothing after the commit (as `ServiceDatabase.write(as:_:reply:then:)`).
    @discardableResult
    public func write<T: Sendable>(_ body: (PostgresConnection) async throws -> T,
                                   committed: (@Sendable (T) -> Void)?, orderedBy keys: [UInt64]?,
                                   reply: (@Sendable (T) -> [UInt8])? = nil) async throws -> T {
        let idempotency = IdempotencyScope.current
        let keeping = ServiceDatabase.repliesInTransaction ? reply : nil
        return try await guarded {
            guard let committed else { return try await transaction(idempotency: idempotency, body, reply: keeping).result }
            let turns: [UInt64?] = keys.map { Array(Set($0)).sorted() } ?? [nil]
            for key in turns { await ordered.acquire(key) }
            defer { for key in turns.reversed() { ordered.release(key) } }
            guard let log = eventLog.withLock({ $0 }) else {
                let (result, applied) = try await transaction(idempotency: idempotency, body, reply: keeping)
                if applied { committed(result) }
                return result
            }
            // With an event log, the action runs inside the transaction: what it emits is kept
            // with the mutation, so it commits (and is numbered) with it, or not at all.
            let capture = EventCapture()
            let (result, applied) = try await transaction(idempotency: idempotency, body, reply: keeping) { connection, result in
                EventCapture.$current.withValue(capture) { committed(result) }
                try await log.append(capture, on: connection)
            }
            if applied { log.committed(capture) }
            return result
        }
    }

    /// A transaction outside any request's claim (start-up, workers).
    @discardableResult
    public func transaction<T>(_ body: (PostgresConnection) async throws -> T) async throws -> T {
        try await guarded { try await transaction(idempotency: nil, body).result }
    }

    /// Every way in: refused at once while the server is known not to answer (`watch`), errors
    /// mapped for requests (`mapped`), and statements prepared or not as the settings say
    /// (`PostgresConnection.prepared`).
    private func guarded<T>(_ work: () async throws -> T) async throws -> T {
        guard reachable.load(ordering: .relaxed) else {
            throw RPCError.unavailable("the database is unavailable: PostgreSQL does not answer")
        }
        do {
            return try await QueryStatement.$prepares.withValue(settings.preparedStatements) { try await work() }
        } catch {
            throw Self.mapped(error)
        }
    }

    /// The first row's value of a one-column result, nil when there is none.
    public static func first<T, Rows: AsyncSequence>(_ rows: Rows, _ type: T.Type) async throws -> T?
        where T: PostgresDecodable & Sendable, Rows.Element == PostgresRow {
        for try await value in rows.decode(T.self) { return value }
        return nil
    }

    /// Whether a statement gave any row.
    public static func exists<Rows: AsyncSequence>(_ rows: Rows) async throws -> Bool where Rows.Element == PostgresRow {
        for try await _ in rows { return true }
        return false
    }

    /// The ids of a one-column bigint result, in its order.
    public static func ids<Rows: AsyncSequence>(_ rows: Rows) async throws -> [UInt64] where Rows.Element == PostgresRow {
        var ids: [UInt64] = []
        for try await id in rows.decode(Int64.self) { ids.append(UInt64(id)) }
        return ids
    }

    /// How many rows a statement gave (`… RETURNING 1`: how many it changed).
    public static func count<Rows: AsyncSequence>(_ rows: Rows) async throws -> Int where Rows.Element == PostgresRow {
        var n = 0
        for try await _ in rows { n += 1 }
        return n
    }

    /// - Parameter beforeCommit: runs after `body` in a transaction that will commit (not in a
    ///   dry run), on its connection: a write's events are appended there.
    /// - Parameter reply: see `write(_:committed:orderedBy:reply:)`; once committed, the reply
    ///   written is handed to the run's ledger (`ClaimLedger.keep`).
    private func transaction<T>(idempotency: IdempotencyScope?, _ body: (PostgresConnection) async throws -> T,
                                reply: ((T) -> [UInt8])? = nil,
                                beforeCommit: ((PostgresConnection, T) async throws -> Void)? = nil) async throws -> (result: T, applied: Bool) {
        var kept: Envelope?
        let (result, applied, changedInDryRun) = try await inTransaction(begin: "BEGIN") { connection -> ((T, Bool, Bool), TransactionEnd) in
            // The claim first: a second run of the request (a retry sent to another instance
            // while the first run's transaction is still open, its host cut off) waits here for
            // the first to end, and is refused when it committed, before touching anything. Taken
            // last, the retry ran the mutation alongside and met the first run's rows instead
            // (a registration answered "username: already registered" to its own retry).
            if let idempotency, !idempotency.dryRun { try await PostgresReplyStore.claim(connection, idempotency, logger: logger) }
            let result = try await body(connection)
            if idempotency?.dryRun != true { try await beforeCommit?(connection, result) }
            guard let idempotency else { return ((result, true, false), .commit) }
            if let reply, let envelope = idempotency.reply(payload: reply(result)) {
                try await PostgresReplyStore.keep(connection, idempotency, envelope, logger: logger)
                kept = envelope
            }
            if idempotency.dryRun {
                // A transaction that wrote anything has been given a transaction id.
                let changed = try await connection.query("SELECT txid_current_if_assigned() IS NOT NULL", logger: logger)
                    .decode(Bool.self).first { _ in true } ?? false
                return ((result, false, changed), .rollback)
            }
            return ((result, true, false), .commit)
        }
        if changedInDryRun, let idempotency { throw idempotency.appliedOnceAlready }
        if let kept { idempotency?.claims.keep(kept) }
        return (result, applied)
    }

    private enum TransactionEnd { case commit, rollback }

    /// Runs `body` on one connection between `begin` and the end it asks for. On a throw the
    /// transaction is rolled back; a connection whose state is then unknown is closed, never
    /// returned to the pool inside a transaction.
    private func inTransaction<T>(begin: String, _ body: (PostgresConnection) async throws -> (T, TransactionEnd)) async throws -> T {
        try await client.withConnection { connection in OneTask(try await connection.onItsLoop {
            try connection.ensureOpen()
            try await connection.query(PostgresQuery(unsafeSQL: begin), logger: logger)
            do {
                let (result, end) = try await body(connection)
                try connection.ensureOpen()
                try await connection.query(end == .commit ? "COMMIT" : "ROLLBACK", logger: logger)
                return result
            } catch {
                if connection.isClosed { throw error } // the server ended the session: nothing to roll back
                do {
                    try await connection.query("ROLLBACK", logger: logger)
                } catch {
                    connection.close().whenComplete { _ in }
                }
                throw error
            }
        }) }.value
    }

    // MARK: Errors

    /// The SQLSTATE of a server error (`23505`: a unique key taken), nil for other errors.
    public static func sqlState(_ error: any Error) -> String? {
        (error as? PSQLError)?.serverInfo?[.sqlState]
    }

    /// The constraint a server error names (a unique index's name), if any.
    public static func constraint(_ error: any Error) -> String? {
        (error as? PSQLError)?.serverInfo?[.constraintName]
    }

    /// Errors a request may show: a server's refusal stays as it is (stores map the ones they
    /// expect); a connection that failed or a pool that is gone is UNAVAILABLE, so clients retry.
    static func mapped(_ error: any Error) -> any Error {
        guard let psql = error as? PSQLError else { return error }
        if psql.serverInfo?[.sqlState] != nil { return error }
        return RPCError.unavailable("the database is unavailable (\(psql.code))")
    }

    /// An error's text for a log line: the server's message and code, never the query's binds.
    public static func describe(_ error: (any Error)?) -> String {
        guard let error else { return "no answer" }
        if let psql = error as? PSQLError {
            if let info = psql.serverInfo {
                return "\(info[.sqlState] ?? "?"): \(info[.message] ?? "\(psql.code)")"
            }
            return "\(psql.code)"
        }
        return "\(error)"
    }
}

/// One schema change: statements run in one transaction with the record that it ran.
public struct PostgresMigration: Sendable {
    public let name: String
    public let statements: [String]

    public init(_ name: String, _ statements: [String]) {
        self.name = name
        self.statements = statements
    }
}
