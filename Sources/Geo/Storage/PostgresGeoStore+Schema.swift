import Storage

/// Geo's tables on PostgreSQL (schema `geo`), one migration per change.
extension PostgresGeoStore {
    static let tables = ["latest", "history", "geo_meta", "sharing", "grants", "places", "check_ins", "precision", "audit", "share_links",
                         "zones", "place_alerts", "place_alert_access", "place_events", "idempotent_replies"]

    static let migrations: [PostgresMigration] = PostgresReplyStore.migrations + [
        PostgresMigration("geo_v1", [
            """
            CREATE TABLE latest (user_id bigint PRIMARY KEY, lat double precision NOT NULL, lon double precision NOT NULL,
                                 accuracy double precision NOT NULL, device_ms bigint NOT NULL, received_ms bigint NOT NULL,
                                 status text NOT NULL DEFAULT '', history_id bigint NOT NULL DEFAULT 0)
            """,
            """
            CREATE TABLE history (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, user_id bigint NOT NULL,
                                  lat double precision NOT NULL, lon double precision NOT NULL, accuracy double precision NOT NULL,
                                  device_ms bigint NOT NULL, received_ms bigint NOT NULL,
                                  status text, -- NULL: unchanged
                                  unrecorded boolean NOT NULL DEFAULT false, -- inside a private zone keeping none: deleted once folded
                                  writer bigint NOT NULL DEFAULT 0) -- the instance
            """,
            "CREATE INDEX history_user ON history (user_id, id)",
            "CREATE INDEX history_received ON history (received_ms)",
            "CREATE INDEX history_unrecorded ON history (id) WHERE unrecorded",
            "CREATE TABLE geo_meta (key text COLLATE \"C\" PRIMARY KEY, value bigint NOT NULL)",
            "INSERT INTO geo_meta (key, value) VALUES ('folded_through', 0)",
            """
            CREATE TABLE sharing (user_id bigint PRIMARY KEY, share_with_friends boolean NOT NULL, ghost boolean NOT NULL,
                                  proximity_alerts boolean NOT NULL, proximity_m double precision NOT NULL)
            """,
            """
            CREATE TABLE grants (subject bigint NOT NULL, viewer bigint NOT NULL, reason text COLLATE "C" NOT NULL, expires_ms bigint NOT NULL,
                                 PRIMARY KEY (subject, viewer, reason))
            """,
            "CREATE INDEX grants_viewer ON grants (viewer)",
            """
            CREATE TABLE places (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, name text NOT NULL, kind bigint NOT NULL,
                                 lat double precision NOT NULL, lon double precision NOT NULL, radius_m double precision NOT NULL,
                                 ring text NOT NULL) -- JSON [[lat, lon], ...]; '[]' for a point
            """,
            """
            CREATE TABLE check_ins (user_id bigint PRIMARY KEY, place_name text NOT NULL, lat double precision NOT NULL,
                                    lon double precision NOT NULL, media_id text NOT NULL, created_ms bigint NOT NULL, expires_ms bigint NOT NULL)
            """,
            "CREATE TABLE precision (subject bigint NOT NULL, viewer bigint NOT NULL, level bigint NOT NULL, PRIMARY KEY (subject, viewer))",
            "CREATE INDEX precision_viewer ON precision (viewer)",
            """
            CREATE TABLE audit (subject bigint NOT NULL, viewer bigint NOT NULL, hour bigint NOT NULL, kind bigint NOT NULL,
                                link bigint NOT NULL, count bigint NOT NULL, PRIMARY KEY (subject, hour, viewer, kind, link))
            """,
            "CREATE INDEX audit_viewer ON audit (viewer)",
            "CREATE INDEX audit_hour ON audit (hour)",
            """
            CREATE TABLE share_links (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, owner bigint NOT NULL, token_hash bytea NOT NULL UNIQUE,
                                      label text NOT NULL, created_ms bigint NOT NULL, expires_ms bigint NOT NULL,
                                      revoked_ms bigint NOT NULL DEFAULT 0, views bigint NOT NULL DEFAULT 0)
            """,
            "CREATE INDEX share_links_owner ON share_links (owner, id)",
            """
            CREATE TABLE zones (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, user_id bigint NOT NULL, label text NOT NULL,
                                lat double precision NOT NULL, lon double precision NOT NULL, radius_m double precision NOT NULL,
                                privacy bigint NOT NULL, keep_history boolean NOT NULL,
                                shift_north double precision NOT NULL DEFAULT 0, shift_east double precision NOT NULL DEFAULT 0)
            """,
            "CREATE INDEX zones_user ON zones (user_id)",
            """
            CREATE TABLE place_alerts (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, viewer bigint NOT NULL, subject bigint NOT NULL,
                                       zone_id bigint NOT NULL, place_id bigint NOT NULL, on_arrive boolean NOT NULL, on_leave boolean NOT NULL,
                                       created_ms bigint NOT NULL)
            """,
            "CREATE INDEX place_alerts_subject ON place_alerts (subject)",
            "CREATE INDEX place_alerts_viewer ON place_alerts (viewer)",
            "CREATE TABLE place_alert_access (subject bigint NOT NULL, viewer bigint NOT NULL, PRIMARY KEY (subject, viewer))",
            "CREATE INDEX place_alert_access_viewer ON place_alert_access (viewer)",
            """
            CREATE TABLE place_events (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, viewer bigint NOT NULL, subject bigint NOT NULL,
                                       alert_id bigint NOT NULL, label text NOT NULL, arrived boolean NOT NULL, at_ms bigint NOT NULL)
            """,
            "CREATE INDEX place_events_at ON place_events (at_ms)",
        ]),
        // Revocations are kept as rows with their version (`StoredGrant`).
        PostgresMigration("geo_grant_versions", ["ALTER TABLE grants ADD COLUMN version bigint NOT NULL DEFAULT 0"]),
    ]
}
