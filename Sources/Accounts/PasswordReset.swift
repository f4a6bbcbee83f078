public import FriensoProto
import Foundation
import GRDB
import Identity
import Storage
public import Wire

/// Forgotten passwords: a single-use code by email (`ResetCode`), then a new password with it.
/// Neither step tells whether an account exists: the request's reply is always the same, and a
/// reset with a wrong code, a used or expired one, or for no account, is the same refusal.
extension AccountsService {
    static let wrongCode = "the code is wrong or has expired: ask for a new one"

    public func requestPasswordReset(_ request: AccountsV1.RequestPasswordResetRequest, _ context: RequestContext) async throws -> AccountsV1.RequestPasswordResetResponse {
        let login = try Validation.login(request.login)
        let now = config.now()
        let policy = config.passwordReset
        let user = try await store.user(login: login)
        let code = ResetCode.generate { UInt64.random(in: 0...UInt64.max) }
        let lifetime = policy.codeLifetime.wholeMilliseconds
        let minutes = UInt32(lifetime / 60_000)
        let sent = try await store.requestReset(
            client: context.clientAddress, user: user, codeHash: ResetCode.hash(ResetCode.normalize(code) ?? ""), now: now,
            lifetime: lifetime, perClient: policy.requestsPerClientPerHour, perAccount: policy.codesPerAccountPerHour,
            email: (subject: "Your Frienso password reset code",
                    body: """
                        Someone (we hope you) asked to reset the password of the Frienso account \(user?.username ?? "").

                        Your code: \(code)

                        It works once, for \(minutes) minutes: `frienso password reset \(user?.username ?? "") --code \(code)`, or \
                        the app's "Forgot password?". Every session of the account is logged out when it is used.
                        If you did not ask, ignore this email: your password stays as it is.
                        """))
        switch sent {
        case .throttledClient:
            throw RPCError.resourceExhausted("too many password reset requests from this address: try again in an hour")
        case .sent:
            context.logger.info("password reset code queued", metadata: ["user-id": "\(user?.id ?? 0)"])
        case .noAccount, .throttledAccount:
            break // the same reply: nothing tells whether the account exists, or how often it asked
        }
        return AccountsV1.RequestPasswordResetResponse(expiresInMinutes: minutes)
    }

    public func resetPassword(_ request: AccountsV1.ResetPasswordRequest, _ context: RequestContext) async throws -> AccountsV1.ResetPasswordResponse {
        let login = try Validation.login(request.login)
        let newPassword = try Validation.password(request.newPassword, field: "new_password")
        guard let user = try await store.user(login: login) else { throw RPCError.permissionDenied(Self.wrongCode) }
        let now = config.now()
        guard let code = ResetCode.normalize(request.code),
              let reset = try await store.checkResetCode(user: user.id, hash: ResetCode.hash(code), now: now,
                                                         attempts: config.passwordReset.attemptsPerAccount)
        else { throw RPCError.permissionDenied(Self.wrongCode) }
        let hash = try await config.hasher.hash(newPassword)
        guard let revoked = try await store.resetPassword(user: user.id, resetID: reset, passwordHash: hash, now: config.now(),
                                                          committed: { self.announceRevocation(of: user.id) }) else {
            throw RPCError.permissionDenied(Self.wrongCode) // used meanwhile by a concurrent reset
        }
        context.logger.notice("password reset with a code", metadata: ["user-id": "\(user.id)", "revoked": "\(revoked)"])
        return AccountsV1.ResetPasswordResponse(revokedSessions: UInt32(revoked))
    }
}

extension AccountsService {
    /// For alerts (ending a check-in timer with the password). An unknown user takes as long as
    /// a wrong password (the decoy hash).
    public func verifyPassword(_ request: AccountsV1.VerifyPasswordRequest, _ context: RequestContext) async throws -> AccountsV1.VerifyPasswordResponse {
        guard !request.password.isEmpty, request.password.utf8.count <= 1_024 else { return AccountsV1.VerifyPasswordResponse(valid: false) }
        let user = try await store.user(id: request.userId)
        return AccountsV1.VerifyPasswordResponse(valid: await config.hasher.verify(request.password, against: user?.passwordHash))
    }
}

/// What a reset request did (only the first is ever told to the caller).
enum ResetRequestOutcome: Sendable {
    case throttledClient, sent, noAccount, throttledAccount
}

extension SQLiteAccountsStore {
    static func migratePasswordReset(_ migrator: inout DatabaseMigrator) {
        migrator.registerMigration("password_reset") { db in
            try db.execute(sql: """
                CREATE TABLE password_resets (
                    id INTEGER PRIMARY KEY AUTOINCREMENT, user_id INTEGER NOT NULL REFERENCES users(id) ON DELETE CASCADE,
                    code_hash BLOB NOT NULL, created_ms INTEGER NOT NULL, expires_ms INTEGER NOT NULL, used_ms INTEGER NOT NULL DEFAULT 0,
                    failures INTEGER NOT NULL DEFAULT 0
                );
                CREATE INDEX password_resets_user ON password_resets(user_id, created_ms);
                CREATE TABLE reset_requests (client TEXT NOT NULL, at_ms INTEGER NOT NULL);
                CREATE INDEX reset_requests_client ON reset_requests(client, at_ms);
                """)
        }
    }

    /// Records the request (for the per-address limit) and, when the account exists and is under
    /// its own limit, a new code and its email; one transaction.
    func requestReset(client: String, user: UserRecord?, codeHash: [UInt8], now: Int64, lifetime: Int64, perClient: Int, perAccount: Int,
                      email: (subject: String, body: String)) async throws -> ResetRequestOutcome {
        try await database.write { db in
            let hourAgo = now - 3_600_000
            try db.run(sql: "DELETE FROM reset_requests WHERE at_ms <= ?", arguments: [hourAgo])
            let fromClient = try Int.fetchOne(db, sql: "SELECT count(*) FROM reset_requests WHERE client = ? AND at_ms > ?", arguments: [client, hourAgo]) ?? 0
            guard fromClient < perClient else { return .throttledClient }
            try db.run(sql: "INSERT INTO reset_requests (client, at_ms) VALUES (?, ?)", arguments: [client, now])
            guard let user else { return .noAccount }
            let recent = try Int.fetchOne(db, sql: "SELECT count(*) FROM password_resets WHERE user_id = ? AND created_ms > ?", arguments: [user.id, hourAgo]) ?? 0
            guard recent < perAccount else { return .throttledAccount }
            try db.run(sql: "DELETE FROM password_resets WHERE user_id = ? AND expires_ms <= ? AND created_ms <= ?", arguments: [user.id, now, hourAgo])
            try db.run(sql: "INSERT INTO password_resets (user_id, code_hash, created_ms, expires_ms) VALUES (?, ?, ?, ?)",
                       arguments: [user.id, Data(codeHash), now, now + lifetime])
            try Self.enqueueEmail(db, user: user.id, to: user.email, subject: email.subject, body: email.body, now: now, expires: now + lifetime)
            return .sent
        }
    }

    /// The live code of `user` with this hash, or nil (and then one more failure counts against
    /// every live code of the account: after `attempts` of them, none works).
    func checkResetCode(user: UInt64, hash: [UInt8], now: Int64, attempts: Int) async throws -> UInt64? {
        try await database.write { db in
            let live = "user_id = ? AND used_ms = 0 AND expires_ms > ? AND failures < ?"
            if let id = try UInt64.fetchOne(db, sql: "SELECT id FROM password_resets WHERE \(live) AND code_hash = ?",
                                            arguments: [user, now, attempts, Data(hash)]) {
                return id
            }
            try db.run(sql: "UPDATE password_resets SET failures = failures + 1 WHERE \(live)", arguments: [user, now, attempts])
            return nil
        }
    }

    /// Sets the new password, uses the code and voids the others, revokes every session.
    /// - Returns: sessions revoked; nil when the code was used meanwhile.
    func resetPassword(user: UInt64, resetID: UInt64, passwordHash: String, now: Int64, committed: (@Sendable () -> Void)?) async throws -> Int? {
        try await database.write({ db in
            try db.run(sql: "UPDATE password_resets SET used_ms = ? WHERE id = ? AND used_ms = 0", arguments: [now, resetID])
            guard db.changesCount == 1 else { return nil }
            try db.run(sql: "UPDATE password_resets SET used_ms = ? WHERE user_id = ? AND used_ms = 0", arguments: [now, user])
            try db.run(sql: "UPDATE users SET password_hash = ? WHERE id = ?", arguments: [passwordHash, user])
            try db.run(sql: "UPDATE sessions SET revoked_at_ms = ? WHERE user_id = ? AND revoked_at_ms IS NULL AND expires_at_ms > ?",
                       arguments: [now, user, now])
            return db.changesCount
        }, committed: CommittedAction.whenSome(committed))
    }
}
