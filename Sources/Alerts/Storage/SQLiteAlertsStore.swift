import Foundation
import FriensoProto
import GRDB
import Storage
import Wire

/// Alerts' storage on SQLite (`alerts.sqlite` in the data folder), the embedded default. Each
/// change is one transaction on the single writer, so a `decide` closure sees the row as nothing
/// else can change it.
final class SQLiteAlertsStore: AlertsStorage {
    let database: ServiceDatabase
    let replies: any ReplyStore

    init(path: String) throws {
        database = try ServiceDatabase.open(path)
        var migrator = DatabaseMigrator()
        migrator.registerMigration("v1") { db in
            try db.create(table: "watch_sessions") { t in
                t.autoIncrementedPrimaryKey("id")
                t.column("initiator", .integer).notNull().indexed()
                t.column("note", .text).notNull()
                t.column("state", .integer).notNull()
                t.column("started_at_ms", .integer).notNull()
                t.column("ends_at_ms", .integer).notNull()
                t.column("ended_at_ms", .integer).notNull().defaults(to: 0)
                t.column("idempotency_key", .text).notNull().defaults(to: "")
            }
            // One active session per user, enforced by the database.
            try db.execute(sql: "CREATE UNIQUE INDEX watch_one_active ON watch_sessions(initiator) WHERE state = 1")
            try db.execute(sql: "CREATE INDEX watch_active_ends ON watch_sessions(ends_at_ms) WHERE state = 1")
            try db.create(table: "watchers") { t in
                t.column("session_id", .integer).notNull().references("watch_sessions")
                t.column("watcher", .integer).notNull().indexed()
                t.column("position", .integer).notNull()
                t.column("answer", .integer).notNull()
                t.column("answered_at_ms", .integer).notNull().defaults(to: 0)
                t.column("dismissed", .boolean).notNull().defaults(to: false)
                t.primaryKey(["session_id", "watcher"])
            }
            try db.create(table: "help_alerts") { t in
                t.autoIncrementedPrimaryKey("id")
                t.column("initiator", .integer).notNull().indexed()
                t.column("message", .text).notNull()
                t.column("location", .blob).notNull()  // AlertLocation, encoded
                t.column("state", .integer).notNull()
                t.column("raised_at_ms", .integer).notNull()
                t.column("resolved_at_ms", .integer).notNull().defaults(to: 0)
                t.column("resolved_by", .text).notNull().defaults(to: "")
                t.column("idempotency_key", .text).notNull().defaults(to: "")
            }
            try db.execute(sql: "CREATE UNIQUE INDEX help_one_active ON help_alerts(initiator) WHERE state = 1")
            try db.create(table: "recipients") { t in
                t.column("alert_id", .integer).notNull().references("help_alerts")
                t.column("position", .integer).notNull()
                t.column("user_id", .integer).notNull().indexed()
                t.column("phone", .text).notNull()
                t.column("answer", .integer).notNull()
                t.column("answered_at_ms", .integer).notNull().defaults(to: 0)
                t.column("dismissed", .boolean).notNull().defaults(to: false)
                t.primaryKey(["alert_id", "position"])
            }
            try db.create(table: "emergency_prompts") { t in
                t.autoIncrementedPrimaryKey("id")
                t.column("alert_id", .integer).notNull().unique().references("help_alerts")
                t.column("user_id", .integer).notNull()
                t.column("number", .text).notNull()
                t.column("label", .text).notNull()
                t.column("created_at_ms", .integer).notNull()
                t.column("reported", .boolean).notNull().defaults(to: false)
                t.column("dialed", .boolean).notNull().defaults(to: false)
                t.column("reported_at_ms", .integer).notNull().defaults(to: 0)
            }
            try db.create(table: "grants") { t in
                t.column("subject", .integer).notNull()
                t.column("viewer", .integer).notNull()
                t.column("reason", .text).notNull()
                t.column("expires_ms", .integer).notNull()
                t.primaryKey(["subject", "viewer", "reason"])
            }
            try db.create(table: "devices") { t in
                t.primaryKey("token", .text)
                t.column("user_id", .integer).notNull().indexed()
                t.column("platform", .integer).notNull()
                t.column("app_version", .text).notNull()
                t.column("registered_at_ms", .integer).notNull()
            }
            try db.create(table: "outbox") { t in
                t.autoIncrementedPrimaryKey("id")
                t.column("dedupe_key", .text).notNull().unique()
                t.column("source", .text).notNull()
                t.column("channel", .integer).notNull()
                t.column("recipient_user", .integer).notNull()
                t.column("address", .text).notNull()
                t.column("body", .text).notNull()
                t.column("status", .integer).notNull()
                t.column("attempts", .integer).notNull().defaults(to: 0)
                t.column("last_error", .text).notNull().defaults(to: "")
                t.column("provider", .text).notNull().defaults(to: "")
                t.column("created_at_ms", .integer).notNull()
                t.column("updated_at_ms", .integer).notNull()
                t.column("next_attempt_ms", .integer).notNull()
            }
            try db.execute(sql: "CREATE INDEX outbox_due ON outbox(next_attempt_ms) WHERE status = 1")
            try db.execute(sql: "CREATE INDEX outbox_source ON outbox(source)")
            // What the built-in providers sent: one row per provider idempotency key, so a delivery
            // retried after a crash between sending and marking it is not sent twice.
            try db.create(table: "sent_messages") { t in
                t.primaryKey("idempotency_key", .text)
                t.column("provider", .text).notNull()
                t.column("channel", .integer).notNull()
                t.column("address", .text).notNull()
                t.column("body", .text).notNull()
                t.column("sent_at_ms", .integer).notNull()
            }
            try db.create(table: "resources") { t in
                t.column("campus", .text).notNull()
                t.column("position", .integer).notNull()
                t.column("title", .text).notNull()
                t.column("detail", .text).notNull()
                t.column("phone", .text).notNull()
                t.column("url", .text).notNull()
                t.primaryKey(["campus", "position"])
            }
            // coreFriend requests the member hid from their inbox (the request itself is social's).
            try db.create(table: "dismissed_circle_requests") { t in
                t.column("member", .integer).notNull()
                t.column("owner", .integer).notNull()
                t.column("requested_at_ms", .integer).notNull()
                t.primaryKey(["member", "owner", "requested_at_ms"])
            }
            try db.create(table: "cursors") { t in
                t.primaryKey("name", .text)
                t.column("value", .integer).notNull()
            }
        }
        SQLiteReplyStore.migrate(&migrator)
        // Whose each message is, so erasing a deleted account finds the messages about them
        // (rows from before this migration are found by their source instead).
        migrator.registerMigration("outbox_about") { db in
            try db.execute(sql: "ALTER TABLE outbox ADD COLUMN about_user INTEGER NOT NULL DEFAULT 0")
            try db.execute(sql: "CREATE INDEX outbox_about ON outbox(about_user) WHERE about_user != 0")
            try db.execute(sql: "CREATE INDEX outbox_recipient ON outbox(recipient_user) WHERE recipient_user != 0")
        }
        Self.migrateTimers(&migrator)
        Self.migrateEscalation(&migrator)
        Self.migrateAttempts(&migrator)
        // Each grant's place in the order of changes (see `GrantRecord.version`).
        migrator.registerMigration("grant_versions") { db in
            try db.execute(sql: "ALTER TABLE grants ADD COLUMN version INTEGER NOT NULL DEFAULT 0")
        }
        // An alert's deliveries are found by `dedupe_key`, which starts with the source
        // (`summaries(_:source:)`); the index on `source` only cost writes.
        if !Self.keepsSourceIndex {
            migrator.registerMigration("outbox_source_index_dropped") { db in
                try db.execute(sql: "DROP INDEX IF EXISTS outbox_source")
            }
        }
        // No query could use these: a partial index (`WHERE about_user != 0`) serves a query only
        // when its terms imply that condition, and `about_user = ?` does not (SQLite does not look
        // at the bound value). Export and erasure read the outbox whole, as they did with them; the
        // operator's listing walks ids down. Each cost a page write in every commit that queued a
        // message (issue 16, `docs/benchmarks.md` item 78).
        if !Self.keepsUserIndexes {
            migrator.registerMigration("outbox_user_indexes_dropped") { db in
                try db.execute(sql: "DROP INDEX IF EXISTS outbox_about")
                try db.execute(sql: "DROP INDEX IF EXISTS outbox_recipient")
            }
        }
        // A raise looks its key up by the initiator and the key (`alertMeetingRaise`): with only
        // the index on `initiator`, that read walked every alert the person ever raised
        // (`docs/benchmarks.md`, issue 16, item 96).
        migrator.registerMigration("help_alerts_by_key") { db in
            try db.execute(sql: "CREATE INDEX help_alerts_by_key ON help_alerts(initiator, idempotency_key)")
        }
        try database.migrate(migrator)
        replies = SQLiteReplyStore(database: database)
    }

    /// `FRIENSO_OUTBOX_SOURCE_INDEX=keep`: a new database keeps the index on `outbox.source`, as
    /// before issue 16's item 77 (for A/B runs of `frienso-bench`, each on new databases; a later
    /// start without it drops the index).
    static let keepsSourceIndex = ProcessInfo.processInfo.environment["FRIENSO_OUTBOX_SOURCE_INDEX"] == "keep"

    /// `FRIENSO_OUTBOX_USER_INDEXES=keep`: a new database keeps `outbox_about` and
    /// `outbox_recipient`, as before item 78 (A/B runs only, like `keepsSourceIndex`).
    static let keepsUserIndexes = ProcessInfo.processInfo.environment["FRIENSO_OUTBOX_USER_INDEXES"] == "keep"

    static func migrateTimers(_ migrator: inout DatabaseMigrator) {
        migrator.registerMigration("timers") { db in
            try db.execute(sql: """
                CREATE TABLE timers (
                    id INTEGER PRIMARY KEY AUTOINCREMENT, owner INTEGER NOT NULL, note TEXT NOT NULL, state INTEGER NOT NULL,
                    started_ms INTEGER NOT NULL, due_ms INTEGER NOT NULL, warn_ms INTEGER NOT NULL, warned_ms INTEGER NOT NULL DEFAULT 0,
                    ended_ms INTEGER NOT NULL DEFAULT 0, alert_id INTEGER NOT NULL DEFAULT 0, pin_hash BLOB, failures INTEGER NOT NULL DEFAULT 0,
                    idempotency_key TEXT NOT NULL DEFAULT ''
                );
                CREATE UNIQUE INDEX timers_one_active ON timers(owner) WHERE state = 1;
                CREATE INDEX timers_by_owner ON timers(owner, id);
                """)
        }
    }

    static func migrateEscalation(_ migrator: inout DatabaseMigrator) {
        migrator.registerMigration("escalation") { db in
            try db.execute(sql: """
                ALTER TABLE help_alerts ADD COLUMN escalated_at_ms INTEGER NOT NULL DEFAULT 0;
                CREATE TABLE escalations (
                    alert_id INTEGER PRIMARY KEY REFERENCES help_alerts(id), number TEXT NOT NULL, label TEXT NOT NULL, location BLOB NOT NULL,
                    created_at_ms INTEGER NOT NULL, resent_to INTEGER NOT NULL
                );
                """)
        }
    }

    /// The provider's message id (`reference`) on each delivery, and every attempt to hand one
    /// over: when, to which provider, and what it answered (its id, or its error and Retry-After).
    static func migrateAttempts(_ migrator: inout DatabaseMigrator) {
        migrator.registerMigration("delivery_attempts") { db in
            try db.execute(sql: """
                ALTER TABLE outbox ADD COLUMN reference TEXT NOT NULL DEFAULT '';
                CREATE TABLE delivery_attempts (
                    delivery_id INTEGER NOT NULL REFERENCES outbox(id) ON DELETE CASCADE,
                    attempt INTEGER NOT NULL,
                    started_ms INTEGER NOT NULL,
                    finished_ms INTEGER NOT NULL DEFAULT 0,
                    provider TEXT NOT NULL,
                    outcome INTEGER NOT NULL,
                    reference TEXT NOT NULL DEFAULT '',
                    error TEXT NOT NULL DEFAULT '',
                    retry_after_ms INTEGER NOT NULL DEFAULT 0,
                    PRIMARY KEY (delivery_id, attempt)
                ) WITHOUT ROWID;
                CREATE INDEX delivery_attempts_sending ON delivery_attempts(delivery_id) WHERE outcome = 1;
                """)
        }
    }
}

