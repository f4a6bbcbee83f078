#!/usr/bin/env bash
# The hourly prune of social's notices (item 162) on a copy of social-notices-30-days.sqlite.sql's
# database: the first prune (23 days past the 7-day retention), then the next hour's, timed.
# `bash social-notices-prune.sh DB bounded|walk`: bounded is `SQLiteSocialStore.pruneNoticesSQL`;
# walk the same condition without the bound.
set -euo pipefail
db=$1; variant=$2
day=86400000; now=$((30 * day)); first=$((now - 7 * day)); next=$((first + 3600000))
case "$variant" in
bounded) prune="DELETE FROM notices WHERE id < COALESCE((SELECT id FROM notices WHERE created_at_ms >= ?1 ORDER BY id LIMIT 1), 9223372036854775807) AND created_at_ms < ?1;" ;;
walk) prune="DELETE FROM notices WHERE created_at_ms < ?1;" ;;
*) echo "bounded or walk" >&2; exit 2 ;;
esac
for cutoff in $first $next; do
  printf '%s\n' ".parameter set ?1 $cutoff" ".print prune before $cutoff" "BEGIN IMMEDIATE;" ".timer on" "$prune" ".timer off" \
    "SELECT '  rows ' || changes();" ".timer on" ".print commit" "COMMIT;" ".timer off"
done | sqlite3 "$db"
