PRAGMA journal_mode=WAL;
CREATE TABLE place_events (id INTEGER PRIMARY KEY AUTOINCREMENT, viewer INTEGER NOT NULL, subject INTEGER NOT NULL, alert_id INTEGER NOT NULL, label TEXT NOT NULL, arrived INTEGER NOT NULL, at_ms INTEGER NOT NULL);
CREATE INDEX place_events_at ON place_events(at_ms);
-- A week at 400,000 place-alert events a day (2.8M; 100,000 people each with two alerts on a friend, arriving and leaving), one every 216 ms.
WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM n WHERE i < 2800000)
INSERT INTO place_events (viewer, subject, alert_id, label, arrived, at_ms)
SELECT i % 100000, (i * 7 + 1) % 100000, i % 200000, CASE WHEN i % 2 = 0 THEN 'Home' ELSE 'Library' END, i % 2, i * 216 FROM n;
