#!/usr/bin/env bash
# One person's place events erased (item 163), on a copy of geo-place-events-week.sqlite.sql's
# database: `bash geo-erasure.sh DB before|after`. before: the delete in the write transaction,
# as geo's `erase` ran it; after: the walk on a reader's snapshot, then the write transaction's
# deletes by the walk's rowids and above the snapshot's last. Person 4242 (28 events as viewer, 28 as subject).
set -euo pipefail
db=$1; variant=$2
case "$variant" in
before) sql="
.print write transaction
BEGIN IMMEDIATE;
DELETE FROM place_events WHERE viewer = 4242 OR subject = 4242;
COMMIT;" ;;
after) sql="
.print reader
BEGIN;
CREATE TEMP TABLE b AS SELECT (SELECT rowid FROM place_events ORDER BY rowid DESC LIMIT 1) AS p;
CREATE TEMP TABLE w AS SELECT rowid AS id FROM place_events WHERE rowid <= (SELECT p FROM b) AND (viewer = 4242 OR subject = 4242);
COMMIT;
.print write transaction
BEGIN IMMEDIATE;
SELECT count(*) AS bound_holds FROM place_events WHERE rowid = (SELECT p FROM b);
DELETE FROM place_events WHERE rowid IN (SELECT id FROM w);
DELETE FROM place_events WHERE rowid > (SELECT p FROM b) AND (viewer = 4242 OR subject = 4242);
COMMIT;" ;;
*) echo "before or after" >&2; exit 2 ;;
esac
printf '%s\n' ".timer on" "$sql" ".print check" "SELECT 'left of 4242: ' || (SELECT count(*) FROM place_events WHERE viewer = 4242 OR subject = 4242) || ' events';" \
  | sqlite3 "$db" | awk '/^Run Time/ { t += $4; next } /^(reader|write transaction|check)$/ { if (label != "") printf "%s: %.3f s\n", label, t; label = $0; t = 0; next } { print } END { printf "%s: %.3f s\n", label, t }'
