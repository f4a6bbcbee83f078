import FriensoProto
import Foundation
import Identity
import Logging
import NIOCore
import PostgresNIO
import Storage
import Wire

/// Accounts' storage on PostgreSQL: the `accounts` schema of the deployment's database. The same
/// tables as the SQLite store, in PostgreSQL's types; the same behaviour (the accounts tests run
/// on both engines). Text that is ordered or compared as bytes on SQLite (usernames, kept-reply
/// keys) is `COLLATE "C"` here, so pages come in the same order on both.
final class PostgresAccountsStore: AccountsStorage {
    let database: PostgresServiceDatabase
    let replies: any ReplyStore
    /// Instances of accounts may share the database: throttles are decided from its rows.
    var isShared: Bool { true }
    var logger: Logger { database.logger }

    private init(database: PostgresServiceDatabase) {
        self.database = database
        replies = PostgresReplyStore(database: database)
    }

    /// Runs accounts' migrations on `database` (its schema must be `accounts`).
    static func open(_ database: PostgresServiceDatabase) async throws -> PostgresAccountsStore {
        try await database.migrate(migrations)
        return PostgresAccountsStore(database: database)
    }

    // MARK: Rows

    static let userColumns = "id, username, email, phone, password_hash, first_name, last_name, profile_picture_media_id, created_at_ms"
    typealias UserRow = (Int64, String, String, String, String, String, String, String, Int64)

    // The hottest reads (every request's session, every friend list's profiles) as named prepared
    // statements: parsed and planned once per connection, not for every query.

    private struct UsersByID: PostgresPreparedStatement {
        static let sql = "SELECT \(PostgresAccountsStore.userColumns) FROM users WHERE id = ANY($1) ORDER BY id"
        typealias Row = UserRow
        let ids: [Int64]
        func makeBindings() throws -> PostgresBindings {
            var bindings = PostgresBindings(capacity: 1)
            bindings.append(ids)
            return bindings
        }
        func decodeRow(_ row: PostgresRow) throws -> Row { try row.decode(Row.self) }
    }

    private struct SessionByTokenHash: PostgresPreparedStatement {
        static let sql = "SELECT id, user_id, expires_at_ms, revoked_at_ms FROM sessions WHERE token_hash = $1"
        typealias Row = (Int64, Int64, Int64, Int64?)
        let hash: Data
        func makeBindings() throws -> PostgresBindings {
            var bindings = PostgresBindings(capacity: 1)
            try bindings.append(hash)
            return bindings
        }
        func decodeRow(_ row: PostgresRow) throws -> Row { try row.decode(Row.self) }
    }

    static func user(_ row: UserRow) -> UserRecord {
        UserRecord(id: UInt64(row.0), username: row.1, email: row.2, phone: row.3, passwordHash: row.4, firstName: row.5,
                   lastName: row.6, profilePictureMediaID: row.7, createdAtMs: row.8)
    }

    static func users<Rows: AsyncSequence>(_ rows: Rows) async throws -> [UserRecord] where Rows.Element == PostgresRow {
        var users: [UserRecord] = []
        for try await row in rows.decode(UserRow.self) { users.append(user(row)) }
        return users
    }

    static func int<Rows: AsyncSequence>(_ rows: Rows) async throws -> Int where Rows.Element == PostgresRow {
        Int(try await PostgresServiceDatabase.first(rows, Int64.self) ?? 0)
    }

    static func uniqueViolation(_ error: any Error) -> AccountRefusal? {
        guard PostgresServiceDatabase.sqlState(error) == "23505" else { return nil }
        let constraint = PostgresServiceDatabase.constraint(error) ?? ""
        for field in ["username", "email", "phone"] where constraint == "users_\(field)_key" { return .taken(field: field) }
        return .taken(field: nil)
    }

    // MARK: Login events

    func record(_ event: LoginGuard.Event, horizon: Double) async throws {
        try await database.write { connection in
            let at: Double
            let id: Int64?
            switch event {
            case .failure(let account, let client, let time):
                at = time
                id = try await PostgresServiceDatabase.first(connection.prepared(
                    "INSERT INTO login_events (failed, account, client, at) VALUES (true, \(account), \(client), \(time)) RETURNING id", logger: logger), Int64.self)
            case .success(let account, let time):
                at = time
                id = try await PostgresServiceDatabase.first(connection.prepared(
                    "INSERT INTO login_events (failed, account, client, at) VALUES (false, \(account), '', \(time)) RETURNING id", logger: logger), Int64.self)
            }
            if let id, id % 1_000 == 0 {
                try await connection.prepared("DELETE FROM login_events WHERE at < \(at - horizon)", logger: logger)
            }
        }
    }

    func loginEvents(since: Double) async throws -> [LoginGuard.Event] {
        try await database.transaction { connection in
            try await connection.prepared("DELETE FROM login_events WHERE at < \(since)", logger: logger)
            var events: [LoginGuard.Event] = []
            let rows = try await connection.prepared("SELECT failed, account, client, at FROM login_events ORDER BY id", logger: logger)
            for try await (failed, account, client, at) in rows.decode((Bool, String, String, Double).self) {
                events.append(failed ? .failure(account: account, client: client, at: at) : .success(account: account, at: at))
            }
            return events
        }
    }

    func loginEvents(account: String, client: String, since: Double) async throws -> [LoginGuard.Event] {
        try await database.read { connection in
            var events: [LoginGuard.Event] = []
            let rows = try await connection.prepared("""
                SELECT failed, account, client, at FROM login_events
                WHERE at >= \(since) AND (account = \(account) OR (failed AND client = \(client) AND client <> ''))
                ORDER BY id
                """, logger: logger)
            for try await (failed, account, client, at) in rows.decode((Bool, String, String, Double).self) {
                events.append(failed ? .failure(account: account, client: client, at: at) : .success(account: account, at: at))
            }
            return events
        }
    }

    // MARK: Users

    func insertUser(username: String, email: String, phone: String, passwordHash: String,
                    firstName: String, lastName: String, now: Int64, committed: (@Sendable (UserRecord) -> Void)?) async throws -> UserRecord {
        let phoneHash = Data(ContactIdentifier.hash(phone)), emailHash = Data(ContactIdentifier.hash(email))
        do {
            return try await database.write({ connection in
                let rows = try await connection.prepared("""
                    INSERT INTO users (username, email, phone, password_hash, first_name, last_name, created_at_ms, phone_sha256, email_sha256)
                    VALUES (\(username), \(email), \(phone), \(passwordHash), \(firstName), \(lastName), \(now), \(phoneHash), \(emailHash))
                    RETURNING \(unescaped: Self.userColumns)
                    """, logger: logger)
                guard let user = try await Self.users(rows).first else { throw StoreInvariant("the insert returned no row") }
                return user
            }, committed: committed)
        } catch {
            if let refusal = Self.uniqueViolation(error) { throw refusal }
            throw error
        }
    }

    func user(id: UInt64) async throws -> UserRecord? {
        try await database.read { connection in
            for try await row in try await connection.execute(UsersByID(ids: [Int64(bitPattern: id)]), logger: logger) { return Self.user(row) }
            return nil
        }
    }

    func users(ids: [UInt64]) async throws -> [UserRecord] {
        guard !ids.isEmpty else { return [] }
        let list = ids.map { Int64(bitPattern: $0) }
        return try await database.read { connection in
            var users: [UserRecord] = []
            users.reserveCapacity(list.count)
            for try await row in try await connection.execute(UsersByID(ids: list), logger: logger) { users.append(Self.user(row)) }
            return users
        }
    }

    func users(usernames: [String]) async throws -> [UserRecord] {
        guard !usernames.isEmpty else { return [] }
        return try await database.read { connection in
            try await Self.users(connection.prepared(
                "SELECT \(unescaped: Self.userColumns) FROM users WHERE username = ANY(\(usernames)) ORDER BY username", logger: logger))
        }
    }

    func users(after id: UInt64, limit: Int) async throws -> [UserRecord] {
        try await database.read { connection in
            try await Self.users(connection.prepared(
                "SELECT \(unescaped: Self.userColumns) FROM users WHERE id > \(Int64(bitPattern: id)) ORDER BY id LIMIT \(limit)", logger: logger))
        }
    }

    func search(prefix: String, after: String, limit: Int) async throws -> [UserRecord] {
        let pattern = prefix.lowercased().replacingOccurrences(of: "\\", with: "\\\\")
            .replacingOccurrences(of: "%", with: "\\%").replacingOccurrences(of: "_", with: "\\_") + "%"
        return try await database.read { connection in
            try await Self.users(connection.prepared("""
                SELECT \(unescaped: Self.userColumns) FROM users
                WHERE (lower(username) LIKE \(pattern) ESCAPE '\\' OR lower(first_name) LIKE \(pattern) ESCAPE '\\'
                       OR lower(last_name) LIKE \(pattern) ESCAPE '\\')
                  AND username > \(after)
                ORDER BY username LIMIT \(limit)
                """, logger: logger))
        }
    }

    func user(login: Validation.LoginName) async throws -> UserRecord? {
        try await database.read { connection in
            let rows = switch login {
            case .username(let v): try await connection.prepared("SELECT \(unescaped: Self.userColumns) FROM users WHERE username = \(v)", logger: logger)
            case .email(let v): try await connection.prepared("SELECT \(unescaped: Self.userColumns) FROM users WHERE email = \(v)", logger: logger)
            case .phone(let v): try await connection.prepared("SELECT \(unescaped: Self.userColumns) FROM users WHERE phone = \(v)", logger: logger)
            }
            return try await Self.users(rows).first
        }
    }

    func changeEmail(userID: UInt64, email: String) async throws -> UserRecord {
        let hash = Data(ContactIdentifier.hash(email))
        do {
            return try await database.write { connection in
                guard let user = try await Self.users(connection.prepared("""
                    UPDATE users SET email = \(email), email_sha256 = \(hash) WHERE id = \(Int64(userID)) RETURNING \(unescaped: Self.userColumns)
                    """, logger: logger)).first else { throw AccountRefusal.noUser(userID) }
                return user
            }
        } catch {
            if let refusal = Self.uniqueViolation(error) { throw refusal }
            throw error
        }
    }

    func updateProfile(userID: UInt64, firstName: String?, lastName: String?, mediaID: String?,
                       committed: (@Sendable (UserRecord) -> Void)?) async throws -> UserRecord {
        try await database.write({ connection in
            guard let user = try await Self.users(connection.prepared("""
                UPDATE users SET first_name = coalesce(\(firstName)::text, first_name), last_name = coalesce(\(lastName)::text, last_name),
                    profile_picture_media_id = coalesce(\(mediaID)::text, profile_picture_media_id)
                WHERE id = \(Int64(userID)) RETURNING \(unescaped: Self.userColumns)
                """, logger: logger)).first else { throw AccountRefusal.noUser(userID) }
            return user
        }, committed: committed, orderedBy: userID)
    }

    // MARK: Sessions

    func createSession(userID: UInt64, tokenHash: [UInt8], now: Int64, expiresAt: Int64) async throws -> UInt64 {
        let hash = Data(tokenHash)
        return try await database.write { connection in
            guard let id = try await PostgresServiceDatabase.first(connection.prepared("""
                INSERT INTO sessions (user_id, token_hash, created_at_ms, expires_at_ms) VALUES (\(Int64(userID)), \(hash), \(now), \(expiresAt))
                RETURNING id
                """, logger: logger), Int64.self) else { throw StoreInvariant("the insert returned no id") }
            return UInt64(id)
        }
    }

    private typealias SessionRow = (Int64, Int64, Int64, Int64?)

    static func session<Rows: AsyncSequence>(_ rows: Rows) async throws -> SessionRecord? where Rows.Element == PostgresRow {
        for try await (id, user, expires, revoked) in rows.decode(SessionRow.self) {
            return SessionRecord(id: UInt64(id), userID: UInt64(user), expiresAtMs: expires, revoked: revoked != nil)
        }
        return nil
    }

    func session(tokenHash: [UInt8]) async throws -> SessionRecord? {
        let hash = Data(tokenHash)
        return try await database.read { connection in
            for try await (id, user, expires, revoked) in try await connection.execute(SessionByTokenHash(hash: hash), logger: logger) {
                return SessionRecord(id: UInt64(id), userID: UInt64(user), expiresAtMs: expires, revoked: revoked != nil)
            }
            return nil
        }
    }

    func session(id: UInt64) async throws -> SessionRecord? {
        try await database.read { connection in
            try await Self.session(connection.prepared(
                "SELECT id, user_id, expires_at_ms, revoked_at_ms FROM sessions WHERE id = \(Int64(bitPattern: id))", logger: logger))
        }
    }

    func revokeSession(id: UInt64, userID: UInt64, now: Int64, committed: (@Sendable () -> Void)?) async throws {
        try await database.write({ connection in
            try await connection.prepared(
                "UPDATE sessions SET revoked_at_ms = \(now) WHERE id = \(Int64(bitPattern: id)) AND revoked_at_ms IS NULL", logger: logger)
        }, committed: CommittedAction.ignoringResult(committed), orderedBy: userID)
    }

    func changePassword(userID: UInt64, hash: String, keepSession keep: UInt64, now: Int64, committed: (@Sendable () -> Void)?) async throws -> Int {
        try await database.write({ connection in
            try await connection.prepared("UPDATE users SET password_hash = \(hash) WHERE id = \(Int64(userID))", logger: logger)
            return try await PostgresServiceDatabase.count(connection.prepared("""
                UPDATE sessions SET revoked_at_ms = \(now)
                WHERE user_id = \(Int64(userID)) AND id != \(Int64(bitPattern: keep)) AND revoked_at_ms IS NULL AND expires_at_ms > \(now)
                RETURNING 1
                """, logger: logger))
        }, committed: CommittedAction.ignoringResult(committed), orderedBy: userID)
    }
}
