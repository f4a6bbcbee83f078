#!/usr/bin/env bash
# One person's erasure from alerts' outbox and sent_messages (item 160), on a copy of
# alerts-outbox-90-days.sqlite.sql's database: `bash alerts-erasure.sh DB before|after`.
# before: the search and both deletes in the write transaction, as `erase` ran them;
# after: the walks on a reader's snapshot, then the write transaction's bounded reads and deletes.
# Person 4242 (45 deliveries to them, 45 about them, 45 sends to their number; sources of three
# alerts of theirs). Prints each statement's time (sqlite3's .timer) and each transaction's sum.
set -euo pipefail
db=$1; variant=$2
terms="(about_user = 4242 OR recipient_user = 4242 OR address IN (SELECT value FROM json_each('[\"+447000004242\"]'))
  OR source IN (SELECT value FROM json_each('[\"help_now:1\",\"help_now_resolved:1\",\"help_now:2\",\"help_now:3\"]'))
  OR source LIKE 'help_answer:%:4242:%' OR source LIKE 'watch_answer:%:4242:%')"
addresses="(SELECT value FROM json_each('[\"+447000004242\"]'))"
case "$variant" in
before) sql="
.print write transaction
BEGIN IMMEDIATE;
CREATE TEMP TABLE d AS SELECT id FROM outbox WHERE $terms;
DELETE FROM sent_messages WHERE idempotency_key IN (SELECT 'frienso-delivery-' || id FROM d) OR address IN $addresses;
DELETE FROM outbox WHERE id IN (SELECT id FROM d);
COMMIT;" ;;
after) sql="
.print reader
BEGIN;
CREATE TEMP TABLE b AS SELECT coalesce(max(id), 0) AS outbox_bound, (SELECT rowid FROM sent_messages ORDER BY rowid DESC LIMIT 1) AS sent_bound,
  (SELECT idempotency_key FROM sent_messages ORDER BY rowid DESC LIMIT 1) AS sent_key FROM outbox;
CREATE TEMP TABLE d AS SELECT id FROM outbox WHERE id <= (SELECT outbox_bound FROM b) AND $terms;
CREATE TEMP TABLE u AS SELECT id FROM outbox WHERE status = 1 AND address = '' AND +id <= (SELECT outbox_bound FROM b);
CREATE TEMP TABLE s AS SELECT idempotency_key AS k FROM sent_messages WHERE rowid <= (SELECT sent_bound FROM b) AND address IN $addresses;
COMMIT;
.print write transaction
BEGIN IMMEDIATE;
INSERT INTO d SELECT id FROM outbox WHERE id > (SELECT outbox_bound FROM b) AND $terms;
INSERT INTO d SELECT id FROM outbox WHERE id IN (SELECT id FROM u) AND $terms;
SELECT idempotency_key = (SELECT sent_key FROM b) AS bound_holds FROM sent_messages WHERE rowid = (SELECT sent_bound FROM b);
INSERT INTO s SELECT idempotency_key FROM sent_messages WHERE rowid > (SELECT sent_bound FROM b) AND address IN $addresses;
INSERT INTO s SELECT 'frienso-delivery-' || id FROM d;
DELETE FROM sent_messages WHERE idempotency_key IN (SELECT k FROM s);
DELETE FROM outbox WHERE id IN (SELECT id FROM d);
COMMIT;" ;;
*) echo "before or after" >&2; exit 2 ;;
esac
printf '%s\n' ".timer on" "$sql" ".print check" "SELECT 'left to, about or at 4242: ' || (SELECT count(*) FROM outbox WHERE about_user = 4242 OR recipient_user = 4242 OR address = '+447000004242') || ' deliveries, ' || (SELECT count(*) FROM sent_messages WHERE address = '+447000004242') || ' sends';" \
  | sqlite3 "$db" | awk '/^Run Time/ { t += $4; print; next } /^(reader|write transaction|check)$/ { if (label != "") printf "%s: %.3f s\n", label, t; label = $0; t = 0; print; next } { print } END { printf "%s: %.3f s\n", label, t }'
