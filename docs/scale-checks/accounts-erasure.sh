#!/usr/bin/env bash
# One account's emails erased (item 163), on a copy of accounts-emails-100-days.sqlite.sql's
# database: `bash accounts-erasure.sh DB before|after`. before: both deletes in the write
# transaction, as `deleteUser` ran them; after: the walks by address on a reader's snapshot, then
# the write transaction's deletes by user, by the walks' rowids and above the snapshot's last.
# User 4242 (user4242@example.org): 10 emails and 10 copies.
set -euo pipefail
db=$1; variant=$2
a="'user4242@example.org'"
case "$variant" in
before) sql="
.print write transaction
BEGIN IMMEDIATE;
DELETE FROM email_outbox WHERE user_id = 4242 OR address = $a;
DELETE FROM sent_emails WHERE address = $a;
COMMIT;" ;;
after) sql="
.print reader
BEGIN;
CREATE TEMP TABLE b AS SELECT (SELECT rowid FROM email_outbox ORDER BY rowid DESC LIMIT 1) AS o, (SELECT rowid FROM sent_emails ORDER BY rowid DESC LIMIT 1) AS c;
CREATE TEMP TABLE wo AS SELECT rowid AS id FROM email_outbox WHERE rowid <= (SELECT o FROM b) AND (address = $a);
CREATE TEMP TABLE wc AS SELECT rowid AS id FROM sent_emails WHERE rowid <= (SELECT c FROM b) AND (address = $a);
COMMIT;
.print write transaction
BEGIN IMMEDIATE;
DELETE FROM email_outbox WHERE user_id = 4242;
SELECT count(*) AS bound_holds FROM email_outbox WHERE rowid = (SELECT o FROM b);
DELETE FROM email_outbox WHERE rowid IN (SELECT id FROM wo);
DELETE FROM email_outbox WHERE rowid > (SELECT o FROM b) AND (address = $a);
SELECT count(*) AS bound_holds FROM sent_emails WHERE rowid = (SELECT c FROM b);
DELETE FROM sent_emails WHERE rowid IN (SELECT id FROM wc);
DELETE FROM sent_emails WHERE rowid > (SELECT c FROM b) AND (address = $a);
COMMIT;" ;;
*) echo "before or after" >&2; exit 2 ;;
esac
printf '%s\n' ".timer on" "$sql" ".print check" "SELECT 'left of 4242: ' || (SELECT count(*) FROM email_outbox WHERE user_id = 4242 OR address = $a) || ' emails, ' || (SELECT count(*) FROM sent_emails WHERE address = $a) || ' copies';" \
  | sqlite3 "$db" | awk '/^Run Time/ { t += $4; next } /^(reader|write transaction|check)$/ { if (label != "") printf "%s: %.3f s\n", label, t; label = $0; t = 0; next } { print } END { printf "%s: %.3f s\n", label, t }'
