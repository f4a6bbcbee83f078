public import FriensoProto
import Foundation
import GRDB
public import Logging
public import ServiceLifecycle
import Storage
public import Wire

// Deleting an account. DeleteAccount removes the account itself at once (row, sessions, linked
// ids, login records: the username, email and phone are free again) and, in the same
// transaction, records one erasure step per service that holds data about the person. The
// `AccountsWorker` then calls each service's `EraseUser` until it succeeds (a service that is down
// erases when it is back; a restart of accounts resumes from the table), twice: at once, and
// again `erasureRecheck` later, for a request that passed the gateway before the revocation and
// landed after the first pass. Accounts' own step runs once, last: the kept replies of the person's
// requests, then the step rows themselves (they held the phone and email alerts needed), then
// the WAL is truncated. Every database runs with `secure_delete`, so nothing of the person stays
// in a file's free pages either.

extension AccountsService {
    /// Accounts' own step in the erasure table.
    static let localStep = "accounts"

    public func deleteAccount(_ request: AccountsV1.DeleteAccountRequest, _ context: RequestContext) async throws -> AccountsV1.DeleteAccountResponse {
        let caller = try context.requireCaller()
        _ = try await currentSession(context, caller: caller)
        guard let user = try await store.user(id: caller) else { throw RPCError.notFound("account no longer exists") }
        guard await config.hasher.verify(request.password, against: user.passwordHash) else {
            throw RPCError.permissionDenied("password is wrong")
        }
        let targets = config.erasureTargets
        try await store.deleteUser(user, targets: targets + [Self.localStep], now: config.now()) { _ in
            self.announceRevocation(of: caller)
            self.events?.emit(topic: Self.profilesStream, method: Self.profileChanged,
                              payload: AccountsV1.ProfileChanged(profile: AccountsV1.Profile(userId: caller), deleted: true).serializedBytes(),
                              subject: caller)
        }
        context.logger.notice("account deleted; erasing its data", metadata: ["user-id": "\(caller)", "services": "\(targets.joined(separator: ","))"])
        return AccountsV1.DeleteAccountResponse(userId: caller, erasing: targets)
    }

    /// How a step reaches its service: `EraseUser` of that service for a user, with what
    /// identifies the person (alerts matches deliveries by phone and email; every service clears
    /// kept replies that mention any of it).
    public typealias Eraser = @Sendable (_ user: UInt64, _ traces: ErasureTraces) async throws -> Void

    /// The erasers of the services a deployment has, over their clients.
    public static func remoteErasers(social: (any RPCCalling)?, geo: (any RPCCalling)?, alerts: (any RPCCalling)?,
                                     media: (any RPCCalling)?, deadline: Duration = .seconds(10)) -> [String: Eraser] {
        let options = CallOptions(deadline: deadline, idempotent: true)
        var erasers: [String: Eraser] = [:]
        if let social {
            erasers["social"] = { user, t in
                _ = try await social.call(SocialV1.SocialService.eraseUser, SocialV1.EraseUserRequest(userId: user, traces: t.all), options: options)
            }
        }
        if let geo {
            erasers["geo"] = { user, t in
                _ = try await geo.call(GeoV1.GeoService.eraseUser, GeoV1.EraseUserRequest(userId: user, traces: t.all), options: options)
            }
        }
        if let alerts {
            erasers["alerts"] = { user, t in
                _ = try await alerts.call(AlertsV1.AlertsService.eraseUser, AlertsV1.EraseUserRequest(userId: user, addresses: t.addresses, traces: t.all),
                                          options: options)
            }
        }
        if let media {
            erasers["media"] = { user, t in
                _ = try await media.call(MediaV1.MediaService.eraseUser, MediaV1.EraseUserRequest(userId: user, traces: t.all), options: options)
            }
        }
        return erasers
    }

    /// Erasure steps not finished yet (every service's, and accounts' own).
    public func pendingErasures() async throws -> Int { try await store.pendingErasures() }

    /// Runs every erasure step that is due. - Returns: steps completed.
    @discardableResult
    public func runErasures(_ erasers: [String: Eraser], logger: Logger) async -> Int {
        let now = config.now()
        let due: [ErasureStep]
        do { due = try await store.dueErasures(now: now) } catch {
            logger.error("cannot read the erasure steps", metadata: ["error": "\(error)"])
            return 0
        }
        var done = 0
        for step in due {
            do {
                if step.target == Self.localStep {
                    // Last: only once every service's step is gone.
                    guard try await store.onlyLocalStepLeft(step.user) else { continue }
                    try await store.finishErasure(step.user, traces: step.traces)
                    try await store.scrubErasedRows()
                    logger.notice("deleted account erased everywhere", metadata: ["user-id": "\(step.user)"])
                } else {
                    guard let erase = erasers[step.target] else {
                        throw RPCError.unavailable("no client for \(step.target) in this deployment")
                    }
                    try await erase(step.user, step.traces)
                    if step.pass == 1 {
                        try await store.advance(step, due: now + config.erasureRecheck.wholeMilliseconds)
                    } else {
                        try await store.complete(step)
                    }
                }
                done += 1
            } catch {
                let delay = min(30_000, 500 << min(step.attempts, 6))
                logger.warning("erasure step failed; retrying", metadata: ["user-id": "\(step.user)", "service": "\(step.target)",
                                                                           "attempt": "\(step.attempts + 1)", "error": "\(error)"])
                try? await store.retry(step, due: config.now() + Int64(delay))
            }
        }
        return done
    }
}

/// What identifies a deleted person, kept in the erasure steps until the last one is done.
public struct ErasureTraces: Sendable, Codable, Equatable {
    public var username: String
    public var email: String
    public var phone: String
    public var firstName: String
    public var lastName: String

    /// Where deliveries reached them.
    public var addresses: [String] { [phone, email] }
    /// Everything, for clearing kept replies that mention them.
    public var all: [String] { [username, email, phone, firstName, lastName] }
}

/// One service's part in erasing one deleted account.
struct ErasureStep: Sendable {
    var user: UInt64
    var target: String
    /// 1: the first erasure; 2: the check after `erasureRecheck`.
    var pass: Int
    var attempts: Int
    var traces: ErasureTraces
}

/// Accounts' background work, at start (resuming what a restart interrupted) and every
/// `interval`: the erasure steps of deleted accounts, and the email outbox.
public final class AccountsWorker: Service, Sendable {
    private let service: AccountsService
    private let erasers: [String: AccountsService.Eraser]
    private let interval: Duration
    private let logger: Logger

    public init(service: AccountsService, erasers: [String: AccountsService.Eraser], interval: Duration = .seconds(1), logger: Logger) {
        self.service = service
        self.erasers = erasers
        self.interval = interval
        self.logger = logger
    }

    public func run() async throws {
        let service = service, erasers = erasers, interval = interval, logger = logger
        await cancelWhenGracefulShutdown {
            while !Task.isCancelled {
                await service.runErasures(erasers, logger: logger)
                await service.deliverEmails(logger: logger)
                try? await Task.sleep(for: interval)
            }
        }
    }
}

extension SQLiteAccountsStore {
    static func migrateErasures(_ migrator: inout DatabaseMigrator) {
        migrator.registerMigration("erasures") { db in
            try db.execute(sql: """
                CREATE TABLE erasures (
                    user_id INTEGER NOT NULL, target TEXT NOT NULL, pass INTEGER NOT NULL, due_ms INTEGER NOT NULL,
                    attempts INTEGER NOT NULL DEFAULT 0, traces TEXT NOT NULL, PRIMARY KEY (user_id, target)
                ) WITHOUT ROWID;
                CREATE INDEX erasures_due ON erasures(due_ms);
                """)
        }
    }

    /// Deletes the account (sessions and linked ids go with it: foreign keys) and its login
    /// records, and records an erasure step per target, in one transaction.
    func deleteUser(_ user: UserRecord, targets: [String], now: Int64, committed: @escaping @Sendable (UserRecord) -> Void) async throws {
        let traces = String(decoding: try JSONEncoder().encode(ErasureTraces(
            username: user.username, email: user.email, phone: user.phone, firstName: user.firstName, lastName: user.lastName)), as: UTF8.self)
        // Emails to their address (reset codes), from the outbox and the recording provider's
        // copies: no index serves that search (90 days of emails), so a reader walks both first and
        // the writer, which every login and sign-up waits for, is not held meanwhile (`WalkedRows`;
        // `docs/benchmarks.md` item 163).
        let (outbox, copies) = try await database.scan { db in
            (try WalkedRows.walk(db, .emailsTo, [user.email]), try WalkedRows.walk(db, .copiesTo, [user.email]))
        }
        _ = try await database.write({ db in
            // The login guard's keys for the three ways to name the account (see `login`).
            let keys: [Validation.LoginName] = [.username(user.username.lowercased()), .email(user.email.lowercased()), .phone(user.phone)]
            try db.run(sql: "DELETE FROM login_events WHERE account IN (?, ?, ?)", arguments: StatementArguments(keys.map { "\($0)" }))
            // Their emails; password_resets go with the row (foreign key).
            try db.run(sql: "DELETE FROM email_outbox WHERE user_id = ?", arguments: [user.id])
            _ = try outbox.delete(db, .emailsTo, [user.email])
            _ = try copies.delete(db, .copiesTo, [user.email])
            try db.run(sql: "DELETE FROM users WHERE id = ?", arguments: [user.id])
            guard db.changesCount == 1 else { throw AccountRefusal.noAccount(user.id) }
            for target in targets {
                try db.run(sql: "INSERT OR IGNORE INTO erasures (user_id, target, pass, due_ms, traces) VALUES (?, ?, 1, ?, ?)",
                           arguments: [user.id, target, now, traces])
            }
            return user
        }, committed: committed)
    }

    func dueErasures(now: Int64) async throws -> [ErasureStep] {
        try await database.read { db in
            try Row.fetchAll(db, sql: "SELECT user_id, target, pass, attempts, traces FROM erasures WHERE due_ms <= ? ORDER BY due_ms LIMIT 100",
                             arguments: [now]) { row in
                try ErasureStep(user: row[0], target: row[1], pass: row[2], attempts: row[3],
                            traces: try JSONDecoder().decode(ErasureTraces.self, from: Data((row[4] as String).utf8)))
            }
        }
    }

    func onlyLocalStepLeft(_ user: UInt64) async throws -> Bool {
        try await database.read { db in
            try Int.fetchOne(db, sql: "SELECT count(*) FROM erasures WHERE user_id = ? AND target != ?",
                             arguments: [user, AccountsService.localStep]) == 0
        }
    }

    func advance(_ step: ErasureStep, due: Int64) async throws {
        try await database.write { db in
            try db.run(sql: "UPDATE erasures SET pass = 2, attempts = 0, due_ms = ? WHERE user_id = ? AND target = ?",
                       arguments: [due, step.user, step.target])
        }
    }

    func retry(_ step: ErasureStep, due: Int64) async throws {
        try await database.write { db in
            try db.run(sql: "UPDATE erasures SET attempts = attempts + 1, due_ms = ? WHERE user_id = ? AND target = ?",
                       arguments: [due, step.user, step.target])
        }
    }

    func complete(_ step: ErasureStep) async throws {
        try await database.write { db in
            try db.run(sql: "DELETE FROM erasures WHERE user_id = ? AND target = ?", arguments: [step.user, step.target])
        }
    }

    /// Accounts' own part, last: the person's kept replies and the erasure rows themselves.
    func finishErasure(_ user: UInt64, traces: ErasureTraces) async throws {
        try await database.write { db in
            try SQLiteReplyStore.eraseReplies(db, of: user, mentioning: traces.all)
            try db.run(sql: "DELETE FROM erasures WHERE user_id = ?", arguments: [user])
        }
    }

    /// Steps not finished (for tests and operators).
    func pendingErasures() async throws -> Int {
        try await database.read { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM erasures") ?? 0 }
    }

    func scrubErasedRows() async throws {
        try await database.truncateWAL()
    }
}

extension WalkedRows.Search {
    /// Emails to an address: the outbox's (AUTOINCREMENT ids) and the recording provider's copies
    /// (known by their key). An email's address never changes.
    static let emailsTo = Self(table: "email_outbox", identity: "id", condition: "address = ?")
    static let copiesTo = Self(table: "sent_emails", identity: "idempotency_key", condition: "address = ?")
}
