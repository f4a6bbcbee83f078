# $1: db file; $2: before|after. 100 photo deletes (check-in photos of users 1..100), each in its own transaction, as deleteItem runs them.
db=$1
{
echo "PRAGMA foreign_keys=ON; PRAGMA secure_delete=ON; PRAGMA synchronous=FULL;"
if [ "$2" = after ]; then
  echo "CREATE INDEX media_by_blob ON media(sha256); CREATE INDEX media_unattached ON media(created_ms) WHERE purpose = 2 AND attached = 0; CREATE INDEX uploads_unfinished ON uploads(expires_ms) WHERE media_id IS NULL; CREATE INDEX uploads_by_created ON uploads(created_ms);"
fi
echo ".timer on"
for i in $(seq 1 100); do
  id=$(printf 'c%031x' $i); sha=$(printf '%064x' $((i*2+1)))
  if [ "$2" = after ]; then
    echo "BEGIN; SELECT sha256, owner FROM media WHERE id = '$id'; DELETE FROM media WHERE id = '$id'; DELETE FROM profile_pictures WHERE user = $i AND media_id = '$id'; DELETE FROM check_in_photos WHERE user = $i AND media_id = '$id'; UPDATE blobs SET refs = refs - 1 WHERE sha256 = '$sha'; SELECT refs FROM blobs WHERE sha256 = '$sha'; DELETE FROM blobs WHERE sha256 = '$sha'; COMMIT;"
  else
    echo "BEGIN; SELECT sha256 FROM media WHERE id = '$id'; DELETE FROM media WHERE id = '$id'; DELETE FROM profile_pictures WHERE media_id = '$id'; DELETE FROM check_in_photos WHERE media_id = '$id'; UPDATE blobs SET refs = refs - 1 WHERE sha256 = '$sha'; SELECT refs FROM blobs WHERE sha256 = '$sha'; DELETE FROM blobs WHERE sha256 = '$sha'; COMMIT;"
  fi
done
echo ".timer off"
echo "SELECT 'expiry';"; echo ".timer on"
echo "BEGIN; SELECT count(*) FROM uploads WHERE media_id IS NULL AND expires_ms <= 1700086400000;"
if [ "$2" = after ]; then echo "DELETE FROM uploads WHERE media_id IS NULL AND expires_ms <= 1700086400000; DELETE FROM uploads WHERE created_ms <= 1700000000000;"
else echo "DELETE FROM uploads WHERE (media_id IS NULL AND expires_ms <= 1700086400000) OR created_ms <= 1700000000000;"; fi
echo "SELECT count(*) FROM media WHERE purpose = 2 AND attached = 0 AND created_ms <= 1800000000000; COMMIT;"
} | sqlite3 $db 2>&1 | tee /dev/null | awk '/^Run Time/ {t+=$4; n++} /^expiry/ {printf "deletes: %d, %.1f ms in all, %.2f ms a delete\n", n, t*1000, t*1000/100; t=0; n=0} END {printf "expiry pass: %.1f ms (%d statements)\n", t*1000, n}'
