import FriensoProto
import Foundation
import Identity
import Logging
import NIOCore
import PostgresNIO
import Storage
import Wire

/// Export my data on PostgreSQL (the SQLite side: `Export.swift`).
extension PostgresAccountsStore {
    func export(_ user: UserRecord, currentSession: UInt64) async throws -> AccountsV1.ExportMyDataResponse {
        let id = Int64(user.id)
        return try await database.snapshot { connection in
            var out = AccountsV1.ExportMyDataResponse(account: user.account)
            for try await (session, created, expires, revoked) in try await connection.prepared("""
                SELECT id, created_at_ms, expires_at_ms, coalesce(revoked_at_ms, 0) FROM sessions WHERE user_id = \(id) ORDER BY id
                """, logger: logger).decode((Int64, Int64, Int64, Int64).self) {
                out.sessions.append(AccountsV1.SessionInfo(createdAtMs: created, expiresAtMs: expires, revokedAtMs: revoked,
                                                           current: UInt64(session) == currentSession))
            }
            for try await (provider, external) in try await connection.prepared(
                "SELECT provider, external_id FROM external_ids WHERE user_id = \(id) ORDER BY linked_at_ms, provider COLLATE \"C\", external_id COLLATE \"C\"", logger: logger).decode((String, String).self) {
                out.linked.append(AccountsV1.ExternalId(provider: provider, externalId: external))
            }
            for try await (created, expires, used) in try await connection.prepared(
                "SELECT created_ms, expires_ms, used_ms FROM password_resets WHERE user_id = \(id) ORDER BY id", logger: logger).decode((Int64, Int64, Int64).self) {
                out.passwordResets.append(AccountsV1.PasswordResetInfo(createdAtMs: created, expiresAtMs: expires, usedAtMs: used))
            }
            for try await (address, subject, status, created) in try await connection.prepared(
                "SELECT address, subject, status, created_ms FROM email_outbox WHERE user_id = \(id) ORDER BY id", logger: logger)
                .decode((String, String, Int64, Int64).self) {
                out.emails.append(AccountsV1.EmailInfo(address: address, subject: subject, status: EmailStatus.names[Int(status)] ?? "unknown",
                                                       createdAtMs: created))
            }
            return out
        }
    }
}
