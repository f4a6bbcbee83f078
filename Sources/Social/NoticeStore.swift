import GRDB
import FriensoProto

/// Notices: what the alerts service delivers for social (pokes, coreFriend requests, SMS
/// invitations to non-users), written in the transaction of the change they report and numbered,
/// so the alerts service can pull every one after the last id it stored.
extension SocialStore {
    static func migrateNotices(_ migrator: inout DatabaseMigrator) {
        migrator.registerMigration("notices") { db in
            try db.create(table: "notices") { t in
                t.autoIncrementedPrimaryKey("id")
                t.column("kind", .integer).notNull()
                t.column("from_user", .integer).notNull()
                t.column("to_user", .integer).notNull()
                t.column("to_phone", .text).notNull()
                t.column("created_at_ms", .integer).notNull()
            }
        }
    }

    static func addNotice(_ db: Database, _ kind: SocialV1.NoticeKind, from: UInt64, toUser: UInt64, toPhone: String, now: Int64) throws {
        try db.execute(sql: "INSERT INTO notices (kind, from_user, to_user, to_phone, created_at_ms) VALUES (?, ?, ?, ?, ?)",
                       arguments: [kind.rawValue, from, toUser, toPhone, now])
    }

    /// Notices after `id`, oldest first.
    func notices(after id: UInt64, limit: Int) async throws -> [SocialV1.Notice] {
        try await database.read { db in
            try Row.fetchAll(db, sql: "SELECT id, kind, from_user, to_user, to_phone, created_at_ms FROM notices WHERE id > ? ORDER BY id LIMIT ?",
                             arguments: [id, limit]).map { row in
                SocialV1.Notice(noticeId: row[0], kind: SocialV1.NoticeKind(rawValue: row[1]),
                                from: SocialV1.UserRef(userId: row[2]), toUserId: row[3], toPhone: row[4], createdAtMs: row[5])
            }
        }
    }
}
