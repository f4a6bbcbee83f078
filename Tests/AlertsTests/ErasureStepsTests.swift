@testable import Alerts
import FriensoProto
import FriensoTesting
import GRDB
import Storage
import Testing

extension AlertsTestGroup {
    /// SQLite's erasure reads the outbox and `sent_messages` whole on a reader, then deletes in the
    /// write transaction with what only that transaction can see (issue 16, item 160). These
    /// change the tables between the two steps, as a raise or a delivery pass could.
    @Suite("alerts: erasure's two steps on SQLite", .timeLimit(.minutes(1)))
    struct ErasureStepsTests {
        /// Ana is user 1 (+15550101); Ben is user 2; everything else is a stranger's.
        static let rows = """
            INSERT INTO outbox (id, dedupe_key, source, channel, recipient_user, address, body, status, created_at_ms, updated_at_ms, next_attempt_ms, about_user) VALUES
              (1, 'k1', 'help_now:9', 1, 1, '+15550101', 'to Ana', 3, 1, 1, 1, 2),
              (2, 'k2', 'help_now:9', 1, 0, '+15550101', 'to her phone', 3, 1, 1, 1, 2),
              (3, 'k3', 'help_now:8', 1, 2, '+15550102', 'about Ana', 3, 1, 1, 1, 1),
              (4, 'k4', 'help_answer:8:1:1', 2, 2, 'bens-token', 'her answer', 3, 1, 1, 1, 0),
              (5, 'k5', 'help_now:8', 1, 3, '', 'to Cy, no phone yet', 1, 1, 1, 1, 2),
              (6, 'k6', 'help_now:8', 1, 2, '+15550102', 'a stranger''s', 3, 1, 1, 1, 2);
            INSERT INTO sent_messages (idempotency_key, provider, channel, address, body, sent_at_ms) VALUES
              ('frienso-delivery-1', 'recording', 1, '+15550101', 'to Ana', 1),
              ('other-provider-key', 'recording', 1, '+15550101', 'to her phone, its row pruned', 1),
              ('frienso-delivery-6', 'recording', 1, '+15550102', 'a stranger''s', 1);
            INSERT INTO help_alerts (id, initiator, message, location, state, raised_at_ms) VALUES (8, 2, '', x'', 2, 1), (10, 2, '', x'', 2, 1), (11, 3, '', x'', 2, 1);
            INSERT INTO recipients (alert_id, position, user_id, phone, answer) VALUES (8, 0, 0, '+15550101', 0), (8, 1, 3, '', 0);
            INSERT INTO emergency_prompts (alert_id, user_id, number, label, created_at_ms) VALUES (8, 1, '911', 'shown to Ana', 1), (10, 2, '911', 'Ben''s', 1);
            """

        func store() async throws -> SQLiteAlertsStore {
            let storage = try await TestStorage.fresh(.sqlite, service: "alerts")
            let store = try SQLiteAlertsStore(path: "\(storage.directory)/alerts.sqlite")
            try await store.database.write { db in try db.execute(sql: Self.rows) }
            return store
        }

        func left(_ store: SQLiteAlertsStore) async throws -> [String] {
            try await store.database.read { db in
                try String.fetchAll(db, sql: """
                    SELECT 'outbox ' || id FROM outbox UNION ALL SELECT 'sent ' || idempotency_key FROM sent_messages
                    UNION ALL SELECT 'recipient ' || alert_id || '/' || position FROM recipients UNION ALL SELECT 'prompt ' || alert_id FROM emergency_prompts ORDER BY 1
                    """)
            }
        }

        @Test func rowsMadeOrAddressedBetweenTheSteps_areErasedToo() async throws {
            let store = try await store()
            let found = try await store.database.read { db in try SQLiteAlertsStore.searchErased(db, user: 1, addresses: ["+15550101"]) }
            #expect(Set(found.deliveries) == [1, 2, 3, 4], "to her, to her phone, about her, her answer")
            #expect(found.unaddressed == [5])
            #expect(found.sent.rowids == [1, 2], "sent to her number")
            #expect(found.recipients.rowids == [1] && found.prompts.rowids == [1])
            let erased = try await store.database.write { db -> Int in
                // Between the steps: a raise queues one about her and one to her phone; a pass
                // gives Cy's row her number (Cy shares it) and records a send to it.
                try db.execute(sql: """
                    INSERT INTO outbox (id, dedupe_key, source, channel, recipient_user, address, body, status, created_at_ms, updated_at_ms, next_attempt_ms, about_user) VALUES
                      (7, 'k7', 'help_now:10', 1, 2, '+15550102', 'about Ana, later', 1, 2, 2, 2, 1),
                      (8, 'k8', 'help_now:11', 1, 0, '+15550101', 'to her phone, later', 1, 2, 2, 2, 2),
                      (9, 'k9', 'help_now:11', 1, 2, '+15550102', 'a stranger''s, later', 1, 2, 2, 2, 2);
                    UPDATE outbox SET address = '+15550101', status = 3 WHERE id = 5;
                    INSERT INTO sent_messages (idempotency_key, provider, channel, address, body, sent_at_ms) VALUES
                      ('frienso-delivery-5', 'recording', 1, '+15550101', 'to Cy, at her number', 2),
                      ('frienso-delivery-9', 'recording', 1, '+15550102', 'a stranger''s, later', 2);
                    INSERT INTO recipients (alert_id, position, user_id, phone, answer) VALUES (10, 0, 0, '+15550101', 0);
                    INSERT INTO emergency_prompts (alert_id, user_id, number, label, created_at_ms) VALUES (11, 1, '911', 'shown to Ana, later', 2);
                    """)
                return try SQLiteAlertsStore.erase(db, user: 1, addresses: ["+15550101"], traces: [], found: found)
            }
            #expect(try await left(store) == ["outbox 6", "outbox 9", "prompt 10", "recipient 8/1", "sent frienso-delivery-6", "sent frienso-delivery-9"])
            #expect(erased == 14, "7 deliveries, 3 sends, 2 recipients by phone, 2 prompts")
        }

        /// A send recorded after the snapshot may take a rowid at or below its last one once that
        /// row is gone (a rowid table gives the largest plus one): the write walks the table then.
        @Test func whenTheSnapshotsLastSendIsGone_theWriteSearchesEverySend() async throws {
            let store = try await store()
            let found = try await store.database.read { db in try SQLiteAlertsStore.searchErased(db, user: 1, addresses: ["+15550101"]) }
            #expect(found.sent.last?.identity == "frienso-delivery-6")
            try await store.database.write { db in
                try db.execute(sql: """
                    DELETE FROM sent_messages WHERE idempotency_key = 'frienso-delivery-6';
                    INSERT INTO sent_messages (idempotency_key, provider, channel, address, body, sent_at_ms) VALUES
                      ('late-key', 'recording', 1, '+15550101', 'to her phone, at the old last rowid', 2);
                    """)
                #expect(try Int64.fetchOne(db, sql: "SELECT rowid FROM sent_messages WHERE idempotency_key = 'late-key'") == found.sent.last?.rowid)
                _ = try SQLiteAlertsStore.erase(db, user: 1, addresses: ["+15550101"], traces: [], found: found)
            }
            #expect(try await left(store) == ["outbox 5", "outbox 6", "prompt 10", "recipient 8/1"])
        }

        /// Both walks happen on the reader; the write transaction's reads of the two tables are
        /// bounded by id, rowid or key, and the pending rows with no address are read from the
        /// partial index of the pending ones.
        @Test func theWriteTransactionsReads_areSearches() async throws {
            let store = try await store()
            let plans = try await store.database.read { db -> [String: [String]] in
                let plan = { (sql: String) in try queryPlan(db, sql, StatementArguments([1, "[]", "[]", "a", "b", 0])) }
                return [
                    "after the bound": try plan("SELECT id FROM outbox WHERE id > ?6 AND \(SQLiteAlertsStore.erasedDeliveryTerms)"),
                    "again by id": try plan("SELECT id FROM outbox WHERE id IN (SELECT value FROM json_each(?6)) AND \(SQLiteAlertsStore.erasedDeliveryTerms)"),
                    "unaddressed": try queryPlan(db, SQLiteAlertsStore.unaddressedSQL, [6]),
                    "sends after": try queryPlan(db, "SELECT idempotency_key FROM sent_messages WHERE rowid > ? AND address IN (SELECT value FROM json_each(?))", [1, "[]"]),
                    "delete sends": try queryPlan(db, "DELETE FROM sent_messages WHERE idempotency_key IN (SELECT value FROM json_each(?))", ["[]"]),
                    "recipients after": try queryPlan(db, "DELETE FROM recipients WHERE rowid > ? AND \(WalkedRows.Search.recipientsByPhone.condition)", [1, "[]"]),
                    "recipients by user": try queryPlan(db, "DELETE FROM recipients WHERE user_id = ?", [1]),
                    "prompts after": try queryPlan(db, "DELETE FROM emergency_prompts WHERE rowid > ? AND \(WalkedRows.Search.promptsOfUser.condition)", [1, 1]),
                ]
            }
            for (read, steps) in plans {
                #expect(!steps.contains { step in ["outbox", "sent_messages", "recipients", "emergency_prompts"].contains { step.hasPrefix("SCAN \($0)") } && !step.contains("USING INDEX") },
                        "\(read) walks its table: \(steps)")
            }
            #expect(plans["unaddressed"]?.contains { $0.contains("USING INDEX outbox_due") } == true, "\(plans["unaddressed"] ?? [])")
        }
    }
}
