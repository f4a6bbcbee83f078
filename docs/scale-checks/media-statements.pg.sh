# Prints the psql input that times media's statements on media-1m-users.pg.sql's rows, each in a
# transaction rolled back, on generic plans: `bash media-statements.pg.sh before|after | psql …`.
# before: the pointer deletes by media_id, as deleteItem made them before item 156; after: by
# user, as now. Then the expiry pass's three statements, seven times: run it before and after
# creating the three indexes of migration media_expiry_by_index.
echo "SET plan_cache_mode = force_generic_plan;"
if [ "$1" = after ]; then
  echo "PREPARE pointer_p(bigint, text) AS DELETE FROM profile_pictures WHERE user_id = \$1 AND media_id = \$2;"
  echo "PREPARE pointer_c(bigint, text) AS DELETE FROM check_in_photos WHERE user_id = \$1 AND media_id = \$2;"
else
  echo "PREPARE pointer_p(bigint, text) AS DELETE FROM profile_pictures WHERE media_id = \$2;"
  echo "PREPARE pointer_c(bigint, text) AS DELETE FROM check_in_photos WHERE media_id = \$2;"
fi
echo "PREPARE orphans(bigint) AS SELECT id FROM media WHERE purpose = 2 AND NOT attached AND created_ms <= \$1 FOR UPDATE SKIP LOCKED;"
echo "PREPARE expired(bigint) AS DELETE FROM uploads WHERE media_id IS NULL AND expires_ms <= \$1 RETURNING 1;"
echo "PREPARE old(bigint) AS DELETE FROM uploads WHERE created_ms <= \$1;"
echo "\\timing on"
echo "BEGIN;"
for i in $(seq 1 20); do
  id=$(printf 'c%031x' "$i")
  echo "EXECUTE pointer_p($i, '$id'); EXECUTE pointer_c($i, '$id');"
done
for _ in 1 2 3 4 5 6 7; do
  echo "EXECUTE orphans(1800000000000); EXECUTE expired(1700086400000); EXECUTE old(1700000000000);"
done
echo "ROLLBACK;"
