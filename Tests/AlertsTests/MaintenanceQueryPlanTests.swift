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
                let plan = { (sql: String, arguments: StatementArguments) in
                    try Row.fetchAll(db, sql: "EXPLAIN QUERY PLAN " + sql, arguments: arguments).map { $0["detail"] as String }
                }
                return [
                    "escalations": try plan(SQLiteAlertsStore.escalationsDueSQL, [1_000, AlertsV1.Answer.accepted.rawValue]),
                    "timers to warn": try plan("SELECT id FROM timers WHERE " + SQLiteAlertsStore.timersToWarn, [1_000, 1_000]),
                    "timers to fire": try plan("SELECT id FROM timers WHERE " + SQLiteAlertsStore.timersToFire, [1_000]),
                    "watches": try plan(SQLiteAlertsStore.dueWatchesSQL, [1_000]),
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
    }
}
