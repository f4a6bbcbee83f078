import FriensoProto
import Wire

/// What accounts keeps, and how: users, sessions, login outcomes, linked ids, erasure steps, the
/// email outbox, password resets and idempotent replies. Two engines implement it with the same
/// behaviour (the tests run on both): `SQLiteAccountsStore` (the embedded default, a file in the
/// data folder) and `PostgresAccountsStore` (a schema in a PostgreSQL database, for deployments
/// past one machine). Every mutation is one transaction, committed before it returns; in a request
/// with an idempotency key, the request's claim commits in it (`ServiceDatabase`, `PostgresServiceDatabase`).
protocol AccountsStorage: Sendable {
    /// Where replies to idempotent requests are kept (the same database).
    var replies: any ReplyStore { get }

    // Login outcomes (the login guard's memory across restarts).
    func record(_ event: LoginGuard.Event, horizon: Double) async throws
    func loginEvents(since: Double) async throws -> [LoginGuard.Event]
    /// The outcomes since `since` that decide a login of `account` from `client`: the account's
    /// (failures from anywhere, successes) and the address's failures, oldest first. Replayed
    /// into a fresh `LoginGuard`, they give the same decision as a guard fed every outcome.
    func loginEvents(account: String, client: String, since: Double) async throws -> [LoginGuard.Event]
    /// Whether several instances may share this storage (then the login guard is rebuilt from
    /// the stored outcomes for every login, so a throttle holds across instances).
    var isShared: Bool { get }

    // Users and profiles.
    func insertUser(username: String, email: String, phone: String, passwordHash: String,
                    firstName: String, lastName: String, now: Int64, committed: (@Sendable (UserRecord) -> Void)?) async throws -> UserRecord
    func user(id: UInt64) async throws -> UserRecord?
    func users(ids: [UInt64]) async throws -> [UserRecord]
    func users(usernames: [String]) async throws -> [UserRecord]
    func users(after id: UInt64, limit: Int) async throws -> [UserRecord]
    func search(prefix: String, after: String, limit: Int) async throws -> [UserRecord]
    func user(login: Validation.LoginName) async throws -> UserRecord?
    func changeEmail(userID: UInt64, email: String) async throws -> UserRecord
    func updateProfile(userID: UInt64, firstName: String?, lastName: String?, mediaID: String?,
                       committed: (@Sendable (UserRecord) -> Void)?) async throws -> UserRecord

    // Sessions.
    func createSession(userID: UInt64, tokenHash: [UInt8], now: Int64, expiresAt: Int64) async throws -> UInt64
    func session(tokenHash: [UInt8]) async throws -> SessionRecord?
    func session(id: UInt64) async throws -> SessionRecord?
    /// `committed` runs once it is durable, in commit order (the revocation's event).
    func revokeSession(id: UInt64, userID: UInt64, now: Int64, committed: (@Sendable () -> Void)?) async throws
    func changePassword(userID: UInt64, hash: String, keepSession keep: UInt64, now: Int64, committed: (@Sendable () -> Void)?) async throws -> Int

    // Contact matching and linked external accounts.
    func matchContacts(hashes: [[UInt8]], externalIDs: [ExternalID]) async throws -> [ContactMatch]
    func link(userID: UInt64, _ link: ExternalID, now: Int64) async throws -> [ExternalID]
    func unlink(userID: UInt64, _ link: ExternalID) async throws -> [ExternalID]

    // Deleting an account and erasing it everywhere.
    func deleteUser(_ user: UserRecord, targets: [String], now: Int64, committed: @escaping @Sendable (UserRecord) -> Void) async throws
    func dueErasures(now: Int64) async throws -> [ErasureStep]
    func onlyLocalStepLeft(_ user: UInt64) async throws -> Bool
    func advance(_ step: ErasureStep, due: Int64) async throws
    func retry(_ step: ErasureStep, due: Int64) async throws
    func complete(_ step: ErasureStep) async throws
    func finishErasure(_ user: UInt64, traces: ErasureTraces) async throws
    func pendingErasures() async throws -> Int
    /// After the last step of an erasure: leaves no copy of erased rows where the engine keeps
    /// old pages (SQLite: the WAL, truncated; PostgreSQL: dead tuples, vacuumed).
    func scrubErasedRows() async throws

    // The email outbox, and the built-in recording provider's table.
    func dueEmails(now: Int64) async throws -> [EmailMessage]
    func emailSent(_ id: UInt64, provider: String, reference: String, now: Int64) async throws
    func emailFailed(_ id: UInt64, error: String, final: Bool, now: Int64) async throws
    func recordSentEmail(_ message: EmailMessage, at: Int64) async throws
    /// Bodies the recording provider recorded for `address`, oldest first (tests, operators).
    func recordedEmailBodies(to address: String) async throws -> [String]
    /// Deletes the emails done (sent, or failed for good) before `cutoff`, and the recording
    /// provider's copies made before it. - Returns: rows deleted.
    func pruneEmails(before cutoff: Int64) async throws -> Int

    // Password resets.
    func requestReset(client: String, user: UserRecord?, codeHash: [UInt8], now: Int64, lifetime: Int64, perClient: Int, perAccount: Int,
                      email: (subject: String, body: String)) async throws -> ResetRequestOutcome
    func checkResetCode(user: UInt64, hash: [UInt8], now: Int64, attempts: Int) async throws -> UInt64?
    func resetPassword(user: UInt64, resetID: UInt64, passwordHash: String, now: Int64, committed: (@Sendable () -> Void)?) async throws -> Int?

    // Export my data.
    func export(_ user: UserRecord, currentSession: UInt64) async throws -> AccountsV1.ExportMyDataResponse
}

/// The email outbox's statuses (both engines).
enum EmailStatus {
    static let pending = 1, sent = 2, failed = 3
    static let names = [pending: "pending", sent: "sent", failed: "failed"]
}
