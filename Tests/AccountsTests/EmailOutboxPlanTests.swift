@testable import Accounts
import Foundation
import FriensoTesting
import GRDB
import Logging
import Storage
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
            return ([try queryPlan(db, SQLiteAccountsStore.dueEmailsSQL, [100]), try queryPlan(db, SQLiteAccountsStore.expireEmailsSQL, [EmailStatus.failed, 100, 100])], ids)
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

/// Emails done are kept `emailRetention` (90 days), then the worker's hourly prune deletes them
/// with the recording provider's copies; the outbox is read from its oldest id up to the first
/// email queued since the cutoff, the copies through their index by time (as alerts' outbox,
/// item 157). Before, neither table was ever pruned.
@Suite("accounts: the hourly prune of old emails", .timeLimit(.minutes(1)))
struct EmailPruneTests {
    // id: (status, created, done); 1 pending, 2 sent, 3 failed.
    static let insert = [(1, 2, 10, 20), (2, 1, 20, 0), (3, 2, 30, 2_000), (4, 3, 900, 950), (5, 2, 1_500, 1_600), (6, 2, 800, 850)].map { id, status, created, done in
        "INSERT INTO email_outbox (id, user_id, address, subject, body, status, created_ms, next_attempt_ms, expires_ms, done_ms) "
            + "VALUES (\(id), 7, 'a@example.org', 's', '', \(status), \(created), \(created), \(created + 1_000_000), \(done));"
    }.joined() + [("a", 10), ("b", 1_500), ("c", 800)].map { key, at in
        "INSERT INTO sent_emails (idempotency_key, provider, address, subject, body, sent_at_ms) VALUES ('\(key)', 'recording', 'a@example.org', 's', 'b', \(at));"
    }.joined()
    static let listing = "SELECT 'email ' || id FROM email_outbox UNION ALL SELECT 'sent ' || idempotency_key FROM sent_emails ORDER BY 1"

    /// Deleted: done before the cutoff and queued before the first email queued since. Kept:
    /// pending, done since, queued since, and one whose clock ran behind a newer id's (deleted at
    /// a later prune). The copies go by their own time.
    @Test(arguments: Engine.allCases) func thePrune_deletesTheEmailsDone_beforeTheFirstRecentOne(engine: Engine) async throws {
        try await withOpenStore(engine, config: AccountsConfig()) { storage, service in
            let left: () async throws -> [String]
            switch service.store {
            case let sqlite as SQLiteAccountsStore:
                try await sqlite.database.write { db in try db.execute(sql: Self.insert) }
                left = { try await sqlite.database.read { db in try String.fetchAll(db, sql: Self.listing) } }
            default:
                _ = try await storage.psql(Self.insert)
                left = { try await storage.psql(Self.listing).split(separator: "\n").map(String.init) }
            }
            #expect(try await service.store.pruneEmails(before: 1_000) == 4, "emails 1 and 4, copies a and c")
            #expect(try await left() == ["email 2", "email 3", "email 5", "email 6", "sent b"])
            #expect(try await service.store.pruneEmails(before: 2_000) == 3)
            #expect(try await left() == ["email 2", "email 3"])
        }
    }

    /// The executable's `PeriodicPrune` prunes at its first turn, then once an hour: an email
    /// done 91 days ago goes, one done 89 days ago stays.
    @Test func thePeriodicPrune_deletesEmailsPastTheirRetention() async throws {
        let clock = TestClock()
        var config = AccountsConfig()
        config.now = { clock.now }
        try await withOpenStore(.sqlite, config: config) { _, service in
            let sqlite = try #require(service.store as? SQLiteAccountsStore)
            let day: Int64 = 86_400_000
            try await sqlite.database.write { db in
                for (id, age) in [(1, 91 * day), (2, 89 * day)] {
                    let at = clock.now - age
                    try db.execute(sql: """
                        INSERT INTO email_outbox (id, user_id, address, subject, body, status, created_ms, next_attempt_ms, expires_ms, done_ms)
                        VALUES (?, 7, 'a@example.org', 's', '', \(EmailStatus.sent), ?, ?, ?, ?)
                        """, arguments: [id, at, at, at + 1_000, at])
                }
            }
            let worker = Task { try await PeriodicPrune("emails", logger: Logger(label: "test")) { try await service.pruneEmails() }.run() }
            defer { worker.cancel() }
            try await eventually("the first prune") {
                try await sqlite.database.read { db in try Int64.fetchAll(db, sql: "SELECT id FROM email_outbox ORDER BY id") } == [2]
            }
            worker.cancel()
            _ = await worker.result
        }
    }

    @Test func onSQLite_thePrune_searches() async throws {
        let storage = try await TestStorage.fresh(.sqlite, service: "accounts")
        let store = try SQLiteAccountsStore(path: "\(storage.directory)/accounts.sqlite")
        let plans = try await store.database.read { db in
            try [SQLiteAccountsStore.pruneEmailsSQL, SQLiteAccountsStore.pruneSentEmailsSQL].map { sql in
                try queryPlan(db, sql, [1_000])
            }
        }
        await storage.remove()
        #expect(plans[0].first == "SEARCH email_outbox USING INTEGER PRIMARY KEY (rowid<?)", "\(plans[0])")
        #expect(!plans[0].contains { $0.contains("TEMP B-TREE") }, "a sort: every row read: \(plans[0])")
        #expect(plans[1] == ["SEARCH sent_emails USING INDEX sent_emails_at (sent_at_ms<?)"], "\(plans[1])")
    }

    /// On PostgreSQL, on generic plans (forced): the primary key's order and the index by time.
    @Test func onPostgreSQL_thePrune_searches_onAGenericPlan() async throws {
        try await withOpenStore(.postgres, config: AccountsConfig()) { storage, _ in
            _ = try await storage.psql("""
                INSERT INTO email_outbox (user_id, address, subject, body, status, created_ms, next_attempt_ms, expires_ms, done_ms)
                SELECT i, 'a@example.org', 's', '', \(EmailStatus.sent), i, i, i, i FROM generate_series(1, 5000) i;
                INSERT INTO sent_emails (idempotency_key, provider, address, subject, body, sent_at_ms)
                SELECT 'k' || i, 'recording', 'a@example.org', 's', 'b', i FROM generate_series(1, 5000) i;
                ANALYZE email_outbox, sent_emails;
                """)
            let plan = try await storage.psql("""
                SET plan_cache_mode = force_generic_plan;
                PREPARE emails AS \(PostgresAccountsStore.pruneEmails(before: 100).sql); EXPLAIN EXECUTE emails(100, 100);
                PREPARE sent AS \(PostgresAccountsStore.pruneSentEmails(before: 100).sql); EXPLAIN EXECUTE sent(100);
                """)
            #expect(plan.contains("Index Cond: (id < COALESCE") && plan.contains("sent_emails_at"), "\(plan)")
            #expect(!plan.contains("Seq Scan") && !plan.contains("Sort"), "\(plan)")
        }
    }
}
