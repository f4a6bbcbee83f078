#!/usr/bin/env bash
# The hourly prune of accounts' emails (item 161) on a copy of accounts-emails-100-days.sqlite.sql's
# database: the first prune (ten days past the 90-day retention), then the next hour's, timed
# (sqlite3's .timer). `bash accounts-emails-prune.sh DB bounded|walk`: bounded is the
# statement as `SQLiteAccountsStore.pruneEmailsSQL` has it; walk the same condition without the bound.
set -euo pipefail
db=$1; variant=$2
day=86400000; now=$((100 * day + 8640)); first=$((now - 90 * day)); next=$((first + 3600000))
case "$variant" in
bounded) outbox="DELETE FROM email_outbox WHERE id < COALESCE((SELECT id FROM email_outbox WHERE created_ms >= ?1 ORDER BY id LIMIT 1), 9223372036854775807) AND status != 1 AND done_ms < ?1;" ;;
walk) outbox="DELETE FROM email_outbox WHERE status != 1 AND done_ms < ?1;" ;;
*) echo "bounded or walk" >&2; exit 2 ;;
esac
for cutoff in $first $next; do
  printf '%s\n' ".parameter set ?1 $cutoff" ".print prune before $cutoff" "BEGIN IMMEDIATE;" ".timer on" ".print outbox" "$outbox" ".timer off" \
    "SELECT '  rows ' || changes();" ".timer on" ".print copies" "DELETE FROM sent_emails WHERE sent_at_ms < ?1;" ".timer off" \
    "SELECT '  rows ' || changes();" ".timer on" ".print commit" "COMMIT;" ".timer off"
done | sqlite3 "$db"
