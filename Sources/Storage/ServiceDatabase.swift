public import GRDB
import Foundation
public import Wire
public import FriensoProto
import Synchronization

/// A service's SQLite database, opened the same way everywhere (WAL, a busy timeout, foreign keys,
/// `synchronous = FULL`), with the one mechanism that makes an idempotent mutation and its claim
/// commit together: an async `write` made while the task serves a request with an idempotency
/// key (`IdempotencyScope`, bound by the host) inserts the request's claim into
/// `idempotent_replies` in the same transaction. The reply is saved on top of the claim once the
/// handler returns (it may need other services' answers, so it cannot always be built inside
/// the transaction). If the process dies between the two, a retry finds the claim without a
/// reply and the handler runs again as a dry run: every transaction it opens is rolled back, so
/// nothing is applied twice. When the dry run changed nothing (the handler found its work done:
/// a pending request returned as it is, an alert raised under that key), its reply is the answer;
/// when it would have changed rows (a handler that creates something anew each time), that reply
/// would describe rows that do not exist, so the retry is answered ALREADY_EXISTS: applied once,
/// reply lost, read the state. A handler started on the host's reactor that can build its reply
/// from its write's result hands it to `write(as:_:reply:then:)`, which writes it over the claim
/// in the same savepoint: that window is then closed (geo's check-ins).
///
/// The handlers keep to "one decision, one transaction" (a mutation is one `write`), which is
/// what lets the claim stand for the whole mutation.
public final class ServiceDatabase: Sendable {
    public let pool: DatabasePool
    /// Where async mutations wait for their batch (see `WriteQueue`).
    @usableFromInline let writes: WriteQueue
    /// Checkpoints the WAL off the commit path (see `Checkpointer`).
    let checkpointer: Checkpointer

    /// The connections reads in place use (nil: GRDB's pool serves them, `FRIENSO_READERS=pool`).
    let readers: InPlaceReaders?

    init(pool: DatabasePool, checkpointer: Checkpointer, readers: InPlaceReaders?) {
        self.pool = pool
        self.checkpointer = checkpointer
        self.readers = readers
        writes = WriteQueue(pool: pool, linger: Self.saveLinger)
    }

    deinit {
        readers?.close() // before the pool's writer, as GRDB closes its own readers first
    }

    /// How long a write nobody waits for (a reply's save, `writeAlong`) waits for a mutation's
    /// batch to ride in before it is committed alone: at a few hundred mutations a second (alerts'
    /// raises in `stack`), each save otherwise took a commit and an fsync of its own. The claim
    /// committed with the mutation covers a crash meanwhile, as it covers one before the save.
    /// `FRIENSO_SAVE_LINGER_MS` (0: a save starts its batch at once, as before) for A/B runs.
    static let saveLinger: Duration? = {
        let ms = ProcessInfo.processInfo.environment["FRIENSO_SAVE_LINGER_MS"].flatMap(Int.init) ?? 25
        return ms > 0 ? .milliseconds(ms) : nil
    }()

    /// WAL checkpoints run by the background checkpointer so far.
    public var checkpoints: Int { checkpointer.runs.load(ordering: .relaxed) }

    /// - Parameter path: the database file; its folder is created when missing.
    static let tempStoreInMemory = ProcessInfo.processInfo.environment["FRIENSO_TEMP_STORE"] != "file"

    public static func open(_ path: String) throws -> ServiceDatabase {
        try open(path, walRestartPages: Checkpointer.restartPages)
    }

    /// - Parameter walRestartPages: WAL frames past which a checkpoint restarts the log (tests lower it).
    static func open(_ path: String, walRestartPages: Int) throws -> ServiceDatabase {
        try FileManager.default.createDirectory(atPath: (path as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
        var configuration = Configuration()
        configuration.busyMode = .timeout(5)
        // Reads run on the tasks' own threads (`read`): enough readers that they never wait for
        // one another on a machine with many cores.
        configuration.maximumReaderCount = max(5, ProcessInfo.processInfo.activeProcessorCount * 2)
        let signal = Checkpointer.Signal()
        configuration.prepareDatabase { db in
            // FULL: a write acknowledged to a client is on disk, even across a power cut (the
            // writer's is set again below: the pool's WAL set-up lowers it).
            try db.execute(sql: "PRAGMA synchronous = FULL")
            // Deleted rows are overwritten with zeros, not left in free space: an erased account
            // must not survive in the file's unused pages (see `truncateWAL`).
            try db.execute(sql: "PRAGMA secure_delete = ON")
            // Statement journals in memory: each mutation of a group commit runs in a savepoint,
            // and SQLite keeps the pages a savepoint changes in a statement journal, spilled to
            // an unlinked temporary file past 64 KiB: in `stack`, alerts wrote ~4,700 pages a
            // second there (two `pwrite`s each), more than its WAL. Nothing durable lives in
            // them (a crash rolls back through the WAL), and no erased row reaches a disk this
            // way. `FRIENSO_TEMP_STORE=file` keeps SQLite's default, for A/B runs.
            if Self.tempStoreInMemory { try db.execute(sql: "PRAGMA temp_store = MEMORY") }
            // When the log starts over (`Checkpointer`), a WAL file a burst made larger than
            // this is cut back to it (64 MiB) rather than kept at its largest.
            try db.execute(sql: "PRAGMA journal_size_limit = 67108864")
            // No checkpoint inside a commit: the WAL's growth is signalled to the checkpointer.
            Checkpointer.install(on: db, signal: signal)
        }
        let pool = try DatabasePool(path: path, configuration: configuration) // WAL mode
        // Again on the writer, after the pool's set-up: GRDB's `setUpWALMode` sets `synchronous =
        // NORMAL` after `prepareDatabase` has run, and NORMAL syncs the WAL only at checkpoints,
        // so an acknowledged commit could be lost to a power cut (a kill -9 keeps it: it is in
        // the OS's page cache). FULL syncs the WAL at every commit, before anyone is answered.
        try pool.writeWithoutTransaction { db in try db.execute(sql: "PRAGMA synchronous = FULL") }
        let checkpointer = Checkpointer(path: path, restartPages: walRestartPages)
        checkpointer.restart { [weak pool] in
            try pool?.writeWithoutTransaction { db in
                // Waits this long at most for readers to leave the old frames, holding commits
                // back meanwhile; busy: tried again at the next checkpoint.
                try db.execute(sql: "PRAGMA busy_timeout = 200")
                defer { try? db.execute(sql: "PRAGMA busy_timeout = 5000") }
                _ = try db.checkpoint(.restart)
            }
        }
        signal.attach(checkpointer)
        let readers = InPlaceReaders.enabled
            ? InPlaceReaders(path: path, configuration: configuration, limit: configuration.maximumReaderCount) : nil
        return ServiceDatabase(pool: pool, checkpointer: checkpointer, readers: readers)
    }

    public func read<T>(_ value: (Database) throws -> T) throws -> T {
        try readHere(value)
    }

    /// A read from a request: a few index lookups, bounded by a key or a LIMIT. It runs on the
    /// calling task's thread, in a read transaction of a reader connection (WAL: it never waits
    /// for the writer). Handing it to the reader's queue instead, as GRDB's async `read` does,
    /// costs two thread switches and a continuation per read, more than the read itself: under
    /// 64 helpNow raises in flight that hop was a fifth of the throughput (`docs/benchmarks.md`,
    /// issue 16, item 15). The connection is one of `InPlaceReaders`' (item 75), else a pool
    /// reader. A read that may visit a large part of a table uses `scan`.
    public func read<T: Sendable>(_ value: @escaping @Sendable (Database) throws -> T) async throws -> T {
        if Self.readsInPlace { return try readHere(value) }
        return try await pool.read(value)
    }

    /// A read that may take long (a scan with no index to bound it): on the reader's own queue,
    /// so the task's thread stays free for others meanwhile.
    public func scan<T: Sendable>(_ value: @escaping @Sendable (Database) throws -> T) async throws -> T {
        try await pool.read(value)
    }

    /// `value` read on this thread (`read`). Generic code called from another module runs
    /// unspecialized, and there every `T?` (a reader's "none idle", a transaction's result, a
    /// local to keep the result in) is a lookup in the runtime's metadata cache, about 430
    /// instructions each: five a read through the generic chain this replaced. So only this
    /// function is generic, the result made in a slot of its own (no `T?`), and `readOnce`
    /// below it is not generic (`docs/benchmarks.md`, issue 16, item 115).
    private func readHere<T>(_ value: (Database) throws -> T) throws -> T {
        // Not `withUnsafeTemporaryAllocation`: its `Result` is another lookup. A malloc is less.
        let slot = UnsafeMutablePointer<T>.allocate(capacity: 1)
        defer { slot.deallocate() }
        var made = false
        do {
            try readOnce { db in
                slot.initialize(to: try value(db))
                made = true
            }
        } catch {
            if made { slot.deinitialize(count: 1) } // the transaction's end failed after the value was made
            throw error
        }
        guard made else { throw StoreInvariant("the read did not run") }
        return slot.move()
    }

    /// `body` in a read transaction of an idle in-place reader, else of a pool reader.
    private func readOnce(_ body: (Database) throws -> Void) throws {
        if let readers, try readers.read(body) != nil { return }
        try CachedTransactions.read(pool, body)
    }

    /// `FRIENSO_READS=queued` sends every async read to the reader's queue, as before item 15:
    /// for A/B runs of `frienso-bench` (the launcher's children inherit it).
    static let readsInPlace = ProcessInfo.processInfo.environment["FRIENSO_READS"] != "queued"

    /// A synchronous write (start-up, migrations, workers): never part of a request's claim.
    public func write<T>(_ updates: (Database) throws -> T) throws -> T {
        try pool.writeWithoutTransaction { db in
            var result: T?
            try CachedTransactions.transaction(db) {
                result = try updates(db)
                return .commit
            }
            guard let result else { throw StoreInvariant("the write produced no result") }
            return result
        }
    }

    /// One mutation, atomic and durable when this returns: group-committed with the mutations
    /// made at the same time (`WriteQueue`: one transaction, a savepoint each, one fsync). When
    /// the task serves an idempotent request, its claim commits with it (or, in a dry run,
    /// nothing of it commits).
    @inlinable
    public func write<T: Sendable>(_ updates: @escaping @Sendable (Database) throws -> T) async throws -> T {
        try await write(updates, committed: nil)
    }

    /// The same, and `committed` runs with the result once the mutation is durable, before the
    /// caller is answered, in commit order across every caller (on the commit queue: keep it
    /// short): for events that must follow the order of the changes they announce.
    ///
    /// This and `write(as:_:reply:then:)` are inlinable, so that each service's mutation is
    /// specialized for its result type: unspecialized, a mutation asked the Swift runtime for the
    /// metadata of its result's optionals, `Result`s and box about eight times
    /// (`docs/benchmarks.md`, issue 16, item 135).
    @inlinable
    public func write<T: Sendable>(_ updates: @escaping @Sendable (Database) throws -> T,
                                   committed: (@Sendable (T) -> Void)?) async throws -> T {
        let scope = MutationScope()
        guard Self.groupCommit else {
            // The path before group commit, for A/B measurements (`FRIENSO_GROUP_COMMIT=off`).
            return try await pool.writeWithoutTransaction { db in
                var result: T?
                let applied = try scope.transaction(db) { result = try updates(db) }
                guard let result else { throw StoreInvariant("the mutation produced no result") }
                if applied { committed?(result) }
                return result
            }
        }
        let box = OutcomeBox<T>()
        try await writes.submit(WriteQueue.Pending(
            run: { db in
                box.outcome = Result {
                    var result: T?
                    try scope.savepoint(db) { result = try updates(db) }
                    guard let result else { throw StoreInvariant("the mutation produced no result") }
                    return result
                }
            },
            committed: {
                guard let committed, !scope.isDryRun, case .success(let result) = box.outcome else { return }
                committed(result)
            }))
        // Written on the commit queue before the batch's waiters were resumed.
        return try (box.outcome ?? .failure(StoreInvariant("the mutation did not run"))).get()
    }

    /// The same mutation without a task (a handler started on the host's reactor,
    /// `MethodRouter.startOnReactor(_:keyed:_:)`): `scope` is the request's, which a task would
    /// have bound (`RequestContext.idempotency`), and `done` runs with the outcome on the commit's
    /// queue once the batch holding it committed (or failed). Keep `done` short.
    ///
    /// - Parameter reply: the encoded response the handler answers with for `updates`' result:
    ///   the reply is then written in the same savepoint, on top of the claim, so the mutation and
    ///   its reply become durable together (`IdempotencyScope.reply(payload:)`), and the host
    ///   answers with it and saves nothing after (`ClaimLedger.keptReply`). Without it, or for a
    ///   scope that keeps no reply, the host saves the reply after the commit, as on a task.
    @inlinable
    public func write<T: Sendable>(as scope: IdempotencyScope?, _ updates: @escaping @Sendable (Database) throws -> T,
                                   reply: (@Sendable (T) -> [UInt8])? = nil,
                                   then done: @escaping @Sendable (Result<T, any Error>) -> Void) {
        guard Self.groupCommit else {
            // No write queue to hand it to (A/B runs without group commit): the async path on a task.
            return IdempotencyScope.onTask(bound: scope, { try await self.write(updates) }, then: done)
        }
        let mutation = MutationScope(idempotency: scope)
        let keeping = Self.repliesInTransaction ? reply : nil
        let box = OutcomeBox<(T, kept: Envelope?)>()
        writes.submit(WriteQueue.Pending(run: { db in
            box.outcome = Result {
                var result: T?, kept: Envelope?
                try mutation.savepoint(db) {
                    let made = try updates(db)
                    if let keeping, let scope, let envelope = scope.reply(payload: keeping(made)) {
                        try SQLiteReplyStore.keep(db, scope, envelope)
                        kept = envelope
                    }
                    result = made
                }
                guard let result else { throw StoreInvariant("the mutation produced no result") }
                return (result, kept)
            }
        })) { committed in
            let outcome = committed.flatMap { box.outcome ?? .failure(StoreInvariant("the mutation did not run")) }
            if case .success((_, let kept?)) = outcome { scope?.claims.keep(kept) }
            done(outcome.map(\.0))
        }
    }

    /// `FRIENSO_KEPT_REPLIES=after` saves the reply of a keyed request started on the host's
    /// reactor after its commit, as before replies were written in the mutation's savepoint:
    /// for A/B runs of `frienso-bench` (the launcher's children inherit it).
    @usableFromInline static let repliesInTransaction = ProcessInfo.processInfo.environment["FRIENSO_KEPT_REPLIES"] != "after"

    /// Writes `updates` in the write queue's next batch, beside the mutations waiting for it (one
    /// commit, one fsync for all; alone, it waits up to `saveLinger` for one), and calls `done` on
    /// the writer's queue once that batch committed (or failed): for writes that carry no
    /// request's claim and that nobody waits for (a reply saved on top of its claim). No
    /// savepoint of its own: keep `updates` to statements that each stand alone (SQLite undoes a
    /// failed statement by itself; a failure that ends the transaction fails the whole batch).
    func writeAlong(_ updates: @escaping @Sendable (Database) throws -> Void,
                    then done: @escaping @Sendable (Result<Void, any Error>) -> Void) {
        let box = OutcomeBox<Void>()
        writes.submit(WriteQueue.Pending(run: { db in box.outcome = Result { try updates(db) } }, lingers: true)) { committed in
            done(committed.flatMap { box.outcome ?? .failure(StoreInvariant("the write did not run")) })
        }
    }

    /// A stream of writes the service batches itself (geo's location updates), committed in the
    /// write queue's batches beside the other mutations (`BatchedWrites`).
    public func batchedWrites<Item: Sendable, Output: Sendable>(label: String, maxBatch: Int = 4_096,
                                                               _ write: @escaping BatchedWrites<Item, Output>.Write) -> BatchedWrites<Item, Output> {
        BatchedWrites(label: label, queue: writes, maxBatch: maxBatch, write: write)
    }

    /// `FRIENSO_GROUP_COMMIT=off` commits each mutation on its own, as before group commit: for
    /// A/B runs of `frienso-bench` (the launcher's children inherit it). On by default.
    @usableFromInline static let groupCommit = ProcessInfo.processInfo.environment["FRIENSO_GROUP_COMMIT"] != "off"

    /// Mutations committed through the write queue, and the batches they took (for the benchmark).
    public var groupCommits: (batches: Int, mutations: Int) { writes.counts }

    public func writeWithoutTransaction<T>(_ updates: (Database) throws -> T) rethrows -> T {
        try pool.writeWithoutTransaction(updates)
    }

    /// The writer, for code that opens its own transaction and acts once it committed (publishing
    /// events, unlinking files): it must open it with `scope.transaction`, so the request's claim
    /// commits with it, and act only when that returns true.
    public func writeWithoutTransaction<T: Sendable>(_ updates: @escaping @Sendable (Database, MutationScope) throws -> T) async throws -> T {
        let scope = MutationScope()
        return try await pool.writeWithoutTransaction { db in try updates(db, scope) }
    }

    public func migrate(_ migrator: DatabaseMigrator) throws {
        try migrator.migrate(pool)
    }

    /// Copies every WAL frame into the database file and truncates the WAL to nothing (waiting
    /// for readers up to the busy timeout; throws when it could not). After an erasure: the rows
    /// are zeroed in the database file (`secure_delete`), but older copies of their pages may
    /// linger in the WAL, which SQLite reuses from its start rather than shortens.
    public func truncateWAL() async throws {
        try await pool.writeWithoutTransaction { db in
            let result = try db.checkpoint(.truncate)
            guard result.walFrameCount == 0 || result.checkpointedFrameCount == result.walFrameCount else {
                throw StoreInvariant("the WAL could not be checkpointed whole (readers held it)")
            }
        }
    }
}
