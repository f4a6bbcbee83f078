CREATE TABLE blobs (sha256 text COLLATE "C" PRIMARY KEY, size bigint NOT NULL, refs bigint NOT NULL);
CREATE TABLE media (
    id text COLLATE "C" PRIMARY KEY, owner bigint NOT NULL, purpose bigint NOT NULL, place_id bigint NOT NULL,
    type bigint NOT NULL, size bigint NOT NULL, width bigint NOT NULL, height bigint NOT NULL,
    sha256 text COLLATE "C" NOT NULL REFERENCES blobs (sha256), created_ms bigint NOT NULL, attached boolean NOT NULL DEFAULT false);
CREATE INDEX media_by_place ON media (place_id, created_ms DESC, id DESC) WHERE purpose = 3;
CREATE INDEX media_by_owner ON media (owner, created_ms DESC, id DESC);
CREATE INDEX media_by_blob ON media (sha256);
CREATE TABLE profile_pictures (user_id bigint PRIMARY KEY, media_id text COLLATE "C" NOT NULL);
CREATE TABLE check_in_photos (user_id bigint PRIMARY KEY, media_id text COLLATE "C" NOT NULL);
CREATE TABLE uploads (
    id text COLLATE "C" PRIMARY KEY, owner bigint NOT NULL, purpose bigint NOT NULL, place_id bigint NOT NULL,
    size bigint NOT NULL, created_ms bigint NOT NULL, expires_ms bigint NOT NULL, media_id text COLLATE "C",
    location_removed boolean NOT NULL DEFAULT false, deduplicated boolean NOT NULL DEFAULT false, replaced text NOT NULL DEFAULT '');
CREATE INDEX uploads_by_owner ON uploads (owner, created_ms);
INSERT INTO blobs SELECT lpad(to_hex(i), 64, '0'), 100000, 1 FROM generate_series(1, 2000000) i;
INSERT INTO media SELECT 'p' || lpad(to_hex(i), 31, '0'), i, 1, 0, 1, 100000, 640, 480, lpad(to_hex(i*2), 64, '0'), 1700000000000+i, true FROM generate_series(1, 1000000) i;
INSERT INTO media SELECT 'c' || lpad(to_hex(i), 31, '0'), i, 2, 0, 1, 100000, 640, 480, lpad(to_hex(i*2-1), 64, '0'), 1700000000000+i, true FROM generate_series(1, 1000000) i;
INSERT INTO profile_pictures SELECT i, 'p' || lpad(to_hex(i), 31, '0') FROM generate_series(1, 1000000) i;
INSERT INTO check_in_photos SELECT i, 'c' || lpad(to_hex(i), 31, '0') FROM generate_series(1, 1000000) i;
INSERT INTO uploads (id, owner, purpose, place_id, size, created_ms, expires_ms, media_id) SELECT 'u' || lpad(to_hex(i), 31, '0'), i, 2, 0, 100000, 1700000000000+i*80, 1700000000000+i*80+3600000, 'c' || lpad(to_hex(i), 31, '0') FROM generate_series(1, 1000000) i;
VACUUM ANALYZE;
