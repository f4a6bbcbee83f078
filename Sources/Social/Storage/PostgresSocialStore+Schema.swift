import Storage

/// Social's tables on PostgreSQL: the SQLite schema's columns in PostgreSQL's types, and the
/// migrations that made them. Friendships, blocks and circle rows have an `id` (SQLite's rowid):
/// the graph snapshot pages by it.
extension PostgresSocialStore {
    static let migrations: [PostgresMigration] = PostgresReplyStore.migrations + [
        PostgresMigration("social_v1", [
            """
            CREATE TABLE friend_requests (
                id bigserial PRIMARY KEY,
                from_user bigint NOT NULL,
                to_user bigint NOT NULL,
                state bigint NOT NULL,
                dismissed boolean NOT NULL DEFAULT false,
                created_at_ms bigint NOT NULL,
                updated_at_ms bigint NOT NULL)
            """,
            "CREATE INDEX friend_requests_to ON friend_requests (to_user, state)",
            "CREATE INDEX friend_requests_from ON friend_requests (from_user, state)",
            // At most one pending request per ordered pair.
            "CREATE UNIQUE INDEX friend_requests_pending ON friend_requests (from_user, to_user) WHERE state = 1",
            // One canonical edge per pair: the smaller id first.
            """
            CREATE TABLE friendships (
                user_a bigint NOT NULL,
                user_b bigint NOT NULL,
                since_ms bigint NOT NULL,
                id bigint GENERATED ALWAYS AS IDENTITY UNIQUE,
                PRIMARY KEY (user_a, user_b),
                CHECK (user_a < user_b))
            """,
            "CREATE INDEX friendships_user_b ON friendships (user_b)",
            """
            CREATE TABLE blocks (
                blocker bigint NOT NULL,
                blocked bigint NOT NULL,
                created_at_ms bigint NOT NULL,
                id bigint GENERATED ALWAYS AS IDENTITY UNIQUE,
                PRIMARY KEY (blocker, blocked))
            """,
            "CREATE INDEX blocks_blocked ON blocks (blocked)",
            // member = 0 and phone set: an invitation to a non-user; member set and phone '': a user.
            """
            CREATE TABLE circle (
                owner bigint NOT NULL,
                member bigint NOT NULL,
                phone text NOT NULL,
                state bigint NOT NULL,
                added_at_ms bigint NOT NULL,
                updated_at_ms bigint NOT NULL,
                id bigint GENERATED ALWAYS AS IDENTITY UNIQUE,
                PRIMARY KEY (owner, member, phone))
            """,
            "CREATE INDEX circle_member ON circle (member, state)",
            """
            CREATE TABLE discovery (
                user_id bigint PRIMARY KEY,
                findable boolean NOT NULL,
                updated_at_ms bigint NOT NULL)
            """,
            // One side's "add" waiting for the other's.
            """
            CREATE TABLE exchange_intents (
                from_user bigint NOT NULL,
                to_user bigint NOT NULL,
                latitude double precision,
                longitude double precision,
                place_label text NOT NULL,
                created_at_ms bigint NOT NULL,
                PRIMARY KEY (from_user, to_user))
            """,
            """
            CREATE TABLE exchanges (
                id bigserial PRIMARY KEY,
                user_a bigint NOT NULL,
                user_b bigint NOT NULL,
                exchanged_at_ms bigint NOT NULL,
                latitude double precision,
                longitude double precision,
                place_label text NOT NULL,
                UNIQUE (user_a, user_b),
                CHECK (user_a < user_b))
            """,
            "CREATE INDEX exchanges_user_b ON exchanges (user_b)",
            """
            CREATE TABLE pokes (
                id bigserial PRIMARY KEY,
                from_user bigint NOT NULL,
                to_user bigint NOT NULL,
                created_at_ms bigint NOT NULL)
            """,
            "CREATE INDEX pokes_pair ON pokes (from_user, to_user, created_at_ms)",
            "CREATE INDEX pokes_to ON pokes (to_user)",
            """
            CREATE TABLE notices (
                id bigserial PRIMARY KEY,
                kind bigint NOT NULL,
                from_user bigint NOT NULL,
                to_user bigint NOT NULL,
                to_phone text NOT NULL,
                created_at_ms bigint NOT NULL)
            """,
        ]),
    ]

    /// Every table that holds people's rows (vacuumed after an erasure).
    static let tables = ["friend_requests", "friendships", "blocks", "circle", "discovery", "exchange_intents", "exchanges",
                         "pokes", "notices", "idempotent_replies"]
}
