import Storage

/// Accounts' tables on PostgreSQL: the SQLite schema's columns in PostgreSQL's types, and the
/// migrations that made them (`PostgresServiceDatabase.migrate` applies what is missing).
extension PostgresAccountsStore {
    static let migrations: [PostgresMigration] = PostgresReplyStore.migrations + [
        PostgresMigration("accounts_v1", [
            """
            CREATE TABLE users (
                id bigserial PRIMARY KEY,
                username text COLLATE "C" NOT NULL,
                email text COLLATE "C" NOT NULL,
                phone text COLLATE "C" NOT NULL,
                password_hash text NOT NULL,
                first_name text NOT NULL,
                last_name text NOT NULL,
                profile_picture_media_id text NOT NULL DEFAULT '',
                created_at_ms bigint NOT NULL,
                phone_sha256 bytea,
                email_sha256 bytea,
                CONSTRAINT users_username_key UNIQUE (username),
                CONSTRAINT users_email_key UNIQUE (email),
                CONSTRAINT users_phone_key UNIQUE (phone))
            """,
            "CREATE INDEX users_phone_sha256 ON users (phone_sha256)",
            "CREATE INDEX users_email_sha256 ON users (email_sha256)",
            """
            CREATE TABLE sessions (
                id bigserial PRIMARY KEY,
                user_id bigint NOT NULL REFERENCES users (id) ON DELETE CASCADE,
                token_hash bytea NOT NULL UNIQUE,
                created_at_ms bigint NOT NULL,
                expires_at_ms bigint NOT NULL,
                revoked_at_ms bigint)
            """,
            "CREATE INDEX sessions_user_id ON sessions (user_id)",
            """
            CREATE TABLE external_ids (
                provider text NOT NULL,
                external_id text NOT NULL,
                user_id bigint NOT NULL REFERENCES users (id) ON DELETE CASCADE,
                linked_at_ms bigint NOT NULL,
                PRIMARY KEY (provider, external_id))
            """,
            "CREATE INDEX external_ids_user_id ON external_ids (user_id)",
            """
            CREATE TABLE login_events (
                id bigserial PRIMARY KEY,
                failed boolean NOT NULL,
                account text NOT NULL,
                client text NOT NULL,
                at double precision NOT NULL)
            """,
            "CREATE INDEX login_events_at ON login_events (at)",
            """
            CREATE TABLE erasures (
                user_id bigint NOT NULL,
                target text NOT NULL,
                pass bigint NOT NULL,
                due_ms bigint NOT NULL,
                attempts bigint NOT NULL DEFAULT 0,
                traces text NOT NULL,
                PRIMARY KEY (user_id, target))
            """,
            "CREATE INDEX erasures_due ON erasures (due_ms)",
            """
            CREATE TABLE email_outbox (
                id bigserial PRIMARY KEY,
                user_id bigint NOT NULL,
                address text NOT NULL,
                subject text NOT NULL,
                body text NOT NULL,
                status bigint NOT NULL,
                attempts bigint NOT NULL DEFAULT 0,
                last_error text NOT NULL DEFAULT '',
                provider text NOT NULL DEFAULT '',
                reference text NOT NULL DEFAULT '',
                created_ms bigint NOT NULL,
                next_attempt_ms bigint NOT NULL,
                expires_ms bigint NOT NULL,
                done_ms bigint NOT NULL DEFAULT 0)
            """,
            "CREATE INDEX email_outbox_due ON email_outbox (next_attempt_ms) WHERE status = 1",
            "CREATE INDEX email_outbox_user ON email_outbox (user_id)",
            """
            CREATE TABLE sent_emails (
                idempotency_key text PRIMARY KEY,
                provider text NOT NULL,
                address text NOT NULL,
                subject text NOT NULL,
                body text NOT NULL,
                sent_at_ms bigint NOT NULL)
            """,
            """
            CREATE TABLE password_resets (
                id bigserial PRIMARY KEY,
                user_id bigint NOT NULL REFERENCES users (id) ON DELETE CASCADE,
                code_hash bytea NOT NULL,
                created_ms bigint NOT NULL,
                expires_ms bigint NOT NULL,
                used_ms bigint NOT NULL DEFAULT 0,
                failures bigint NOT NULL DEFAULT 0)
            """,
            "CREATE INDEX password_resets_user ON password_resets (user_id, created_ms)",
            "CREATE TABLE reset_requests (client text NOT NULL, at_ms bigint NOT NULL)",
            "CREATE INDEX reset_requests_client ON reset_requests (client, at_ms)",
        ]),
        // Every login reads the outcomes of its account and its address (shared throttles).
        PostgresMigration("login_events_by_key", [
            "CREATE INDEX login_events_account ON login_events (account, id)",
            "CREATE INDEX login_events_client ON login_events (client, id) WHERE failed",
        ]),
        // The recording provider's copies are pruned by time (`pruneEmails`).
        PostgresMigration("email_retention", [
            "CREATE INDEX sent_emails_at ON sent_emails (sent_at_ms)",
        ]),
    ]
}
