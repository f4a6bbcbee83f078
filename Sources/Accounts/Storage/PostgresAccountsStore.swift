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
    var engine: String { "postgres" }
    /// Instances of accounts may share the database: throttles are decided from its rows.
    var isShared: Bool { true }
    private var logger: Logger { database.logger }

    static let migrations: [PostgresMigration] = PostgresReplyStore.migrations + [
        PostgresMigration("accounts_v1", [
            """
            CREATE TABLE users (
                id bigserial PRIMARY KEY,
                username text COLLATE "C" NOT NULL,
                email text COLLATE "C" NOT NULL,
                phone text COLLATE "C" NOT NULL,
                password_hash text NOT NULL,
                first_name text NOT NULL,
                last_name text NOT NULL,
                profile_picture_media_id text NOT NULL DEFAULT '',
                created_at_ms bigint NOT NULL,
                phone_sha256 bytea,
                email_sha256 bytea,
                CONSTRAINT users_username_key UNIQUE (username),
                CONSTRAINT users_email_key UNIQUE (email),
                CONSTRAINT users_phone_key UNIQUE (phone))
            """,
            "CREATE INDEX users_phone_sha256 ON users (phone_sha256)",
            "CREATE INDEX users_email_sha256 ON users (email_sha256)",
            """
            CREATE TABLE sessions (
                id bigserial PRIMARY KEY,
                user_id bigint NOT NULL REFERENCES users (id) ON DELETE CASCADE,
                token_hash bytea NOT NULL UNIQUE,
                created_at_ms bigint NOT NULL,
                expires_at_ms bigint NOT NULL,
                revoked_at_ms bigint)
            """,
            "CREATE INDEX sessions_user_id ON sessions (user_id)",
            """
            CREATE TABLE external_ids (
                provider text NOT NULL,
                external_id text NOT NULL,
                user_id bigint NOT NULL REFERENCES users (id) ON DELETE CASCADE,
                linked_at_ms bigint NOT NULL,
                PRIMARY KEY (provider, external_id))
            """,
            "CREATE INDEX external_ids_user_id ON external_ids (user_id)",
            """
            CREATE TABLE login_events (
                id bigserial PRIMARY KEY,
                failed boolean NOT NULL,
                account text NOT NULL,
                client text NOT NULL,
                at double precision NOT NULL)
            """,
            "CREATE INDEX login_events_at ON login_events (at)",
            """
            CREATE TABLE erasures (
                user_id bigint NOT NULL,
                target text NOT NULL,
                pass bigint NOT NULL,
                due_ms bigint NOT NULL,
                attempts bigint NOT NULL DEFAULT 0,
                traces text NOT NULL,
                PRIMARY KEY (user_id, target))
            """,
            "CREATE INDEX erasures_due ON erasures (due_ms)",
            """
            CREATE TABLE email_outbox (
                id bigserial PRIMARY KEY,
                user_id bigint NOT NULL,
                address text NOT NULL,
                subject text NOT NULL,
                body text NOT NULL,
                status bigint NOT NULL,
                attempts bigint NOT NULL DEFAULT 0,
                last_error text NOT NULL DEFAULT '',
                provider text NOT NULL DEFAULT '',
                reference text NOT NULL DEFAULT '',
                created_ms bigint NOT NULL,
                next_attempt_ms bigint NOT NULL,
                expires_ms bigint NOT NULL,
                done_ms bigint NOT NULL DEFAULT 0)
            """,
            "CREATE INDEX email_outbox_due ON email_outbox (next_attempt_ms) WHERE status = 1",
            "CREATE INDEX email_outbox_user ON email_outbox (user_id)",
            """
            CREATE TABLE sent_emails (
                idempotency_key text PRIMARY KEY,
                provider text NOT NULL,
                address text NOT NULL,
                subject text NOT NULL,
                body text NOT NULL,
                sent_at_ms bigint NOT NULL)
            """,
            """
            CREATE TABLE password_resets (
                id bigserial PRIMARY KEY,
                user_id bigint NOT NULL REFERENCES users (id) ON DELETE CASCADE,
                code_hash bytea NOT NULL,
                created_ms bigint NOT NULL,
                expires_ms bigint NOT NULL,
                used_ms bigint NOT NULL DEFAULT 0,
                failures bigint NOT NULL DEFAULT 0)
            """,
            "CREATE INDEX password_resets_user ON password_resets (user_id, created_ms)",
            "CREATE TABLE reset_requests (client text NOT NULL, at_ms bigint NOT NULL)",
            "CREATE INDEX reset_requests_client ON reset_requests (client, at_ms)",
        ]),
        // Every login reads the outcomes of its account and its address (shared throttles).
        PostgresMigration("login_events_by_key", [
            "CREATE INDEX login_events_account ON login_events (account, id)",
            "CREATE INDEX login_events_client ON login_events (client, id) WHERE failed",
        ]),
    ]

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

    private static let userColumns = "id, username, email, phone, password_hash, first_name, last_name, profile_picture_media_id, created_at_ms"
    private typealias UserRow = (Int64, String, String, String, String, String, String, String, Int64)

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

    private static func user(_ row: UserRow) -> UserRecord {
        UserRecord(id: UInt64(row.0), username: row.1, email: row.2, phone: row.3, passwordHash: row.4, firstName: row.5,
                   lastName: row.6, profilePictureMediaID: row.7, createdAtMs: row.8)
    }

    private static func users(_ rows: PostgresRowSequence) async throws -> [UserRecord] {
        var users: [UserRecord] = []
        for try await row in rows.decode(UserRow.self) { users.append(user(row)) }
        return users
    }

    private static func first<T>(_ rows: PostgresRowSequence, _ type: T.Type) async throws -> T? where T: PostgresDecodable & Sendable {
        for try await value in rows.decode(T.self) { return value }
        return nil
    }

    private static func int(_ rows: PostgresRowSequence) async throws -> Int {
        Int(try await first(rows, Int64.self) ?? 0)
    }

    private static func uniqueViolation(_ error: any Error) -> AccountRefusal? {
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
                id = try await Self.first(connection.query(
                    "INSERT INTO login_events (failed, account, client, at) VALUES (true, \(account), \(client), \(time)) RETURNING id", logger: logger), Int64.self)
            case .success(let account, let time):
                at = time
                id = try await Self.first(connection.query(
                    "INSERT INTO login_events (failed, account, client, at) VALUES (false, \(account), '', \(time)) RETURNING id", logger: logger), Int64.self)
            }
            if let id, id % 1_000 == 0 {
                try await connection.query("DELETE FROM login_events WHERE at < \(at - horizon)", logger: logger)
            }
        }
    }

    func loginEvents(since: Double) async throws -> [LoginGuard.Event] {
        try await database.transaction { connection in
            try await connection.query("DELETE FROM login_events WHERE at < \(since)", logger: logger)
            var events: [LoginGuard.Event] = []
            let rows = try await connection.query("SELECT failed, account, client, at FROM login_events ORDER BY id", logger: logger)
            for try await (failed, account, client, at) in rows.decode((Bool, String, String, Double).self) {
                events.append(failed ? .failure(account: account, client: client, at: at) : .success(account: account, at: at))
            }
            return events
        }
    }

    func loginEvents(account: String, client: String, since: Double) async throws -> [LoginGuard.Event] {
        try await database.read { connection in
            var events: [LoginGuard.Event] = []
            let rows = try await connection.query("""
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
                let rows = try await connection.query("""
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
            try await Self.users(connection.query(
                "SELECT \(unescaped: Self.userColumns) FROM users WHERE username = ANY(\(usernames)) ORDER BY username", logger: logger))
        }
    }

    func users(after id: UInt64, limit: Int) async throws -> [UserRecord] {
        try await database.read { connection in
            try await Self.users(connection.query(
                "SELECT \(unescaped: Self.userColumns) FROM users WHERE id > \(Int64(bitPattern: id)) ORDER BY id LIMIT \(limit)", logger: logger))
        }
    }

    func search(prefix: String, after: String, limit: Int) async throws -> [UserRecord] {
        let pattern = prefix.lowercased().replacingOccurrences(of: "\\", with: "\\\\")
            .replacingOccurrences(of: "%", with: "\\%").replacingOccurrences(of: "_", with: "\\_") + "%"
        return try await database.read { connection in
            try await Self.users(connection.query("""
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
            case .username(let v): try await connection.query("SELECT \(unescaped: Self.userColumns) FROM users WHERE username = \(v)", logger: logger)
            case .email(let v): try await connection.query("SELECT \(unescaped: Self.userColumns) FROM users WHERE email = \(v)", logger: logger)
            case .phone(let v): try await connection.query("SELECT \(unescaped: Self.userColumns) FROM users WHERE phone = \(v)", logger: logger)
            }
            return try await Self.users(rows).first
        }
    }

    func changeEmail(userID: UInt64, email: String) async throws -> UserRecord {
        let hash = Data(ContactIdentifier.hash(email))
        do {
            return try await database.write { connection in
                guard let user = try await Self.users(connection.query("""
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
            guard let user = try await Self.users(connection.query("""
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
            guard let id = try await Self.first(connection.query("""
                INSERT INTO sessions (user_id, token_hash, created_at_ms, expires_at_ms) VALUES (\(Int64(userID)), \(hash), \(now), \(expiresAt))
                RETURNING id
                """, logger: logger), Int64.self) else { throw StoreInvariant("the insert returned no id") }
            return UInt64(id)
        }
    }

    private typealias SessionRow = (Int64, Int64, Int64, Int64?)

    private static func session(_ rows: PostgresRowSequence) async throws -> SessionRecord? {
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
            try await Self.session(connection.query(
                "SELECT id, user_id, expires_at_ms, revoked_at_ms FROM sessions WHERE id = \(Int64(bitPattern: id))", logger: logger))
        }
    }

    func revokeSession(id: UInt64, now: Int64) async throws {
        try await database.write { connection in
            try await connection.query(
                "UPDATE sessions SET revoked_at_ms = \(now) WHERE id = \(Int64(bitPattern: id)) AND revoked_at_ms IS NULL", logger: logger)
        }
    }

    func changePassword(userID: UInt64, hash: String, keepSession keep: UInt64, now: Int64) async throws -> Int {
        try await database.write { connection in
            try await connection.query("UPDATE users SET password_hash = \(hash) WHERE id = \(Int64(userID))", logger: logger)
            return try await PostgresReplyStore.count(connection.query("""
                UPDATE sessions SET revoked_at_ms = \(now)
                WHERE user_id = \(Int64(userID)) AND id != \(Int64(bitPattern: keep)) AND revoked_at_ms IS NULL AND expires_at_ms > \(now)
                RETURNING 1
                """, logger: logger))
        }
    }

    // MARK: Contact matching and linked accounts

    func matchContacts(hashes: [[UInt8]], externalIDs: [ExternalID]) async throws -> [ContactMatch] {
        try await database.read { connection in
            var found = ContactMatches(hashes: hashes)
            for chunk in stride(from: 0, to: hashes.count, by: 400) {
                let part = hashes[chunk..<min(chunk + 400, hashes.count)].map { ByteBuffer(bytes: $0) }
                let rows = try await connection.query("""
                    SELECT \(unescaped: Self.userColumns), phone_sha256, email_sha256 FROM users
                    WHERE phone_sha256 = ANY(\(part)) OR email_sha256 = ANY(\(part))
                    """, logger: logger)
                for try await row in rows {
                    let columns = try row.decode((Int64, String, String, String, String, String, String, String, Int64, Data?, Data?).self)
                    found.add(Self.user((columns.0, columns.1, columns.2, columns.3, columns.4, columns.5, columns.6, columns.7, columns.8)),
                              phoneHash: columns.9, emailHash: columns.10)
                }
            }
            for link in externalIDs {
                guard let user = try await Self.users(connection.query("""
                    SELECT \(unescaped: Self.userColumns.split(separator: ", ").map { "users.\($0)" }.joined(separator: ", "))
                    FROM external_ids JOIN users ON users.id = external_ids.user_id
                    WHERE provider = \(link.provider) AND external_id = \(link.id)
                    """, logger: logger)).first else { continue }
                found.addLinked(user)
            }
            return found.matches
        }
    }

    func link(userID: UInt64, _ link: ExternalID, now: Int64) async throws -> [ExternalID] {
        try await database.write { connection in
            guard try await Self.first(connection.query("SELECT 1::bigint FROM users WHERE id = \(Int64(userID))", logger: logger), Int64.self) != nil else {
                throw AccountRefusal.noAccount(userID)
            }
            if let owner = try await Self.first(connection.query(
                "SELECT user_id FROM external_ids WHERE provider = \(link.provider) AND external_id = \(link.id)", logger: logger), Int64.self),
               UInt64(owner) != userID {
                throw AccountRefusal.linkedElsewhere(provider: link.provider, id: link.id)
            }
            try await connection.query("""
                INSERT INTO external_ids (provider, external_id, user_id, linked_at_ms) VALUES (\(link.provider), \(link.id), \(Int64(userID)), \(now))
                ON CONFLICT DO NOTHING
                """, logger: logger)
            return try await Self.links(connection, userID: userID, logger: logger)
        }
    }

    func unlink(userID: UInt64, _ link: ExternalID) async throws -> [ExternalID] {
        try await database.write { connection in
            let removed = try await PostgresReplyStore.count(connection.query("""
                DELETE FROM external_ids WHERE provider = \(link.provider) AND external_id = \(link.id) AND user_id = \(Int64(userID)) RETURNING 1
                """, logger: logger))
            guard removed == 1 else { throw AccountRefusal.notLinked(provider: link.provider, id: link.id) }
            return try await Self.links(connection, userID: userID, logger: logger)
        }
    }

    private static func links(_ connection: PostgresConnection, userID: UInt64, logger: Logger) async throws -> [ExternalID] {
        var links: [ExternalID] = []
        let rows = try await connection.query("""
            SELECT provider, external_id FROM external_ids WHERE user_id = \(Int64(userID)) ORDER BY provider COLLATE "C", external_id COLLATE "C"
            """, logger: logger)
        for try await (provider, id) in rows.decode((String, String).self) { links.append(ExternalID(provider: provider, id: id)) }
        return links
    }

    // MARK: Erasure

    func deleteUser(_ user: UserRecord, targets: [String], now: Int64, committed: @escaping @Sendable (UserRecord) -> Void) async throws {
        let traces = String(decoding: try JSONEncoder().encode(ErasureTraces(
            username: user.username, email: user.email, phone: user.phone, firstName: user.firstName, lastName: user.lastName)), as: UTF8.self)
        let keys: [String] = [Validation.LoginName.username(user.username.lowercased()), .email(user.email.lowercased()), .phone(user.phone)].map { "\($0)" }
        let id = Int64(user.id)
        _ = try await database.write({ connection in
            try await connection.query("DELETE FROM login_events WHERE account = ANY(\(keys))", logger: logger)
            try await connection.query("DELETE FROM email_outbox WHERE user_id = \(id) OR address = \(user.email)", logger: logger)
            try await connection.query("DELETE FROM sent_emails WHERE address = \(user.email)", logger: logger)
            guard try await PostgresReplyStore.count(connection.query("DELETE FROM users WHERE id = \(id) RETURNING 1", logger: logger)) == 1 else {
                throw AccountRefusal.noAccount(user.id)
            }
            for target in targets {
                try await connection.query("""
                    INSERT INTO erasures (user_id, target, pass, due_ms, traces) VALUES (\(id), \(target), 1, \(now), \(traces)) ON CONFLICT DO NOTHING
                    """, logger: logger)
            }
            return user
        }, committed: committed, orderedBy: user.id)
    }

    func dueErasures(now: Int64) async throws -> [ErasureStep] {
        try await database.read { connection in
            var steps: [ErasureStep] = []
            let rows = try await connection.query(
                "SELECT user_id, target, pass, attempts, traces FROM erasures WHERE due_ms <= \(now) ORDER BY due_ms LIMIT 100", logger: logger)
            for try await (user, target, pass, attempts, traces) in rows.decode((Int64, String, Int64, Int64, String).self) {
                steps.append(ErasureStep(user: UInt64(user), target: target, pass: Int(pass), attempts: Int(attempts),
                                         traces: try JSONDecoder().decode(ErasureTraces.self, from: Data(traces.utf8))))
            }
            return steps
        }
    }

    func onlyLocalStepLeft(_ user: UInt64) async throws -> Bool {
        try await database.read { connection in
            try await Self.int(connection.query(
                "SELECT count(*) FROM erasures WHERE user_id = \(Int64(user)) AND target != \(AccountsService.localStep)", logger: logger)) == 0
        }
    }

    func advance(_ step: ErasureStep, due: Int64) async throws {
        try await database.write { connection in
            try await connection.query("""
                UPDATE erasures SET pass = 2, attempts = 0, due_ms = \(due) WHERE user_id = \(Int64(step.user)) AND target = \(step.target)
                """, logger: logger)
        }
    }

    func retry(_ step: ErasureStep, due: Int64) async throws {
        try await database.write { connection in
            try await connection.query("""
                UPDATE erasures SET attempts = attempts + 1, due_ms = \(due) WHERE user_id = \(Int64(step.user)) AND target = \(step.target)
                """, logger: logger)
        }
    }

    func complete(_ step: ErasureStep) async throws {
        try await database.write { connection in
            try await connection.query("DELETE FROM erasures WHERE user_id = \(Int64(step.user)) AND target = \(step.target)", logger: logger)
        }
    }

    func finishErasure(_ user: UInt64, traces: ErasureTraces) async throws {
        try await database.write { connection in
            try await PostgresReplyStore.eraseReplies(connection, of: user, mentioning: traces.all, logger: logger)
            try await connection.query("DELETE FROM erasures WHERE user_id = \(Int64(user))", logger: logger)
        }
    }

    func pendingErasures() async throws -> Int {
        try await database.read { connection in try await Self.int(connection.query("SELECT count(*) FROM erasures", logger: logger)) }
    }

    /// Dead row versions keep their bytes in the table's pages until vacuumed: after an erasure,
    /// the tables that held the person are vacuumed, so their space is pruned and reused.
    func scrubErasedRows() async throws {
        try await database.read { connection in
            try await connection.query("""
                VACUUM users, sessions, external_ids, login_events, email_outbox, sent_emails, password_resets, idempotent_replies
                """, logger: logger)
        }
    }

    // MARK: Email

    func dueEmails(now: Int64) async throws -> [EmailMessage] {
        try await database.transaction { connection in
            try await connection.query("""
                UPDATE email_outbox SET status = \(EmailStatus.failed), body = '', last_error = 'expired before it could be sent', done_ms = \(now)
                WHERE status = \(EmailStatus.pending) AND expires_ms <= \(now)
                """, logger: logger)
            var due: [EmailMessage] = []
            let rows = try await connection.query("""
                SELECT id, address, subject, body FROM email_outbox WHERE status = \(EmailStatus.pending) AND next_attempt_ms <= \(now) ORDER BY id LIMIT 50
                """, logger: logger)
            for try await (id, address, subject, body) in rows.decode((Int64, String, String, String).self) {
                due.append(EmailMessage(deliveryID: UInt64(id), idempotencyKey: "frienso-email-\(id)", to: address, subject: subject, body: body))
            }
            return due
        }
    }

    func emailSent(_ id: UInt64, provider: String, reference: String, now: Int64) async throws {
        try await database.transaction { connection in
            try await connection.query("""
                UPDATE email_outbox SET status = \(EmailStatus.sent), body = '', provider = \(provider), reference = \(reference),
                    attempts = attempts + 1, done_ms = \(now) WHERE id = \(Int64(id))
                """, logger: logger)
        }
    }

    func emailFailed(_ id: UInt64, error: String, final: Bool, now: Int64) async throws {
        try await database.transaction { connection in
            let attempts = try await Self.int(connection.query("SELECT attempts FROM email_outbox WHERE id = \(Int64(id))", logger: logger)) + 1
            let delay = Int64(min(60_000, 1_000 << min(attempts, 6)))
            let status = final ? EmailStatus.failed : EmailStatus.pending
            try await connection.query("""
                UPDATE email_outbox SET attempts = \(attempts), last_error = \(error), next_attempt_ms = \(now + delay), status = \(status),
                    body = CASE WHEN \(final) THEN '' ELSE body END, done_ms = CASE WHEN \(final) THEN \(now) ELSE 0 END
                WHERE id = \(Int64(id))
                """, logger: logger)
        }
    }

    func recordSentEmail(_ message: EmailMessage, at: Int64) async throws {
        try await database.transaction { connection in
            try await connection.query("""
                INSERT INTO sent_emails (idempotency_key, provider, address, subject, body, sent_at_ms)
                VALUES (\(message.idempotencyKey), 'recording', \(message.to), \(message.subject), \(message.body), \(at))
                ON CONFLICT DO NOTHING
                """, logger: logger)
        }
    }

    func recordedEmailBodies(to address: String) async throws -> [String] {
        try await database.read { connection in
            var bodies: [String] = []
            let rows = try await connection.query(
                "SELECT body FROM sent_emails WHERE address = \(address) ORDER BY sent_at_ms, idempotency_key COLLATE \"C\"", logger: logger)
            for try await body in rows.decode(String.self) { bodies.append(body) }
            return bodies
        }
    }

    // MARK: Password resets

    func requestReset(client: String, user: UserRecord?, codeHash: [UInt8], now: Int64, lifetime: Int64, perClient: Int, perAccount: Int,
                      email: (subject: String, body: String)) async throws -> ResetRequestOutcome {
        let hash = Data(codeHash)
        return try await database.write { connection in
            let hourAgo = now - 3_600_000
            try await connection.query("DELETE FROM reset_requests WHERE at_ms <= \(hourAgo)", logger: logger)
            let fromClient = try await Self.int(connection.query(
                "SELECT count(*) FROM reset_requests WHERE client = \(client) AND at_ms > \(hourAgo)", logger: logger))
            guard fromClient < perClient else { return .throttledClient }
            try await connection.query("INSERT INTO reset_requests (client, at_ms) VALUES (\(client), \(now))", logger: logger)
            guard let user else { return .noAccount }
            let id = Int64(user.id)
            let recent = try await Self.int(connection.query(
                "SELECT count(*) FROM password_resets WHERE user_id = \(id) AND created_ms > \(hourAgo)", logger: logger))
            guard recent < perAccount else { return .throttledAccount }
            try await connection.query(
                "DELETE FROM password_resets WHERE user_id = \(id) AND expires_ms <= \(now) AND created_ms <= \(hourAgo)", logger: logger)
            try await connection.query("""
                INSERT INTO password_resets (user_id, code_hash, created_ms, expires_ms) VALUES (\(id), \(hash), \(now), \(now + lifetime))
                """, logger: logger)
            try await connection.query("""
                INSERT INTO email_outbox (user_id, address, subject, body, status, created_ms, next_attempt_ms, expires_ms)
                VALUES (\(id), \(user.email), \(email.subject), \(email.body), \(EmailStatus.pending), \(now), \(now), \(now + lifetime))
                """, logger: logger)
            return .sent
        }
    }

    func checkResetCode(user: UInt64, hash: [UInt8], now: Int64, attempts: Int) async throws -> UInt64? {
        let code = Data(hash)
        let id = Int64(user)
        return try await database.write { connection in
            if let reset = try await Self.first(connection.query("""
                SELECT id FROM password_resets
                WHERE user_id = \(id) AND used_ms = 0 AND expires_ms > \(now) AND failures < \(attempts) AND code_hash = \(code)
                """, logger: logger), Int64.self) {
                return UInt64(reset)
            }
            try await connection.query("""
                UPDATE password_resets SET failures = failures + 1
                WHERE user_id = \(id) AND used_ms = 0 AND expires_ms > \(now) AND failures < \(attempts)
                """, logger: logger)
            return nil
        }
    }

    func resetPassword(user: UInt64, resetID: UInt64, passwordHash: String, now: Int64) async throws -> Int? {
        let id = Int64(user)
        return try await database.write { connection in
            guard try await PostgresReplyStore.count(connection.query(
                "UPDATE password_resets SET used_ms = \(now) WHERE id = \(Int64(resetID)) AND used_ms = 0 RETURNING 1", logger: logger)) == 1 else {
                return nil
            }
            try await connection.query("UPDATE password_resets SET used_ms = \(now) WHERE user_id = \(id) AND used_ms = 0", logger: logger)
            try await connection.query("UPDATE users SET password_hash = \(passwordHash) WHERE id = \(id)", logger: logger)
            return try await PostgresReplyStore.count(connection.query("""
                UPDATE sessions SET revoked_at_ms = \(now) WHERE user_id = \(id) AND revoked_at_ms IS NULL AND expires_at_ms > \(now) RETURNING 1
                """, logger: logger))
        }
    }

    // MARK: Export

    func export(_ user: UserRecord, currentSession: UInt64) async throws -> AccountsV1.ExportMyDataResponse {
        let id = Int64(user.id)
        return try await database.snapshot { connection in
            var out = AccountsV1.ExportMyDataResponse(account: user.account)
            for try await (session, created, expires, revoked) in try await connection.query("""
                SELECT id, created_at_ms, expires_at_ms, coalesce(revoked_at_ms, 0) FROM sessions WHERE user_id = \(id) ORDER BY id
                """, logger: logger).decode((Int64, Int64, Int64, Int64).self) {
                out.sessions.append(AccountsV1.SessionInfo(createdAtMs: created, expiresAtMs: expires, revokedAtMs: revoked,
                                                           current: UInt64(session) == currentSession))
            }
            for try await (provider, external) in try await connection.query(
                "SELECT provider, external_id FROM external_ids WHERE user_id = \(id) ORDER BY linked_at_ms", logger: logger).decode((String, String).self) {
                out.linked.append(AccountsV1.ExternalId(provider: provider, externalId: external))
            }
            for try await (created, expires, used) in try await connection.query(
                "SELECT created_ms, expires_ms, used_ms FROM password_resets WHERE user_id = \(id) ORDER BY id", logger: logger).decode((Int64, Int64, Int64).self) {
                out.passwordResets.append(AccountsV1.PasswordResetInfo(createdAtMs: created, expiresAtMs: expires, usedAtMs: used))
            }
            for try await (address, subject, status, created) in try await connection.query(
                "SELECT address, subject, status, created_ms FROM email_outbox WHERE user_id = \(id) ORDER BY id", logger: logger)
                .decode((String, String, Int64, Int64).self) {
                out.emails.append(AccountsV1.EmailInfo(address: address, subject: subject, status: EmailStatus.names[Int(status)] ?? "unknown",
                                                       createdAtMs: created))
            }
            return out
        }
    }
}
