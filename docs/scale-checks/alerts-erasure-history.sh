#!/usr/bin/env bash
# One person's erasure from alerts' recipients and emergency_prompts (item 160), on a copy of
# alerts-history-1m.sqlite.sql's database: `bash alerts-erasure-history.sh DB before|after`.
# before: both deletes in the write transaction, as `erase` ran them (one OR each);
# after: the walks (by phone, by user) on a reader's snapshot, then the write transaction's
# deletes by index, by the walk's rowids and above the snapshot's last rowid.
# Person 4242, phone +447000004243: three alerts of their own; 50 recipients rows by user, 50 by phone, 10 prompts.
set -euo pipefail
db=$1; variant=$2
alerts="(SELECT value FROM json_each('[4242,104242,204242]'))"
phones="(SELECT value FROM json_each('[\"+447000004243\"]'))"
case "$variant" in
before) sql="
.print write transaction
BEGIN IMMEDIATE;
DELETE FROM emergency_prompts WHERE alert_id IN $alerts OR user_id = 4242;
DELETE FROM recipients WHERE alert_id IN $alerts OR user_id = 4242 OR phone IN $phones;
COMMIT;" ;;
after) sql="
.print reader
BEGIN;
CREATE TEMP TABLE b AS SELECT (SELECT rowid FROM recipients ORDER BY rowid DESC LIMIT 1) AS r, (SELECT rowid FROM emergency_prompts ORDER BY rowid DESC LIMIT 1) AS p;
CREATE TEMP TABLE wr AS SELECT rowid AS id FROM recipients WHERE rowid <= (SELECT r FROM b) AND phone IN $phones;
CREATE TEMP TABLE wp AS SELECT rowid AS id FROM emergency_prompts WHERE rowid <= (SELECT p FROM b) AND user_id = 4242;
COMMIT;
.print write transaction
BEGIN IMMEDIATE;
DELETE FROM emergency_prompts WHERE alert_id IN $alerts;
SELECT count(*) AS bound_holds FROM emergency_prompts WHERE rowid = (SELECT p FROM b);
DELETE FROM emergency_prompts WHERE rowid IN (SELECT id FROM wp);
DELETE FROM emergency_prompts WHERE rowid > (SELECT p FROM b) AND user_id = 4242;
DELETE FROM recipients WHERE alert_id IN $alerts;
DELETE FROM recipients WHERE user_id = 4242;
SELECT count(*) AS bound_holds FROM recipients WHERE rowid = (SELECT r FROM b);
DELETE FROM recipients WHERE rowid IN (SELECT id FROM wr);
DELETE FROM recipients WHERE rowid > (SELECT r FROM b) AND phone IN $phones;
COMMIT;" ;;
*) echo "before or after" >&2; exit 2 ;;
esac
printf '%s\n' ".timer on" "$sql" ".print check" "SELECT 'left of 4242: ' || (SELECT count(*) FROM recipients WHERE alert_id IN $alerts OR user_id = 4242 OR phone IN $phones) || ' recipients, ' || (SELECT count(*) FROM emergency_prompts WHERE alert_id IN $alerts OR user_id = 4242) || ' prompts';" \
  | sqlite3 "$db" | awk '/^Run Time/ { t += $4; print; next } /^(reader|write transaction|check)$/ { if (label != "") printf "%s: %.3f s\n", label, t; label = $0; t = 0; print; next } { print } END { printf "%s: %.3f s\n", label, t }'
