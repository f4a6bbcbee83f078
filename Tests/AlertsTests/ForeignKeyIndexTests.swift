@testable import Alerts
import FriensoTesting
import Testing

extension AlertsTestGroup {
    /// Deleting an alert or a delivery (a person's erasure, the outbox's prune) finds the rows
    /// that name it by an index, on both engines: no table walked whole (issue 16, item 156).
    @Suite("alerts: foreign keys", .timeLimit(.minutes(1)))
    struct ForeignKeyIndexTests {
        @Test(arguments: Engine.allCases) func everyForeignKey_leadsAnIndex(engine: Engine) async throws {
            let (count, missing) = try await ForeignKeyIndexes.audit(engine, service: "alerts",
                                                                     sqlite: { try SQLiteAlertsStore(path: "\($0)/alerts.sqlite").database },
                                                                     postgres: { _ = try await PostgresAlertsStore.open($0, instance: "test") })
            #expect(count > 0, "no foreign key seen")
            #expect(missing.isEmpty, "walked whole when their parent row goes: \(missing)")
        }
    }
}
