PRAGMA journal_mode=WAL;
CREATE TABLE IF NOT EXISTS "outbox" ("id" INTEGER PRIMARY KEY AUTOINCREMENT, "dedupe_key" TEXT NOT NULL UNIQUE, "source" TEXT NOT NULL, "channel" INTEGER NOT NULL, "recipient_user" INTEGER NOT NULL, "address" TEXT NOT NULL, "body" TEXT NOT NULL, "status" INTEGER NOT NULL, "attempts" INTEGER NOT NULL DEFAULT 0, "last_error" TEXT NOT NULL DEFAULT '', "provider" TEXT NOT NULL DEFAULT '', "created_at_ms" INTEGER NOT NULL, "updated_at_ms" INTEGER NOT NULL, "next_attempt_ms" INTEGER NOT NULL, about_user INTEGER NOT NULL DEFAULT 0, reference TEXT NOT NULL DEFAULT '');
CREATE INDEX outbox_due ON outbox(next_attempt_ms) WHERE status = 1;
CREATE TABLE IF NOT EXISTS "sent_messages" ("idempotency_key" TEXT PRIMARY KEY NOT NULL, "provider" TEXT NOT NULL, "channel" INTEGER NOT NULL, "address" TEXT NOT NULL, "body" TEXT NOT NULL, "sent_at_ms" INTEGER NOT NULL);
CREATE TABLE delivery_attempts (delivery_id INTEGER NOT NULL REFERENCES outbox(id) ON DELETE CASCADE, attempt INTEGER NOT NULL, started_ms INTEGER NOT NULL, finished_ms INTEGER NOT NULL DEFAULT 0, provider TEXT NOT NULL, outcome INTEGER NOT NULL, reference TEXT NOT NULL DEFAULT '', error TEXT NOT NULL DEFAULT '', retry_after_ms INTEGER NOT NULL DEFAULT 0, PRIMARY KEY (delivery_id, attempt)) WITHOUT ROWID;
-- 90 days at 50,000 deliveries a day (4.5M), one a 1,728 ms; delivered (status 3) except every 1000th still pending.
WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM n WHERE i < 4500000)
INSERT INTO outbox (dedupe_key, source, channel, recipient_user, address, body, status, created_at_ms, updated_at_ms, next_attempt_ms, about_user)
SELECT 'k' || i, 'help:' || (i/5), 1 + i % 2, i % 100000, '+4470000' || (i % 100000), 'Alice needs help now: https://maps.example/?q=51.5,-0.1', CASE WHEN i % 1000 = 0 THEN 1 ELSE 3 END, 1700000000000 + i*1728, 1700000000000 + i*1728 + 500, 1700000000000 + i*1728, i % 100000 FROM n;
WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM n WHERE i < 4500000)
INSERT INTO sent_messages SELECT 'frienso-delivery-' || i, 'recording', 1, '+4470000' || (i % 100000), 'Alice needs help now', 1700000000000 + i*1728 + 400 FROM n;
