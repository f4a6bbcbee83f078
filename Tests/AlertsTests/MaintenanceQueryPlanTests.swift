@testable import Alerts
import Foundation
import FriensoProto
import FriensoTesting
import GRDB
import Testing

extension AlertsTestGroup {
    /// What the maintenance pass reads at least once a second (due escalations, timers and
    /// watches) searches the partial index of the active rows, whatever history the tables keep:
    /// with `ORDER BY id`, SQLite walked every alert, timer and watch ever kept, in id order,
    /// rather than sort the few active ones (issue 16, item 152).
    @Suite("alerts: the maintenance pass's reads", .timeLimit(.minutes(1)))
    struct MaintenanceQueryPlanTests {
        @Test func dueEscalationsTimersAndWatches_areSearchedAmongTheActiveRows_inIDOrder() async throws {
            let storage = try await TestStorage.fresh(.sqlite, service: "alerts")
            let store = try SQLiteAlertsStore(path: "\(storage.directory)/alerts.sqlite")
            let plans = try await store.database.write { db -> [String: [String]] in
                // A long history of ended ones: 300 of each, of person 7.
                for n in 0..<300 {
                    try db.execute(sql: "INSERT INTO help_alerts (initiator, message, location, state, raised_at_ms) VALUES (7, '', x'', 2, ?)", arguments: [n])
                    try db.execute(sql: "INSERT INTO timers (owner, note, state, started_ms, due_ms, warn_ms) VALUES (7, '', 2, ?, ?, ?)", arguments: [n, n, n])
                    try db.execute(sql: "INSERT INTO watch_sessions (initiator, note, state, started_at_ms, ends_at_ms) VALUES (7, '', 2, ?, ?)", arguments: [n, n])
                }
                return [
                    "escalations": try queryPlan(db, SQLiteAlertsStore.escalationsDueSQL, [1_000, AlertsV1.Answer.accepted.rawValue]),
                    "timers to warn": try queryPlan(db, "SELECT id FROM timers WHERE " + SQLiteAlertsStore.timersToWarn, [1_000, 1_000]),
                    "timers to fire": try queryPlan(db, "SELECT id FROM timers WHERE " + SQLiteAlertsStore.timersToFire, [1_000]),
                    "watches": try queryPlan(db, SQLiteAlertsStore.dueWatchesSQL, [1_000]),
                ]
            }
            let indexes = ["escalations": "help_one_active", "timers to warn": "timers_one_active", "timers to fire": "timers_one_active",
                           "watches": "watch_active_ends"]
            for (read, index) in indexes {
                let steps = plans[read] ?? []
                #expect(steps.contains { $0.contains("USING INDEX \(index)") }, "\(read): \(steps)")
                #expect(!steps.contains { $0.hasPrefix("SCAN") && !$0.contains("INDEX") }, "\(read) walks the whole table: \(steps)")
            }

            // Three active alerts, due, raised by people whose ids run the other way: the partial
            // index (on the initiator) holds them in the reverse order; the read still answers in id order.
            let ids = try await store.database.write { db -> [UInt64] in
                var ids: [UInt64] = []
                for initiator in [30, 20, 10] {
                    try db.execute(sql: "INSERT INTO help_alerts (initiator, message, location, state, raised_at_ms) VALUES (?, '', x'', 1, 5)", arguments: [initiator])
                    ids.append(UInt64(db.lastInsertedRowID))
                }
                return ids
            }
            #expect(try await store.escalationsDue(raisedBy: 10) == ids)
            #expect(try await store.escalationsDue(raisedBy: 4) == [], "raised after the cutoff: not due")
        }

        /// The hourly prune deletes what ended before the cutoff, reading only from the oldest id
        /// up to the first row made since (item 157): a row kept (pending, or changed since)
        /// stays; a row whose clock ran behind a newer id's waits for a later prune.
        @Test(arguments: Engine.allCases) func theHourlyPrune_deletesTheEndedRows_beforeTheFirstRecentOne(engine: Engine) async throws {
            try await TestStorage.withOpen(engine, given: nil, service: "alerts") { storage, opened in
                // id: (status, created, updated): 3 is delivered, 1 pending.
                let rows: [(Int, Int, Int, Int)] = [(1, 3, 10, 20), (2, 1, 20, 20), (3, 3, 30, 2_000), (4, 3, 900, 950), (5, 3, 1_500, 1_600), (6, 3, 800, 850)]
                let sent: [(String, Int)] = [("a", 10), ("b", 1_500), ("c", 800)]
                let insert = rows.map { id, status, created, updated in
                    "INSERT INTO outbox (id, dedupe_key, source, channel, recipient_user, address, body, status, created_at_ms, updated_at_ms, next_attempt_ms) "
                        + "VALUES (\(id), 'k\(id)', 's', 1, 2, '+15550100', 'b', \(status), \(created), \(updated), \(created));"
                }.joined() + sent.map { key, at in
                    "INSERT INTO sent_messages (idempotency_key, provider, channel, address, body, sent_at_ms) VALUES ('\(key)', 'recording', 1, '+15550100', 'b', \(at));"
                }.joined()
                let store: any AlertsStorage
                let left: () async throws -> [String]
                let listing = "SELECT 'outbox ' || id FROM outbox UNION ALL SELECT 'sent ' || idempotency_key FROM sent_messages ORDER BY 1"
                switch opened {
                case .sqlite(let directory):
                    let sqlite = try SQLiteAlertsStore(path: "\(directory)/alerts.sqlite")
                    try await sqlite.database.write { db in try db.execute(sql: insert) }
                    (store, left) = (sqlite, { try await sqlite.database.read { db in try String.fetchAll(db, sql: listing) } })
                case .postgres(let database):
                    store = try await PostgresAlertsStore.open(database, instance: "test")
                    _ = try await storage.psql(insert)
                    left = { try await storage.psql(listing).split(separator: "\n").map(String.init) }
                }
                #expect(try await store.pruneOutbox(before: 1_000) == 2)
                #expect(try await left() == ["outbox 2", "outbox 3", "outbox 5", "outbox 6", "sent b", "sent c"])
                #expect(try await store.pruneOutbox(before: 2_000) == 2)
                #expect(try await left() == ["outbox 2", "outbox 3"])
            }
        }

        @Test func onSQLite_thePrune_readsByRowid() async throws {
            let storage = try await TestStorage.fresh(.sqlite, service: "alerts")
            let store = try SQLiteAlertsStore(path: "\(storage.directory)/alerts.sqlite")
            let plans = try await store.database.read { db in
                try [SQLiteAlertsStore.pruneOutboxSQL, SQLiteAlertsStore.pruneSentSQL].map { sql in
                    try queryPlan(db, sql, [1_000])
                }
            }
            await storage.remove()
            for (table, steps) in zip(["outbox", "sent_messages"], plans) {
                // The delete searches below the bound; the bound's read walks in rowid order and stops at its first row.
                #expect(steps.first == "SEARCH \(table) USING INTEGER PRIMARY KEY (rowid<?)", "\(steps)")
                #expect(!steps.contains { $0.contains("TEMP B-TREE") }, "a sort: every row read: \(steps)")
            }
        }

        /// On PostgreSQL, on a generic plan (forced): the primary key's order, no sequential scan.
        @Test func onPostgreSQL_thePrune_readsByID_onAGenericPlan() async throws {
            try await TestStorage.withOpen(.postgres, given: nil, service: "alerts") { storage, opened in
                guard case .postgres(let database) = opened else { return }
                _ = try await PostgresAlertsStore.open(database, instance: "test")
                _ = try await storage.psql("""
                    INSERT INTO outbox (dedupe_key, source, channel, recipient_user, address, body, status, created_at_ms, updated_at_ms, next_attempt_ms)
                    SELECT 'k' || i, 's', 1, 2, '+15550100', 'b', 3, i, i, i FROM generate_series(1, 5000) i;
                    INSERT INTO sent_messages (idempotency_key, provider, channel, address, body, sent_at_ms)
                    SELECT 'k' || i, 'recording', 1, '+15550100', 'b', i FROM generate_series(1, 5000) i;
                    ANALYZE outbox, sent_messages;
                    """)
                let plan = try await storage.psql("""
                    SET plan_cache_mode = force_generic_plan;
                    PREPARE outbox AS \(PostgresAlertsStore.pruneOutbox(before: 100).sql); EXPLAIN EXECUTE outbox(100, 100);
                    PREPARE sent AS \(PostgresAlertsStore.pruneSent(before: 100).sql); EXPLAIN EXECUTE sent(100, 100);
                    """)
                #expect(plan.contains("Index Cond: (id < COALESCE") && plan.contains("Index Cond: (seq < COALESCE"), "\(plan)")
                #expect(!plan.contains("Seq Scan") && !plan.contains("Sort"), "\(plan)")
            }
        }
    }
}
