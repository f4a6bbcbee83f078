import FriensoProto
import Foundation
import Identity
import Logging
import NIOCore
import PostgresNIO
import Storage
import Wire

/// Password resets on PostgreSQL (the SQLite side: `PasswordReset.swift`).
extension PostgresAccountsStore {
    func requestReset(client: String, user: UserRecord?, codeHash: [UInt8], now: Int64, lifetime: Int64, perClient: Int, perAccount: Int,
                      email: (subject: String, body: String)) async throws -> ResetRequestOutcome {
        let hash = Data(codeHash)
        return try await database.write { connection in
            let hourAgo = now - 3_600_000
            try await connection.prepared("DELETE FROM reset_requests WHERE at_ms <= \(hourAgo)", logger: logger)
            let fromClient = try await Self.int(connection.prepared(
                "SELECT count(*) FROM reset_requests WHERE client = \(client) AND at_ms > \(hourAgo)", logger: logger))
            guard fromClient < perClient else { return .throttledClient }
            try await connection.prepared("INSERT INTO reset_requests (client, at_ms) VALUES (\(client), \(now))", logger: logger)
            guard let user else { return .noAccount }
            let id = Int64(user.id)
            let recent = try await Self.int(connection.prepared(
                "SELECT count(*) FROM password_resets WHERE user_id = \(id) AND created_ms > \(hourAgo)", logger: logger))
            guard recent < perAccount else { return .throttledAccount }
            try await connection.prepared(
                "DELETE FROM password_resets WHERE user_id = \(id) AND expires_ms <= \(now) AND created_ms <= \(hourAgo)", logger: logger)
            try await connection.prepared("""
                INSERT INTO password_resets (user_id, code_hash, created_ms, expires_ms) VALUES (\(id), \(hash), \(now), \(now + lifetime))
                """, logger: logger)
            try await connection.prepared("""
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
            if let reset = try await PostgresServiceDatabase.first(connection.prepared("""
                SELECT id FROM password_resets
                WHERE user_id = \(id) AND used_ms = 0 AND expires_ms > \(now) AND failures < \(attempts) AND code_hash = \(code)
                """, logger: logger), Int64.self) {
                return UInt64(reset)
            }
            try await connection.prepared("""
                UPDATE password_resets SET failures = failures + 1
                WHERE user_id = \(id) AND used_ms = 0 AND expires_ms > \(now) AND failures < \(attempts)
                """, logger: logger)
            return nil
        }
    }

    func resetPassword(user: UInt64, resetID: UInt64, passwordHash: String, now: Int64, committed: (@Sendable () -> Void)?) async throws -> Int? {
        let id = Int64(user)
        return try await database.write({ connection in
            guard try await PostgresServiceDatabase.count(connection.prepared(
                "UPDATE password_resets SET used_ms = \(now) WHERE id = \(Int64(resetID)) AND used_ms = 0 RETURNING 1", logger: logger)) == 1 else {
                return nil
            }
            try await connection.prepared("UPDATE password_resets SET used_ms = \(now) WHERE user_id = \(id) AND used_ms = 0", logger: logger)
            try await connection.prepared("UPDATE users SET password_hash = \(passwordHash) WHERE id = \(id)", logger: logger)
            return try await PostgresServiceDatabase.count(connection.prepared("""
                UPDATE sessions SET revoked_at_ms = \(now) WHERE user_id = \(id) AND revoked_at_ms IS NULL AND expires_at_ms > \(now) RETURNING 1
                """, logger: logger))
        }, committed: CommittedAction.whenSome(committed), orderedBy: user)
    }
}
