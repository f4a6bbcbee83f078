PRAGMA journal_mode=WAL;
CREATE TABLE blobs (sha256 TEXT PRIMARY KEY, size INTEGER NOT NULL, refs INTEGER NOT NULL) STRICT;
CREATE TABLE media (
    id TEXT PRIMARY KEY, owner INTEGER NOT NULL, purpose INTEGER NOT NULL, place_id INTEGER NOT NULL,
    type INTEGER NOT NULL, size INTEGER NOT NULL, width INTEGER NOT NULL, height INTEGER NOT NULL,
    sha256 TEXT NOT NULL REFERENCES blobs(sha256), created_ms INTEGER NOT NULL, attached INTEGER NOT NULL DEFAULT 0
) STRICT;
CREATE INDEX media_by_place ON media(place_id, created_ms DESC, id DESC) WHERE purpose = 3;
CREATE INDEX media_by_owner ON media(owner, created_ms DESC, id DESC);
CREATE TABLE profile_pictures (user INTEGER PRIMARY KEY, media_id TEXT NOT NULL) STRICT;
CREATE TABLE check_in_photos (user INTEGER PRIMARY KEY, media_id TEXT NOT NULL) STRICT;
CREATE TABLE uploads (
    id TEXT PRIMARY KEY, owner INTEGER NOT NULL, purpose INTEGER NOT NULL, place_id INTEGER NOT NULL,
    size INTEGER NOT NULL, created_ms INTEGER NOT NULL, expires_ms INTEGER NOT NULL, media_id TEXT,
    location_removed INTEGER NOT NULL DEFAULT 0, deduplicated INTEGER NOT NULL DEFAULT 0, replaced TEXT NOT NULL DEFAULT ''
) STRICT;
CREATE INDEX uploads_by_owner ON uploads(owner, created_ms);
WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM n WHERE i < 1000000)
INSERT INTO blobs SELECT printf('%064x', i*2), 100000, 1 FROM n;
WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM n WHERE i < 1000000)
INSERT INTO blobs SELECT printf('%064x', i*2+1), 100000, 1 FROM n;
WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM n WHERE i < 1000000)
INSERT INTO media SELECT printf('p%031x', i), i, 1, 0, 1, 100000, 640, 480, printf('%064x', i*2), 1700000000000+i, 1 FROM n;
WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM n WHERE i < 1000000)
INSERT INTO media SELECT printf('c%031x', i), i, 2, 0, 1, 100000, 640, 480, printf('%064x', i*2+1), 1700000000000+i, 1 FROM n;
WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM n WHERE i < 1000000)
INSERT INTO profile_pictures SELECT i, printf('p%031x', i) FROM n;
WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM n WHERE i < 1000000)
INSERT INTO check_in_photos SELECT i, printf('c%031x', i) FROM n;
WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM n WHERE i < 1000000)
INSERT INTO uploads (id, owner, purpose, place_id, size, created_ms, expires_ms, media_id) SELECT printf('u%031x', i), i, 2, 0, 100000, 1700000000000+i*80, 1700000000000+i*80+3600000, printf('c%031x', i) FROM n;
