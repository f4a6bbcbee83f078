public import FriensoProto
import GRDB
import Storage
public import Wire

/// Export my data: everything accounts stores about the caller (the CLI gathers every
/// service's part into one archive, `frienso account export`).
extension AccountsService {
    public func exportMyData(_ request: AccountsV1.ExportMyDataRequest, _ context: RequestContext) async throws -> AccountsV1.ExportMyDataResponse {
        let caller = try context.requireCaller()
        let session = try await currentSession(context, caller: caller)
        guard let user = try await store.user(id: caller) else { throw RPCError.notFound("account no longer exists") }
        return try await store.export(user, currentSession: session.id)
    }
}

extension SQLiteAccountsStore {
    func export(_ user: UserRecord, currentSession: UInt64) async throws -> AccountsV1.ExportMyDataResponse {
        try await database.read { db in
            var out = AccountsV1.ExportMyDataResponse(account: user.account)
            out.sessions = try Row.fetchAll(db, sql: """
                SELECT id, created_at_ms, expires_at_ms, coalesce(revoked_at_ms, 0) FROM sessions WHERE user_id = ? ORDER BY id
                """, arguments: [user.id]) {
                try AccountsV1.SessionInfo(createdAtMs: $0[1], expiresAtMs: $0[2], revokedAtMs: $0[3], current: ($0[0] as UInt64) == currentSession)
            }
            out.linked = try Row.fetchAll(db, sql: "SELECT provider, external_id FROM external_ids WHERE user_id = ? ORDER BY linked_at_ms, provider, external_id",
                                          arguments: [user.id]) { try AccountsV1.ExternalId(provider: $0[0], externalId: $0[1]) }
            out.passwordResets = try Row.fetchAll(db, sql: "SELECT created_ms, expires_ms, used_ms FROM password_resets WHERE user_id = ? ORDER BY id",
                                                  arguments: [user.id]) {
                try AccountsV1.PasswordResetInfo(createdAtMs: $0[0], expiresAtMs: $0[1], usedAtMs: $0[2])
            }
            out.emails = try Row.fetchAll(db, sql: "SELECT address, subject, status, created_ms FROM email_outbox WHERE user_id = ? ORDER BY id",
                                          arguments: [user.id]) {
                try AccountsV1.EmailInfo(address: $0[0], subject: $0[1], status: EmailStatus.names[$0[2] as Int] ?? "unknown", createdAtMs: $0[3])
            }
            return out
        }
    }
}
