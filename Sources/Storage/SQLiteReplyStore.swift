public import GRDB
public import Foundation
public import Wire
public import FriensoProto
import Synchronization

/// Keeps replies to idempotent requests in the service's own database, so a retry after a
/// restart (Lazy Pirate resends after reopening the socket) is answered, not applied again.
public final class SQLiteReplyStore: ReplyStore {
    private let database: ServiceDatabase
    private let retention: TimeInterval
    /// Replies saved at about the same time share one transaction (one fsync): under load a
    /// mutation with a key cost two fsyncs on the single writer, its own and its reply's.
    /// Only on the A/B path (`FRIENSO_REPLY_SAVES=own-batches`): by default a save rides in the
    /// write queue's next batch, with the mutations (`ServiceDatabase.writeAlong`).
    private let saves: GroupCommit<(key: String, stored: StoredReply), Void>
    private let pruning = PruneClock()

    public static func migrate(_ migrator: inout DatabaseMigrator) {
        migrator.registerMigration("idempotent_replies") { db in
            try db.create(table: "idempotent_replies") { t in
                t.primaryKey("key", .text)
                t.column("reply", .blob).notNull()
                t.column("created_at", .double).notNull().indexed()
            }
        }
        // Keys no longer include the payload's digest: it is stored beside the reply, so a key
        // reused for a different request is recognised and refused.
        migrator.registerMigration("idempotent_replies_digest") { db in
            try db.execute(sql: "DELETE FROM idempotent_replies")
            try db.alter(table: "idempotent_replies") { t in t.add(column: "digest", .integer).notNull().defaults(to: 0) }
        }
        // Expired replies are found by rowid, which grows with `created_at` (`prune`): the index
        // on `created_at` cost a page write in every commit that claimed or saved a reply, and
        // two when a save replaced its claim (issue 16, `docs/benchmarks.md` item 66).
        migrator.registerMigration("idempotent_replies_pruned_by_rowid") { db in
            try db.execute(sql: "DROP INDEX IF EXISTS idempotent_replies_on_created_at")
        }
    }

    /// - Parameter retention: how long a reply is kept (a day by default: far longer than any retry).
    public init(database: ServiceDatabase, retention: TimeInterval = 86_400) {
        self.database = database
        self.retention = retention
        let pruning = pruning
        saves = GroupCommit(label: "reply-store") { batch in
            let now = Date().timeIntervalSince1970
            let prune = pruning.due(now: now)
            try database.write { db in
                for (key, stored) in batch { try Self.store(db, key, stored, now: now) }
                if prune { try Self.prune(db, before: now - retention) }
            }
            return batch.map { _ in () }
        }
    }

    /// `FRIENSO_REPLY_SAVES=own-batches` saves replies in batches of their own, as before: for
    /// A/B runs of `frienso-bench` (the launcher's children inherit it).
    static let savesAlong = ProcessInfo.processInfo.environment["FRIENSO_REPLY_SAVES"] != "own-batches"

    /// Expired replies go at most once a minute, not with every save.
    private final class PruneClock: Sendable {
        private let last = Mutex<TimeInterval>(0)

        func due(now: TimeInterval) -> Bool {
            last.withLock { last in
                guard now - last >= 60 else { return false }
                last = now
                return true
            }
        }
    }

    /// Saves a reply over its request's claim in place: the row keeps its rowid and its
    /// `created_at` (the claim's), so only the table's page changes, not the key's index page
    /// (`INSERT OR REPLACE` deleted the row and inserted it again, writing both).
    private static func store(_ db: Database, _ key: String, _ stored: StoredReply, now: TimeInterval) throws {
        try db.run(sql: """
            INSERT INTO idempotent_replies (key, reply, digest, created_at) VALUES (?, ?, ?, ?)
            ON CONFLICT (key) DO UPDATE SET reply = excluded.reply, digest = excluded.digest
            """, binding: key, Data(stored.reply?.serializedBytes() ?? []), Int64(bitPattern: stored.digest), now)
    }

    /// Deletes the replies kept since before `cutoff`, without an index on `created_at`.
    ///
    /// A row's rowid is one past the largest at its insert, so rowids grow with `created_at`
    /// (both are set when the claim is written, and a save keeps both). A binary search over
    /// rowids (each probe one lookup in the table's own tree) finds the first row kept since
    /// `cutoff`; everything before it goes. The delete also checks `created_at`, so a row is
    /// never deleted early, whatever the order (a clock set back, or `VACUUM` renumbering rows):
    /// at worst such a row is kept until a later pass.
    static func prune(_ db: Database, before cutoff: TimeInterval) throws {
        guard let ends = try Row.fetchOne(db, cached: "SELECT min(rowid), max(rowid) FROM idempotent_replies", as: { try ($0[0] as Int64?, $0[1] as Int64?) }),
              let first = ends.0, let last = ends.1 else { return }
        // Rows before `low` were made before `cutoff`; the first row at or after `high` was not.
        var low = first, high = last + 1
        while low < high {
            let middle = low + (high - low) / 2
            guard let (rowid, createdAt) = try Row.fetchOne(db, cached: "SELECT rowid, created_at FROM idempotent_replies WHERE rowid >= ? ORDER BY rowid LIMIT 1",
                                                            binding: middle, as: { try ($0[0] as Int64, $0[1] as Double) }) else {
                high = middle
                continue
            }
            if createdAt < cutoff { low = rowid + 1 } else { high = middle }
        }
        try db.run(sql: "DELETE FROM idempotent_replies WHERE rowid < ? AND created_at < ?", arguments: [low, cutoff])
    }

    public func load(_ key: String) async -> StoredReply? {
        let found = try? await database.read { db -> (Data, Int64)? in
            try Row.fetchOne(db, cached: "SELECT reply, digest FROM idempotent_replies WHERE key = ?", binding: key) {
                try ($0["reply"] as Data, $0["digest"] as Int64)
            }
        }
        guard let (bytes, stored) = found ?? nil else { return nil }
        let digest = UInt64(bitPattern: stored)
        // An empty reply is a claim: the mutation committed, its reply was never saved.
        guard !bytes.isEmpty else { return StoredReply(digest: digest, reply: nil) }
        guard let reply = try? Envelope(serializedBytes: Array(bytes)) else { return nil }
        return StoredReply(digest: digest, reply: reply)
    }

    /// Part of erasing a deleted account: deletes the replies kept for `user`'s own requests
    /// (keys `u<id>|…`, see `ReplyCache.key`; nobody can resend those: their sessions are gone),
    /// and clears every other kept reply whose bytes mention one of `traces` (the person's
    /// username, email, phone, names: a friend's reply naming them, an anonymous Register's
    /// reply). A cleared reply stays a claim, so a resend of that request is still a dry run,
    /// never applied twice (see `ServiceDatabase`). - Returns: rows deleted or cleared.
    @discardableResult
    public static func eraseReplies(_ db: Database, of user: UInt64, mentioning traces: [String]) throws -> Int {
        // '}' follows '|' in ASCII: the range is exactly the keys that start with "u<id>|".
        try db.run(sql: "DELETE FROM idempotent_replies WHERE key >= ? AND key < ?", arguments: ["u\(user)|", "u\(user)}"])
        var erased = db.changesCount
        for trace in Set(traces) where trace.utf8.count >= 3 {
            try db.run(sql: "UPDATE idempotent_replies SET reply = x'' WHERE length(reply) > 0 AND instr(reply, ?) > 0",
                       arguments: [Data(trace.utf8)])
            erased += db.changesCount
        }
        return erased
    }

    /// Records, inside a mutation's transaction, that the request `key` was applied.
    /// - Throws: `claimedAlready` when the key has a claim or a reply that this run of the request
    ///   did not write (`ClaimLedger`): the reply cache's read of it missed (it failed, or another
    ///   process applied the request meanwhile) or was skipped (a method that claims first), and
    ///   applying the mutation again would apply it twice; the mutation is rolled back instead,
    ///   and the run is marked collided (the host then answers from the store).
    /// - Returns: whether it wrote the claim (false: this run's own claim was there already);
    ///   the caller tells the ledger (`ClaimLedger.wrote`) once the mutation went through.
    static func claim(_ db: Database, _ scope: IdempotencyScope) throws -> Bool {
        try db.run(sql: "INSERT OR IGNORE INTO idempotent_replies (key, reply, digest, created_at) VALUES (?, x'', ?, ?)",
                   binding: scope.key, Int64(bitPattern: scope.digest), Date().timeIntervalSince1970)
        if db.changesCount == 1 { return true }
        if scope.claims.mustBeFirst {
            scope.claims.collided()
            throw claimedAlready(scope.key)
        }
        return false
    }

    /// Writes `reply` on top of the request's claim, in the mutation's own transaction (after
    /// `claim`, in the same savepoint): `ServiceDatabase.write(as:_:reply:then:)`.
    @usableFromInline
    static func keep(_ db: Database, _ scope: IdempotencyScope, _ reply: Envelope) throws {
        try db.run(sql: "UPDATE idempotent_replies SET reply = ? WHERE key = ?", binding: Data(reply.serializedBytes()), scope.key)
        guard db.changesCount == 1 else { throw StoreInvariant("the claim of \(scope.key) was not there for its reply") }
    }

    /// A mutation whose request was applied under its key already: refused (rolled back), as a
    /// transient error, so the client's retry is answered with the stored reply.
    public static func claimedAlready(_ key: String) -> RPCError {
        IdempotencyScope.claimedAlready(key)
    }

    /// Saves the reply on top of the request's claim. By default it rides in the write queue's
    /// next batch (`writeAlong`): under load there always is one, so a save costs no commit of
    /// its own (in `stack`, saves in batches of their own were 29% of geo's commits and 38% of
    /// alerts', each a turn of the single writer). Nobody's acknowledgement waits for it; `flush`
    /// does. `done` runs on the writer's queue once the batch committed: no task is made for it.
    public func save(_ key: String, _ stored: StoredReply, then done: @escaping @Sendable () -> Void) {
        guard Self.savesAlong, ServiceDatabase.groupCommit else {
            saves.submit((key, stored)) { _ in done() }
            return
        }
        let now = Date().timeIntervalSince1970, retention = retention
        let prune = pruning.due(now: now)
        database.writeAlong({ db in
            try Self.store(db, key, stored, now: now)
            if prune { try Self.prune(db, before: now - retention) }
        }, then: { _ in done() })
    }

    public func save(_ key: String, _ stored: StoredReply) async {
        await withCheckedContinuation { (saved: CheckedContinuation<Void, Never>) in save(key, stored) { saved.resume() } }
    }
}
