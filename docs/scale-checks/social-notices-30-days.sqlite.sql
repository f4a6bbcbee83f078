PRAGMA journal_mode=WAL;
CREATE TABLE notices (id INTEGER PRIMARY KEY AUTOINCREMENT, kind INTEGER NOT NULL, from_user INTEGER NOT NULL, to_user INTEGER NOT NULL, to_phone TEXT NOT NULL, created_at_ms INTEGER NOT NULL);
-- 30 days at 33,333 notices a day (1M), one every 2,592 ms: pokes and circle requests, one in ten an invitation by phone.
WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM n WHERE i < 1000000)
INSERT INTO notices (kind, from_user, to_user, to_phone, created_at_ms)
SELECT 1 + i % 3, i % 100000, CASE WHEN i % 10 = 0 THEN 0 ELSE (i * 7) % 100000 END, CASE WHEN i % 10 = 0 THEN '+1562555' || (i % 10000) ELSE '' END, i * 2592 FROM n;
