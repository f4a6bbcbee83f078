public import PostgresNIO
public import Logging
public import Wire
public import Foundation
import FriensoProto
import Synchronization

/// `SQLiteReplyStore`'s twin on PostgreSQL: replies to idempotent mutations, kept a day, so a
/// retry after a restart (or on another instance of the service) is answered, not applied again.
public final class PostgresReplyStore: ReplyStore {
    private let database: PostgresServiceDatabase
    private let retention: TimeInterval
    private let pruned = Mutex<TimeInterval>(0)

    public static let migrations = [
        PostgresMigration("idempotent_replies", [
            """
            CREATE TABLE idempotent_replies (
                key text COLLATE "C" PRIMARY KEY,
                reply bytea NOT NULL,
                digest bigint NOT NULL,
                created_at double precision NOT NULL)
            """,
            "CREATE INDEX idempotent_replies_created_at ON idempotent_replies (created_at)",
        ]),
    ]

    public init(database: PostgresServiceDatabase, retention: TimeInterval = 86_400) {
        self.database = database
        self.retention = retention
    }

    public func load(_ key: String) async -> StoredReply? {
        let found = try? await database.read { connection -> (Data, Int64)? in
            let rows = try await connection.prepared("SELECT reply, digest FROM idempotent_replies WHERE key = \(key)", logger: database.logger)
            for try await row in rows.decode((Data, Int64).self) { return row }
            return nil
        }
        guard let (bytes, stored) = found ?? nil else { return nil }
        let digest = UInt64(bitPattern: stored)
        guard !bytes.isEmpty else { return StoredReply(digest: digest, reply: nil) }
        guard let reply = try? Envelope(serializedBytes: Array(bytes)) else { return nil }
        return StoredReply(digest: digest, reply: reply)
    }

    public func save(_ key: String, _ stored: StoredReply) async {
        let now = Date().timeIntervalSince1970
        let prune = pruned.withLock { last in
            guard now - last >= 60 else { return false }
            last = now
            return true
        }
        let reply = Data(stored.reply?.serializedBytes() ?? [])
        let digest = Int64(bitPattern: stored.digest)
        let horizon = now - retention
        do {
            try await database.transaction { connection in
                try await connection.prepared("""
                    INSERT INTO idempotent_replies (key, reply, digest, created_at) VALUES (\(key), \(reply), \(digest), \(now))
                    ON CONFLICT (key) DO UPDATE SET reply = excluded.reply, digest = excluded.digest, created_at = excluded.created_at
                    """, logger: database.logger)
                if prune {
                    try await connection.prepared("DELETE FROM idempotent_replies WHERE created_at < \(horizon)", logger: database.logger)
                }
            }
        } catch {
            database.logger.warning("a reply was not saved", metadata: ["error": "\(PostgresServiceDatabase.describe(error))"])
        }
    }

    /// Records, inside a mutation's transaction, that the request `key` was applied. A claim
    /// made by another transaction not yet committed (another instance applying the same
    /// request) makes this one wait for it.
    /// - Throws: `SQLiteReplyStore.claimedAlready` when the key has a claim or a reply this run did
    ///   not write (see there): the mutation is rolled back instead of applied twice.
    static func claim(_ connection: PostgresConnection, _ scope: IdempotencyScope, logger: Logger) async throws {
        let empty = Data()
        let claimed = try await PostgresServiceDatabase.count(connection.prepared("""
            INSERT INTO idempotent_replies (key, reply, digest, created_at)
            VALUES (\(scope.key), \(empty), \(Int64(bitPattern: scope.digest)), \(Date().timeIntervalSince1970))
            ON CONFLICT (key) DO NOTHING RETURNING 1
            """, logger: logger))
        if claimed == 1 {
            scope.claims.wrote()
        } else if scope.claims.mustBeFirst {
            scope.claims.collided()
            throw SQLiteReplyStore.claimedAlready(scope.key)
        }
    }

    /// Writes `reply` over the request's claim, in the mutation's own transaction (after `claim`):
    /// `PostgresServiceDatabase.write(_:committed:orderedBy:reply:)`.
    static func keep(_ connection: PostgresConnection, _ scope: IdempotencyScope, _ reply: Envelope, logger: Logger) async throws {
        let bytes = Data(reply.serializedBytes())
        let updated = try await PostgresServiceDatabase.count(connection.prepared(
            "UPDATE idempotent_replies SET reply = \(bytes) WHERE key = \(scope.key) RETURNING 1", logger: logger))
        guard updated == 1 else { throw StoreInvariant("the claim of \(scope.key) was not there for its reply") }
    }

    /// As `SQLiteReplyStore.eraseReplies`: deletes `user`'s own kept replies and clears every
    /// other one whose bytes mention one of `traces` (a cleared reply stays a claim).
    @discardableResult
    public static func eraseReplies(_ connection: PostgresConnection, of user: UInt64, mentioning traces: [String], logger: Logger) async throws -> Int {
        let prefix = "u\(user)|"
        var erased = 0
        erased += try await PostgresServiceDatabase.count(connection.prepared("DELETE FROM idempotent_replies WHERE starts_with(key, \(prefix)) RETURNING 1", logger: logger))
        for trace in Set(traces) where trace.utf8.count >= 3 {
            let needle = Data(trace.utf8)
            erased += try await PostgresServiceDatabase.count(connection.prepared("""
                UPDATE idempotent_replies SET reply = '\\x'::bytea WHERE length(reply) > 0 AND position(\(needle) in reply) > 0 RETURNING 1
                """, logger: logger))
        }
        return erased
    }
}
