public import GRDB
public import Foundation
public import Wire
public import FriensoProto

/// Opens a service's SQLite database the same way everywhere: WAL, a busy timeout, foreign keys.
public enum ServiceDatabase {
    /// - Parameter path: the database file; its folder is created when missing.
    public static func open(_ path: String) throws -> DatabasePool {
        try FileManager.default.createDirectory(atPath: (path as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
        var configuration = Configuration()
        configuration.busyMode = .timeout(5)
        configuration.prepareDatabase { db in
            // FULL: a write acknowledged to a client is on disk, even across a power cut.
            try db.execute(sql: "PRAGMA synchronous = FULL")
        }
        return try DatabasePool(path: path, configuration: configuration) // WAL mode
    }
}

/// Keeps replies to idempotent requests in the service's own database, so a retry after a
/// restart (Lazy Pirate resends after reopening the socket) is answered, not applied again.
public final class SQLiteReplyStore: ReplyStore {
    private let database: DatabasePool
    private let retention: TimeInterval

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
    }

    /// - Parameter retention: how long a reply is kept (a day by default: far longer than any retry).
    public init(database: DatabasePool, retention: TimeInterval = 86_400) {
        self.database = database
        self.retention = retention
    }

    public func load(_ key: String) async -> StoredReply? {
        let row = try? await database.read { db in
            try Row.fetchOne(db, sql: "SELECT reply, digest FROM idempotent_replies WHERE key = ?", arguments: [key])
        }
        guard let row, let reply = try? Envelope(serializedBytes: Array(row["reply"] as Data)) else { return nil }
        return StoredReply(digest: UInt64(bitPattern: row["digest"] as Int64), reply: reply)
    }

    public func save(_ key: String, _ stored: StoredReply) async {
        let bytes = Data(stored.reply.serializedBytes())
        let now = Date().timeIntervalSince1970, cutoff = now - retention
        _ = try? await database.write { db in
            try db.execute(sql: "INSERT OR REPLACE INTO idempotent_replies (key, reply, digest, created_at) VALUES (?, ?, ?, ?)",
                           arguments: [key, bytes, Int64(bitPattern: stored.digest), now])
            try db.execute(sql: "DELETE FROM idempotent_replies WHERE created_at < ?", arguments: [cutoff])
        }
    }
}
