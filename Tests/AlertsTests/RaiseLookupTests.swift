@testable import Alerts
import Foundation
import FriensoTesting
import GRDB
import Testing

extension AlertsTestGroup {
    /// What a raise reads first (`alertMeetingRaise`: the alert raised with its key, else the
    /// active one) is two index searches, whatever the person raised before (issue 16, item 96):
    /// with only the index on `initiator`, it walked every alert of theirs.
    @Suite("alerts: a raise's first read", .timeLimit(.minutes(1)))
    struct RaiseLookupTests {
        @Test func aRaisesKeyAndTheActiveAlert_areFoundByIndexSearches_overALongHistory() async throws {
            let storage = try await TestStorage.fresh(.sqlite, service: "alerts")
            let store = try SQLiteAlertsStore(path: "\(storage.directory)/alerts.sqlite")
            let found = try await store.database.write { db in
                // 300 alerts of person 7, resolved, each raised with its key; one of person 8.
                for n in 0..<300 {
                    try db.execute(sql: """
                        INSERT INTO help_alerts (initiator, message, location, state, raised_at_ms, idempotency_key) VALUES (7, '', x'', 2, ?, ?)
                        """, arguments: [n, "k-\(n)"])
                }
                try db.execute(sql: "INSERT INTO help_alerts (initiator, message, location, state, raised_at_ms, idempotency_key) VALUES (8, '', x'', 1, 0, 'k-150')")
                let plan = { (sql: String) in try queryPlan(db, sql, [7, "k-150"]) }
                let byKey = try plan(SQLiteAlertsStore.raisedWithKey)
                let active = try queryPlan(db, SQLiteAlertsStore.activeOf, [7])
                let retry = try SQLiteAlertsStore.meetingRaise(db, by: 7, key: "k-150")
                let noneActive = try SQLiteAlertsStore.meetingRaise(db, by: 7, key: "k-new")
                try db.execute(sql: "INSERT INTO help_alerts (initiator, message, location, state, raised_at_ms, idempotency_key) VALUES (7, '', x'', 1, 999, 'k-active')")
                let activeID = db.lastInsertedRowID
                let newKey = try SQLiteAlertsStore.meetingRaise(db, by: 7, key: "k-new")
                let noKey = try SQLiteAlertsStore.meetingRaise(db, by: 7, key: "")
                let oldKey = try SQLiteAlertsStore.meetingRaise(db, by: 7, key: "k-3")
                return (byKey, active, retry, noneActive, activeID, newKey, noKey, oldKey)
            }
            let (byKey, active, retry, noneActive, activeID, newKey, noKey, oldKey) = found
            #expect(byKey.contains { $0.contains("INDEX help_alerts_by_key (initiator=? AND idempotency_key=?)") }, "\(byKey)")
            #expect(active.contains { $0.contains("USING INDEX help_one_active") }, "\(active)")
            // The same answers as the one query of before: the key's alert first (another
            // person's alert under the same key is not theirs), else the active one, else none.
            #expect(retry?.id == 151 && retry?.retry == true, "\(String(describing: retry))")
            #expect(noneActive == nil)
            #expect(newKey?.id == UInt64(activeID) && newKey?.retry == false)
            #expect(noKey?.id == UInt64(activeID) && noKey?.retry == false)
            #expect(oldKey?.id == 4 && oldKey?.retry == true, "a retry of an old raise is that raise, even with another active")
            withExtendedLifetime(storage) {} // its folder holds the database
        }
    }
}
