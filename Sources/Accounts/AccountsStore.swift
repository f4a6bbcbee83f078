import FriensoProto
import Foundation
import GRDB
import Storage
import Identity
import Wire

/// A user row.
struct UserRecord: Sendable {
    var id: UInt64
    var username: String
    var email: String
    var phone: String
    var passwordHash: String
    var firstName: String
    var lastName: String
    var profilePictureMediaID: String
    var createdAtMs: Int64

    /// The columns `init(row:)` reads, in its order: select exactly these. (Reading by position:
    /// GRDB's by-name lookup lower-cases names on every access, which made a 200-profile read
    /// cost milliseconds.)
    static let columns = "users.id, users.username, users.email, users.phone, users.password_hash, users.first_name, users.last_name, users.profile_picture_media_id, users.created_at_ms"

    init(id: UInt64, username: String, email: String, phone: String, passwordHash: String, firstName: String, lastName: String,
         profilePictureMediaID: String, createdAtMs: Int64) {
        self.id = id
        self.username = username
        self.email = email
        self.phone = phone
        self.passwordHash = passwordHash
        self.firstName = firstName
        self.lastName = lastName
        self.profilePictureMediaID = profilePictureMediaID
        self.createdAtMs = createdAtMs
    }

    init(row: CurrentRow) throws {
        id = try row[0]
        username = try row[1]
        email = try row[2]
        phone = try row[3]
        passwordHash = try row[4]
        firstName = try row[5]
        lastName = try row[6]
        profilePictureMediaID = try row[7]
        createdAtMs = try row[8]
    }

    var profile: AccountsV1.Profile {
        AccountsV1.Profile(userId: id, username: username, firstName: firstName, lastName: lastName,
                           profilePictureMediaId: profilePictureMediaID, createdAtMs: createdAtMs)
    }

    var account: AccountsV1.Account {
        AccountsV1.Account(profile: profile, email: email, phone: phone)
    }
}

/// An account on another service that a user linked (validated).
struct ExternalID: Sendable, Hashable {
    var provider: String
    var id: String

    var proto: AccountsV1.ExternalId { AccountsV1.ExternalId(provider: provider, externalId: id) }
}

struct SessionRecord: Sendable {
    var id: UInt64
    var userID: UInt64
    var expiresAtMs: Int64
    var revoked: Bool
}

/// Why an account change is refused (the service maps each to a status, `AccountsService+Refusals.swift`).
enum AccountRefusal: Error, Equatable {
    case noAccount(UInt64)
    case noUser(UInt64)
    case linkedElsewhere(provider: String, id: String)
    case notLinked(provider: String, id: String)
    /// A unique field another account has (nil: which one, SQLite did not say).
    case taken(field: String?)
}

/// Accounts' storage on SQLite (the embedded default): `<data>/accounts.sqlite`. Every write is
/// one transaction, committed (synchronous = FULL) before the reply goes out.
final class SQLiteAccountsStore: AccountsStorage {
    let database: ServiceDatabase
    let replies: any ReplyStore
    /// One process holds the file (SQLite's lock): the in-memory login guard sees every outcome.
    var isShared: Bool { false }

    init(path: String) throws {
        database = try ServiceDatabase.open(path)
        var migrator = DatabaseMigrator()
        migrator.registerMigration("v1") { db in
            try db.create(table: "users") { t in
                t.autoIncrementedPrimaryKey("id")
                t.column("username", .text).notNull().unique()
                t.column("email", .text).notNull().unique()
                t.column("phone", .text).notNull().unique()
                t.column("password_hash", .text).notNull()
                t.column("first_name", .text).notNull()
                t.column("last_name", .text).notNull()
                t.column("profile_picture_media_id", .text).notNull().defaults(to: "")
                t.column("created_at_ms", .integer).notNull()
            }
            try db.create(table: "sessions") { t in
                t.autoIncrementedPrimaryKey("id")
                t.column("user_id", .integer).notNull().indexed().references("users", onDelete: .cascade)
                t.column("token_hash", .blob).notNull().unique()
                t.column("created_at_ms", .integer).notNull()
                t.column("expires_at_ms", .integer).notNull()
                t.column("revoked_at_ms", .integer)
            }
        }
        // Contact matching (recommendations): hashes of each user's phone and email, and the
        // external accounts they linked.
        migrator.registerMigration("contacts") { db in
            try db.alter(table: "users") { t in
                t.add(column: "phone_sha256", .blob)
                t.add(column: "email_sha256", .blob)
            }
            let users = try Row.fetchAll(db, sql: "SELECT id, phone, email FROM users") { try ($0["id"] as Int64, $0["phone"] as String, $0["email"] as String) }
            for (id, phone, email) in users {
                try db.execute(sql: "UPDATE users SET phone_sha256 = ?, email_sha256 = ? WHERE id = ?", arguments: [
                    Data(ContactIdentifier.hash(phone)), Data(ContactIdentifier.hash(email)), id])
            }
            try db.execute(sql: "CREATE INDEX users_phone_sha256 ON users(phone_sha256)")
            try db.execute(sql: "CREATE INDEX users_email_sha256 ON users(email_sha256)")
            try db.create(table: "external_ids") { t in
                t.column("provider", .text).notNull()
                t.column("external_id", .text).notNull()
                t.column("user_id", .integer).notNull().indexed().references("users", onDelete: .cascade)
                t.column("linked_at_ms", .integer).notNull()
                t.primaryKey(["provider", "external_id"])
            }
        }
        // Login outcomes, replayed into the login guard at start (so a restart forgets no throttle).
        migrator.registerMigration("login_events") { db in
            try db.create(table: "login_events") { t in
                t.autoIncrementedPrimaryKey("id")
                t.column("failed", .boolean).notNull()
                t.column("account", .text).notNull()
                t.column("client", .text).notNull()
                t.column("at", .double).notNull().indexed()
            }
        }
        SQLiteReplyStore.migrate(&migrator)
        Self.migrateErasures(&migrator)
        Self.migrateEmail(&migrator)
        Self.migratePasswordReset(&migrator)
        // The provider's id for a sent email (SMTP's queue id, a webhook's answer).
        migrator.registerMigration("email_reference") { db in
            try db.execute(sql: "ALTER TABLE email_outbox ADD COLUMN reference TEXT NOT NULL DEFAULT ''")
        }
        Self.migrateEmailRetention(&migrator)
        try database.migrate(migrator)
        replies = SQLiteReplyStore(database: database)
    }

    // MARK: Login events

    /// Stores one login outcome (committed before the reply). Every thousandth row also deletes
    /// the rows older than `horizon` seconds, so a long attack cannot grow the table without bound.
    func record(_ event: LoginGuard.Event, horizon: Double) async throws {
        try await database.write { db in
            let at: Double
            switch event {
            case .failure(let account, let client, let time):
                at = time
                try db.run(sql: "INSERT INTO login_events (failed, account, client, at) VALUES (1, ?, ?, ?)", arguments: [account, client, time])
            case .success(let account, let time):
                at = time
                try db.run(sql: "INSERT INTO login_events (failed, account, client, at) VALUES (0, ?, '', ?)", arguments: [account, time])
            }
            if db.lastInsertedRowID % 1_000 == 0 {
                try db.run(sql: "DELETE FROM login_events WHERE at < ?", arguments: [at - horizon])
            }
        }
    }

    /// The outcomes since `since`, oldest first; older ones are deleted (they no longer matter).
    func loginEvents(since: Double) throws -> [LoginGuard.Event] {
        try database.write { db in
            try db.run(sql: "DELETE FROM login_events WHERE at < ?", arguments: [since])
            return try Row.fetchAll(db, cached: "SELECT failed, account, client, at FROM login_events ORDER BY id") { row in
                try row["failed"] as Bool
                    ? .failure(account: row["account"], client: row["client"], at: row["at"])
                    : .success(account: row["account"], at: row["at"])
            }
        }
    }

    func loginEvents(account: String, client: String, since: Double) async throws -> [LoginGuard.Event] {
        try await database.read { db in
            try Row.fetchAll(db, sql: """
                SELECT failed, account, client, at FROM login_events
                WHERE at >= ? AND (account = ? OR (failed AND client = ? AND client != ''))
                ORDER BY id
                """, arguments: [since, account, client]) { row in
                try row["failed"] as Bool
                    ? .failure(account: row["account"], client: row["client"], at: row["at"])
                    : .success(account: row["account"], at: row["at"])
            }
        }
    }

    /// - Parameter committed: runs once the new user is durable, in commit order (the profile event).
    func insertUser(username: String, email: String, phone: String, passwordHash: String,
                    firstName: String, lastName: String, now: Int64, committed: (@Sendable (UserRecord) -> Void)? = nil) async throws -> UserRecord {
        do {
            return try await database.write({ db in
                try db.run(sql: """
                    INSERT INTO users (username, email, phone, password_hash, first_name, last_name, created_at_ms,
                                       phone_sha256, email_sha256)
                    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
                    """, arguments: [username, email, phone, passwordHash, firstName, lastName, now,
                                     Data(ContactIdentifier.hash(phone)), Data(ContactIdentifier.hash(email))])
                return try Self.fetchUser(db, id: UInt64(db.lastInsertedRowID))
            }, committed: committed)
        } catch let error as DatabaseError where error.extendedResultCode == .SQLITE_CONSTRAINT_UNIQUE {
            throw Self.uniqueViolation(error)
        }
    }

    static func uniqueViolation(_ error: DatabaseError) -> AccountRefusal {
        let message = error.message ?? ""
        for field in ["username", "email", "phone"] where message.contains("users.\(field)") {
            return .taken(field: field)
        }
        return .taken(field: nil)
    }

    func user(id: UInt64) async throws -> UserRecord? {
        try await database.read { db in
            try Row.fetchOne(db, cached: "SELECT \(UserRecord.columns) FROM users WHERE id = ?", binding: id, as: UserRecord.init(row:))
        }
    }

    func users(ids: [UInt64]) async throws -> [UserRecord] {
        guard !ids.isEmpty else { return [] }
        // One cached statement whatever the count: the ids go in as one JSON array.
        let list = "[" + ids.map(String.init).joined(separator: ",") + "]"
        return try await database.read { db in
            try Row.fetchAll(db, cached: """
                SELECT \(UserRecord.columns) FROM users WHERE id IN (SELECT value FROM json_each(?)) ORDER BY id
                """, binding: list, as: UserRecord.init(row:))
        }
    }

    func users(usernames: [String]) async throws -> [UserRecord] {
        guard !usernames.isEmpty else { return [] }
        return try await database.read { db in
            let marks = Array(repeating: "?", count: usernames.count).joined(separator: ",")
            return try Row.fetchAll(db, sql: "SELECT \(UserRecord.columns) FROM users WHERE username IN (\(marks)) ORDER BY username",
                                    arguments: StatementArguments(usernames), as: UserRecord.init(row:))
        }
    }

    /// Prefix search on username, first and last name (ASCII case-insensitive), by username.
    func search(prefix: String, after: String, limit: Int) async throws -> [UserRecord] {
        let escaped = prefix.lowercased().replacingOccurrences(of: "\\", with: "\\\\")
            .replacingOccurrences(of: "%", with: "\\%").replacingOccurrences(of: "_", with: "\\_") + "%"
        // A prefix that matches nobody reads every user: off the task's thread (`scan`).
        return try await database.scan { db in
            try Row.fetchAll(db, cached: """
                SELECT \(UserRecord.columns) FROM users
                WHERE (username LIKE ?1 ESCAPE '\\' OR lower(first_name) LIKE ?1 ESCAPE '\\' OR lower(last_name) LIKE ?1 ESCAPE '\\')
                  AND username > ?2
                ORDER BY username LIMIT ?3
                """, binding: escaped, after, limit, as: UserRecord.init(row:))
        }
    }

    func user(login: Validation.LoginName) async throws -> UserRecord? {
        let (column, value): (String, String) = switch login {
        case .username(let v): ("username", v)
        case .email(let v): ("email", v)
        case .phone(let v): ("phone", v)
        }
        return try await database.read { db in
            try Row.fetchOne(db, cached: "SELECT \(UserRecord.columns) FROM users WHERE \(column) = ?", binding: value, as: UserRecord.init(row:))
        }
    }

    func createSession(userID: UInt64, tokenHash: [UInt8], now: Int64, expiresAt: Int64) async throws -> UInt64 {
        try await database.write { db in
            try db.run(sql: "INSERT INTO sessions (user_id, token_hash, created_at_ms, expires_at_ms) VALUES (?, ?, ?, ?)",
                           arguments: [userID, Data(tokenHash), now, expiresAt])
            return UInt64(db.lastInsertedRowID)
        }
    }

    func session(tokenHash: [UInt8]) async throws -> SessionRecord? {
        try await database.read { db in
            try Row.fetchOne(db, cached: "SELECT id, user_id, expires_at_ms, revoked_at_ms FROM sessions WHERE token_hash = ?",
                             binding: Data(tokenHash), as: Self.session)
        }
    }

    func session(id: UInt64) async throws -> SessionRecord? {
        try await database.read { db in
            try Row.fetchOne(db, cached: "SELECT id, user_id, expires_at_ms, revoked_at_ms FROM sessions WHERE id = ?",
                             binding: id, as: Self.session)
        }
    }

    /// A session from `id, user_id, expires_at_ms, revoked_at_ms`, by position (a name is looked
    /// up among the statement's columns on every read: item 117).
    private static func session(_ row: CurrentRow) throws -> SessionRecord {
        try SessionRecord(id: row[0], userID: row[1], expiresAtMs: row[2], revoked: (row[3] as Int64?) != nil)
    }

    func revokeSession(id: UInt64, userID: UInt64, now: Int64, committed: (@Sendable () -> Void)?) async throws {
        try await database.write({ db in
            try db.run(sql: "UPDATE sessions SET revoked_at_ms = ? WHERE id = ? AND revoked_at_ms IS NULL", arguments: [now, id])
        }, committed: CommittedAction.ignoringResult(committed))
    }

    /// Sets a new password hash and revokes every session of the user but `keep`.
    /// - Returns: how many sessions were revoked.
    func changePassword(userID: UInt64, hash: String, keepSession keep: UInt64, now: Int64, committed: (@Sendable () -> Void)?) async throws -> Int {
        try await database.write({ db in
            try db.run(sql: "UPDATE users SET password_hash = ? WHERE id = ?", arguments: [hash, userID])
            try db.run(sql: """
                UPDATE sessions SET revoked_at_ms = ?
                WHERE user_id = ? AND id != ? AND revoked_at_ms IS NULL AND expires_at_ms > ?
                """, arguments: [now, userID, keep, now])
            return db.changesCount
        }, committed: CommittedAction.ignoringResult(committed))
    }

    func changeEmail(userID: UInt64, email: String) async throws -> UserRecord {
        do {
            return try await database.write { db in
                try db.run(sql: "UPDATE users SET email = ?, email_sha256 = ? WHERE id = ?",
                               arguments: [email, Data(ContactIdentifier.hash(email)), userID])
                return try Self.fetchUser(db, id: userID)
            }
        } catch let error as DatabaseError where error.extendedResultCode == .SQLITE_CONSTRAINT_UNIQUE {
            throw Self.uniqueViolation(error)
        }
    }

    func updateProfile(userID: UInt64, firstName: String?, lastName: String?, mediaID: String?,
                       committed: (@Sendable (UserRecord) -> Void)? = nil) async throws -> UserRecord {
        try await database.write({ db in
            if let firstName { try db.run(sql: "UPDATE users SET first_name = ? WHERE id = ?", arguments: [firstName, userID]) }
            if let lastName { try db.run(sql: "UPDATE users SET last_name = ? WHERE id = ?", arguments: [lastName, userID]) }
            if let mediaID { try db.run(sql: "UPDATE users SET profile_picture_media_id = ? WHERE id = ?", arguments: [mediaID, userID]) }
            return try Self.fetchUser(db, id: userID)
        }, committed: committed)
    }

    /// Users after `id`, in id order (the profile snapshot's pages).
    func users(after id: UInt64, limit: Int) async throws -> [UserRecord] {
        try await database.read { db in
            try Row.fetchAll(db, cached: "SELECT \(UserRecord.columns) FROM users WHERE id > ? ORDER BY id LIMIT ?",
                             binding: id, limit, as: UserRecord.init(row:))
        }
    }

    private static func fetchUser(_ db: Database, id: UInt64) throws -> UserRecord {
        guard let user = try Row.fetchOne(db, cached: "SELECT \(UserRecord.columns) FROM users WHERE id = ?", binding: id, as: UserRecord.init(row:)) else {
            throw AccountRefusal.noUser(id)
        }
        return user
    }
}
