@testable import Accounts
import Foundation
import FriensoTesting
import GRDB
import Testing

/// The worker's reads of the emails due and expired (once a second, in a write transaction)
/// search the partial index of the pending ones, however many emails the outbox has kept
/// (issue 16, items 152 and 155).
@Suite("accounts: the email outbox's due read", .timeLimit(.minutes(1)))
struct EmailOutboxPlanTests {
    @Test func dueEmails_areSearchedAmongThePendingOnes_inIDOrder() async throws {
        let storage = try await TestStorage.fresh(.sqlite, service: "accounts")
        let store = try SQLiteAccountsStore(path: "\(storage.directory)/accounts.sqlite")
        let (plans, ids) = try await store.database.write { db -> ([[String]], [UInt64]) in
            // A long history of sent ones, then three pending ones due in the reverse order of their ids.
            for n in 0..<300 {
                try db.execute(sql: """
                    INSERT INTO email_outbox (user_id, address, subject, body, status, created_ms, next_attempt_ms, expires_ms) VALUES (?, 'a@example.org', 's', '', ?, ?, ?, ?)
                    """, arguments: [n, EmailStatus.sent, n, n, n])
            }
            var ids: [UInt64] = []
            for due in [30, 20, 10] {
                try SQLiteAccountsStore.enqueueEmail(db, user: 1, to: "b@example.org", subject: "s", body: "b", now: Int64(due), expires: 1_000_000)
                ids.append(UInt64(db.lastInsertedRowID))
            }
            let plan = { (sql: String, arguments: StatementArguments) in
                try Row.fetchAll(db, sql: "EXPLAIN QUERY PLAN " + sql, arguments: arguments).map { $0["detail"] as String }
            }
            return ([try plan(SQLiteAccountsStore.dueEmailsSQL, [100]), try plan(SQLiteAccountsStore.expireEmailsSQL, [EmailStatus.failed, 100, 100])], ids)
        }
        for steps in plans {
            #expect(steps.contains { $0.contains("USING INDEX email_outbox_due") }, "\(steps)")
            #expect(!steps.contains { $0.hasPrefix("SCAN") && !$0.contains("INDEX") }, "the whole outbox walked: \(steps)")
        }
        #expect(try await store.dueEmails(now: 100).map(\.deliveryID) == ids, "in id order")
        #expect(try await store.dueEmails(now: 15).map(\.deliveryID) == [ids[2]], "only what is due")
    }

    /// On PostgreSQL, as the worker runs them: prepared statements, which after five runs may
    /// keep a generic plan (forced here), where a bound status cannot pick the partial index.
    @Test func onPostgreSQL_theGenericPlans_searchThePendingOnes() async throws {
        try await withOpenStore(.postgres, config: AccountsConfig()) { store, _ in
            // A history of 5,000 sent emails, with the statistics the planner reads.
            _ = try await store.psql("""
                INSERT INTO email_outbox (user_id, address, subject, body, status, created_ms, next_attempt_ms, expires_ms)
                SELECT i, 'a@example.org', 's', '', \(EmailStatus.sent), i, i, i FROM generate_series(1, 5000) i; ANALYZE email_outbox;
                """)
            let generic = "SET plan_cache_mode = force_generic_plan; "
            let due = try await store.psql(generic + "PREPARE due AS \(PostgresAccountsStore.dueEmails(now: 100).sql); EXPLAIN EXECUTE due(100);")
            let expire = try await store.psql(generic + "PREPARE expire AS \(PostgresAccountsStore.expireEmails(now: 100).sql); EXPLAIN EXECUTE expire(3, 100, 100);")
            for (read, plan) in [("due", due), ("expire", expire)] {
                #expect(plan.contains("email_outbox_due"), "\(read): \(plan)")
                #expect(!plan.contains("Seq Scan") && !plan.contains("email_outbox_pkey"), "\(read) walks the whole outbox: \(plan)")
            }
        }
    }
}
