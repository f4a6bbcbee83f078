import FriensoProto
import Foundation
import Identity
import Logging
import NIOCore
import PostgresNIO
import Storage
import Wire

/// Deleting an account and its erasure steps on PostgreSQL (the SQLite side: `Erasure.swift`).
extension PostgresAccountsStore {
    func deleteUser(_ user: UserRecord, targets: [String], now: Int64, committed: @escaping @Sendable (UserRecord) -> Void) async throws {
        let traces = String(decoding: try JSONEncoder().encode(ErasureTraces(
            username: user.username, email: user.email, phone: user.phone, firstName: user.firstName, lastName: user.lastName)), as: UTF8.self)
        let keys: [String] = [Validation.LoginName.username(user.username.lowercased()), .email(user.email.lowercased()), .phone(user.phone)].map { "\($0)" }
        let id = Int64(user.id)
        _ = try await database.write({ connection in
            try await connection.prepared("DELETE FROM login_events WHERE account = ANY(\(keys))", logger: logger)
            try await connection.prepared("DELETE FROM email_outbox WHERE user_id = \(id) OR address = \(user.email)", logger: logger)
            try await connection.prepared("DELETE FROM sent_emails WHERE address = \(user.email)", logger: logger)
            guard try await PostgresServiceDatabase.count(connection.prepared("DELETE FROM users WHERE id = \(id) RETURNING 1", logger: logger)) == 1 else {
                throw AccountRefusal.noAccount(user.id)
            }
            // Their profile's past versions in the event log (names, picture) go too.
            try await PostgresEventLog.erase(subject: user.id, on: connection, logger: logger)
            for target in targets {
                try await connection.prepared("""
                    INSERT INTO erasures (user_id, target, pass, due_ms, traces) VALUES (\(id), \(target), 1, \(now), \(traces)) ON CONFLICT DO NOTHING
                    """, logger: logger)
            }
            return user
        }, committed: committed, orderedBy: user.id)
    }

    func dueErasures(now: Int64) async throws -> [ErasureStep] {
        try await database.read { connection in
            var steps: [ErasureStep] = []
            let rows = try await connection.prepared(
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
            try await Self.int(connection.prepared(
                "SELECT count(*) FROM erasures WHERE user_id = \(Int64(user)) AND target != \(AccountsService.localStep)", logger: logger)) == 0
        }
    }

    func advance(_ step: ErasureStep, due: Int64) async throws {
        try await database.write { connection in
            try await connection.prepared("""
                UPDATE erasures SET pass = 2, attempts = 0, due_ms = \(due) WHERE user_id = \(Int64(step.user)) AND target = \(step.target)
                """, logger: logger)
        }
    }

    func retry(_ step: ErasureStep, due: Int64) async throws {
        try await database.write { connection in
            try await connection.prepared("""
                UPDATE erasures SET attempts = attempts + 1, due_ms = \(due) WHERE user_id = \(Int64(step.user)) AND target = \(step.target)
                """, logger: logger)
        }
    }

    func complete(_ step: ErasureStep) async throws {
        try await database.write { connection in
            try await connection.prepared("DELETE FROM erasures WHERE user_id = \(Int64(step.user)) AND target = \(step.target)", logger: logger)
        }
    }

    func finishErasure(_ user: UInt64, traces: ErasureTraces) async throws {
        try await database.write { connection in
            try await PostgresReplyStore.eraseReplies(connection, of: user, mentioning: traces.all, logger: logger)
            try await connection.prepared("DELETE FROM erasures WHERE user_id = \(Int64(user))", logger: logger)
        }
    }

    func pendingErasures() async throws -> Int {
        try await database.read { connection in try await Self.int(connection.prepared("SELECT count(*) FROM erasures", logger: logger)) }
    }

    /// Dead row versions keep their bytes in the table's pages until vacuumed: after an erasure,
    /// the tables that held the person are vacuumed, so their space is pruned and reused.
    func scrubErasedRows() async throws {
        try await database.read { connection in
            try await connection.prepared("""
                VACUUM users, sessions, external_ids, login_events, email_outbox, sent_emails, password_resets, idempotent_replies
                """, logger: logger)
        }
    }
}
