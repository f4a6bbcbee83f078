import Foundation
import FriensoProto
import Logging
import PostgresNIO
import Storage
import Wire

/// Alerts' storage on PostgreSQL: the `alerts` schema of the deployment's database. The same
/// tables as the SQLite store, in PostgreSQL's types, and the same behaviour (the alerts tests run
/// on both engines).
///
/// SQLite runs one change at a time; PostgreSQL runs them at once, and several alerts instances
/// may share the schema, so:
/// - a change decided from a row (`changeWatch`, `changeAlert`, `changeTimer`) first locks that
///   row (`SELECT … FOR UPDATE`): two answers, a resolve and an escalation, or two instances'
///   maintenance passes expiring one watch, take turns, and the second sees what the first did;
/// - one active watch, alert and timer per person is a unique index, as on SQLite;
/// - a delivery pass takes its rows with `FOR UPDATE SKIP LOCKED` and marks them claimed by its
///   instance until `claimUntil`: another instance's pass takes other rows, so no message is
///   handed to a provider twice by two instances. Rows of a pass that died are taken again once
///   its claim ran out, or at once by the same instance when it restarts (`instance`).
final class PostgresAlertsStore: AlertsStorage {
    let database: PostgresServiceDatabase
    let replies: any ReplyStore
    /// This instance's name in outbox claims.
    let instance: String
    var logger: Logger { database.logger }

    private init(database: PostgresServiceDatabase, instance: String) {
        self.database = database
        self.instance = instance
        replies = PostgresReplyStore(database: database)
    }

    /// Runs alerts' migrations on `database` (its schema must be `alerts`).
    /// - Parameter instance: this instance's name, the same across its restarts ("1", "2"…).
    static func open(_ database: PostgresServiceDatabase, instance: String) async throws -> PostgresAlertsStore {
        try await database.migrate(migrations)
        return PostgresAlertsStore(database: database, instance: instance)
    }

    /// A stored enum value as the generated enums take it.
    static func raw(_ value: Int64) -> Int32 { Int32(truncatingIfNeeded: value) }

    /// Whether `error` is the unique index of one active watch, alert or timer per person.
    static func isSecondActive(_ error: any Error) -> Bool {
        PostgresServiceDatabase.sqlState(error) == "23505"
            && ["watch_one_active", "help_one_active", "timers_one_active"].contains(PostgresServiceDatabase.constraint(error) ?? "")
    }

    static let tables = [
        "watch_sessions", "watchers", "help_alerts", "recipients", "emergency_prompts", "escalations", "grants", "devices", "outbox",
        "delivery_attempts", "sent_messages", "resources", "dismissed_circle_requests", "cursors", "timers", "idempotent_replies",
    ]

    static let migrations: [PostgresMigration] = PostgresReplyStore.migrations + [
        PostgresMigration("alerts_v1", [
            """
            CREATE TABLE watch_sessions (
                id bigserial PRIMARY KEY,
                initiator bigint NOT NULL,
                note text NOT NULL,
                state bigint NOT NULL,
                started_at_ms bigint NOT NULL,
                ends_at_ms bigint NOT NULL,
                ended_at_ms bigint NOT NULL DEFAULT 0,
                idempotency_key text NOT NULL DEFAULT '')
            """,
            "CREATE INDEX watch_sessions_initiator ON watch_sessions (initiator, id)",
            // One active session per user, enforced by the database.
            "CREATE UNIQUE INDEX watch_one_active ON watch_sessions (initiator) WHERE state = 1",
            "CREATE INDEX watch_active_ends ON watch_sessions (ends_at_ms) WHERE state = 1",
            """
            CREATE TABLE watchers (
                session_id bigint NOT NULL REFERENCES watch_sessions (id),
                watcher bigint NOT NULL,
                position bigint NOT NULL,
                answer bigint NOT NULL,
                answered_at_ms bigint NOT NULL DEFAULT 0,
                dismissed boolean NOT NULL DEFAULT false,
                PRIMARY KEY (session_id, watcher))
            """,
            "CREATE INDEX watchers_watcher ON watchers (watcher)",
            """
            CREATE TABLE help_alerts (
                id bigserial PRIMARY KEY,
                initiator bigint NOT NULL,
                message text NOT NULL,
                location bytea NOT NULL,
                state bigint NOT NULL,
                raised_at_ms bigint NOT NULL,
                resolved_at_ms bigint NOT NULL DEFAULT 0,
                resolved_by text NOT NULL DEFAULT '',
                idempotency_key text NOT NULL DEFAULT '',
                escalated_at_ms bigint NOT NULL DEFAULT 0)
            """,
            "CREATE INDEX help_alerts_initiator ON help_alerts (initiator, id)",
            "CREATE UNIQUE INDEX help_one_active ON help_alerts (initiator) WHERE state = 1",
            """
            CREATE TABLE recipients (
                alert_id bigint NOT NULL REFERENCES help_alerts (id),
                position bigint NOT NULL,
                user_id bigint NOT NULL,
                phone text NOT NULL,
                answer bigint NOT NULL,
                answered_at_ms bigint NOT NULL DEFAULT 0,
                dismissed boolean NOT NULL DEFAULT false,
                PRIMARY KEY (alert_id, position))
            """,
            "CREATE INDEX recipients_user ON recipients (user_id)",
            """
            CREATE TABLE emergency_prompts (
                id bigserial PRIMARY KEY,
                alert_id bigint NOT NULL UNIQUE REFERENCES help_alerts (id),
                user_id bigint NOT NULL,
                number text NOT NULL,
                label text NOT NULL,
                created_at_ms bigint NOT NULL,
                reported boolean NOT NULL DEFAULT false,
                dialed boolean NOT NULL DEFAULT false,
                reported_at_ms bigint NOT NULL DEFAULT 0)
            """,
            """
            CREATE TABLE escalations (
                alert_id bigint PRIMARY KEY REFERENCES help_alerts (id),
                number text NOT NULL,
                label text NOT NULL,
                location bytea NOT NULL,
                created_at_ms bigint NOT NULL,
                resent_to bigint NOT NULL)
            """,
            """
            CREATE TABLE grants (
                subject bigint NOT NULL,
                viewer bigint NOT NULL,
                reason text NOT NULL,
                expires_ms bigint NOT NULL,
                PRIMARY KEY (subject, viewer, reason))
            """,
            """
            CREATE TABLE devices (
                token text PRIMARY KEY,
                user_id bigint NOT NULL,
                platform bigint NOT NULL,
                app_version text NOT NULL,
                registered_at_ms bigint NOT NULL)
            """,
            "CREATE INDEX devices_user ON devices (user_id)",
            // claimed_by, claimed_until_ms: which instance's delivery pass holds the row, and until when.
            """
            CREATE TABLE outbox (
                id bigserial PRIMARY KEY,
                dedupe_key text NOT NULL UNIQUE,
                source text NOT NULL,
                channel bigint NOT NULL,
                recipient_user bigint NOT NULL,
                address text NOT NULL,
                body text NOT NULL,
                status bigint NOT NULL,
                attempts bigint NOT NULL DEFAULT 0,
                last_error text NOT NULL DEFAULT '',
                provider text NOT NULL DEFAULT '',
                created_at_ms bigint NOT NULL,
                updated_at_ms bigint NOT NULL,
                next_attempt_ms bigint NOT NULL,
                about_user bigint NOT NULL DEFAULT 0,
                reference text NOT NULL DEFAULT '',
                claimed_by text NOT NULL DEFAULT '',
                claimed_until_ms bigint NOT NULL DEFAULT 0)
            """,
            "CREATE INDEX outbox_due ON outbox (next_attempt_ms) WHERE status = 1",
            "CREATE INDEX outbox_source ON outbox (source)",
            "CREATE INDEX outbox_about ON outbox (about_user) WHERE about_user != 0",
            "CREATE INDEX outbox_recipient ON outbox (recipient_user) WHERE recipient_user != 0",
            """
            CREATE TABLE delivery_attempts (
                delivery_id bigint NOT NULL REFERENCES outbox (id) ON DELETE CASCADE,
                attempt bigint NOT NULL,
                started_ms bigint NOT NULL,
                finished_ms bigint NOT NULL DEFAULT 0,
                provider text NOT NULL,
                outcome bigint NOT NULL,
                reference text NOT NULL DEFAULT '',
                error text NOT NULL DEFAULT '',
                retry_after_ms bigint NOT NULL DEFAULT 0,
                PRIMARY KEY (delivery_id, attempt))
            """,
            "CREATE INDEX delivery_attempts_sending ON delivery_attempts (delivery_id) WHERE outcome = 1",
            // What the built-in providers sent: one row per provider idempotency key, so a delivery
            // retried after a crash between sending and marking it is not sent twice.
            """
            CREATE TABLE sent_messages (
                idempotency_key text PRIMARY KEY,
                provider text NOT NULL,
                channel bigint NOT NULL,
                address text NOT NULL,
                body text NOT NULL,
                sent_at_ms bigint NOT NULL,
                seq bigint GENERATED ALWAYS AS IDENTITY UNIQUE)
            """,
            """
            CREATE TABLE resources (
                campus text NOT NULL,
                position bigint NOT NULL,
                title text NOT NULL,
                detail text NOT NULL,
                phone text NOT NULL,
                url text NOT NULL,
                PRIMARY KEY (campus, position))
            """,
            """
            CREATE TABLE dismissed_circle_requests (
                member bigint NOT NULL,
                owner bigint NOT NULL,
                requested_at_ms bigint NOT NULL,
                PRIMARY KEY (member, owner, requested_at_ms))
            """,
            "CREATE TABLE cursors (name text PRIMARY KEY, value bigint NOT NULL)",
            """
            CREATE TABLE timers (
                id bigserial PRIMARY KEY,
                owner bigint NOT NULL,
                note text NOT NULL,
                state bigint NOT NULL,
                started_ms bigint NOT NULL,
                due_ms bigint NOT NULL,
                warn_ms bigint NOT NULL,
                warned_ms bigint NOT NULL DEFAULT 0,
                ended_ms bigint NOT NULL DEFAULT 0,
                alert_id bigint NOT NULL DEFAULT 0,
                pin_hash bytea,
                failures bigint NOT NULL DEFAULT 0,
                idempotency_key text NOT NULL DEFAULT '')
            """,
            "CREATE UNIQUE INDEX timers_one_active ON timers (owner) WHERE state = 1",
            "CREATE INDEX timers_by_owner ON timers (owner, id)",
            "CREATE INDEX timers_active_due ON timers (due_ms) WHERE state = 1",
        ]),
        // Each grant's place in the order of changes (see `GrantRecord.version`).
        PostgresMigration("alerts_grant_versions", [
            "ALTER TABLE grants ADD COLUMN version bigint NOT NULL DEFAULT 0",
            "CREATE SEQUENCE grant_versions",
        ]),
        // A raise's key found by an index search, not a walk over the person's alerts (item 96).
        PostgresMigration("alerts_help_by_key", [
            "CREATE INDEX help_alerts_by_key ON help_alerts (initiator, idempotency_key)",
        ]),
    ]
}
