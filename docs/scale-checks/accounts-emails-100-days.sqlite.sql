PRAGMA journal_mode=WAL;
CREATE TABLE email_outbox (id INTEGER PRIMARY KEY AUTOINCREMENT, user_id INTEGER NOT NULL, address TEXT NOT NULL, subject TEXT NOT NULL, body TEXT NOT NULL, status INTEGER NOT NULL, attempts INTEGER NOT NULL DEFAULT 0, last_error TEXT NOT NULL DEFAULT '', provider TEXT NOT NULL DEFAULT '', created_ms INTEGER NOT NULL, next_attempt_ms INTEGER NOT NULL, expires_ms INTEGER NOT NULL, done_ms INTEGER NOT NULL DEFAULT 0, reference TEXT NOT NULL DEFAULT '');
CREATE INDEX email_outbox_due ON email_outbox(next_attempt_ms) WHERE status = 1;
CREATE INDEX email_outbox_user ON email_outbox(user_id);
CREATE TABLE sent_emails (idempotency_key TEXT PRIMARY KEY, provider TEXT NOT NULL, address TEXT NOT NULL, subject TEXT NOT NULL, body TEXT NOT NULL, sent_at_ms INTEGER NOT NULL);
CREATE INDEX sent_emails_at ON sent_emails(sent_at_ms);
-- 100 days at 10,000 emails a day (1M), one every 8,640 ms, sent 2 s after; the recording provider's copies.
WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM n WHERE i < 1000000)
INSERT INTO email_outbox (user_id, address, subject, body, status, attempts, provider, created_ms, next_attempt_ms, expires_ms, done_ms)
SELECT i % 100000, 'user' || (i % 100000) || '@example.org', 'Your Frienso password reset code', '', 2, 1, 'recording', i*8640, i*8640, i*8640 + 1800000, i*8640 + 2000 FROM n;
WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM n WHERE i < 1000000)
INSERT INTO sent_emails SELECT 'frienso-email-' || i, 'recording', 'user' || (i % 100000) || '@example.org', 'Your Frienso password reset code', 'Your code is 123456. It works for 30 minutes.', i*8640 + 2000 FROM n;
