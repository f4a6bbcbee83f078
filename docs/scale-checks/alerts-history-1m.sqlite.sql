PRAGMA journal_mode=WAL;
CREATE TABLE help_alerts (id INTEGER PRIMARY KEY AUTOINCREMENT, initiator INTEGER NOT NULL, message TEXT NOT NULL, location BLOB NOT NULL, state INTEGER NOT NULL, raised_at_ms INTEGER NOT NULL, resolved_at_ms INTEGER NOT NULL DEFAULT 0, resolved_by TEXT NOT NULL DEFAULT '', idempotency_key TEXT NOT NULL DEFAULT '', escalated_at_ms INTEGER NOT NULL DEFAULT 0);
CREATE INDEX index_help_alerts_on_initiator ON help_alerts(initiator);
CREATE TABLE recipients (alert_id INTEGER NOT NULL REFERENCES help_alerts(id), position INTEGER NOT NULL, user_id INTEGER NOT NULL, phone TEXT NOT NULL, answer INTEGER NOT NULL, answered_at_ms INTEGER NOT NULL DEFAULT 0, dismissed BOOLEAN NOT NULL DEFAULT 0, PRIMARY KEY (alert_id, position));
CREATE INDEX index_recipients_on_user_id ON recipients(user_id);
CREATE TABLE emergency_prompts (id INTEGER PRIMARY KEY AUTOINCREMENT, alert_id INTEGER NOT NULL UNIQUE REFERENCES help_alerts(id), user_id INTEGER NOT NULL, number TEXT NOT NULL, label TEXT NOT NULL, created_at_ms INTEGER NOT NULL, reported BOOLEAN NOT NULL DEFAULT 0, dialed BOOLEAN NOT NULL DEFAULT 0, reported_at_ms INTEGER NOT NULL DEFAULT 0);
-- 1M alerts of 100,000 people (90 days), five recipients each (one in five by phone only), an emergency-call prompt each.
WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM n WHERE i < 1000000)
INSERT INTO help_alerts (initiator, message, location, state, raised_at_ms, resolved_at_ms) SELECT i % 100000, 'help', x'0a0b0c0d0e0f', 2, 1700000000000 + i*7776, 1700000000000 + i*7776 + 60000 FROM n;
WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i+1 FROM n WHERE i < 4999999)
INSERT INTO recipients (alert_id, position, user_id, phone, answer) SELECT 1 + i/5, i % 5, CASE WHEN i % 5 = 4 THEN 0 ELSE (i*7) % 100000 END, CASE WHEN i % 5 = 4 THEN '+44700000' || ((i*7) % 100000) ELSE '' END, 0 FROM n;
WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM n WHERE i < 1000000)
INSERT INTO emergency_prompts (alert_id, user_id, number, label, created_at_ms) SELECT i, i % 100000, '911', 'Emergency services', 1700000000000 + i*7776 FROM n;
