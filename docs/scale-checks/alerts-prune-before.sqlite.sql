PRAGMA foreign_keys=ON; PRAGMA secure_delete=ON; PRAGMA synchronous=FULL;
DELETE FROM outbox WHERE status != 1 AND updated_at_ms < 1700172800000; DELETE FROM sent_messages WHERE sent_at_ms < 1700172800000;
.timer on
BEGIN; DELETE FROM outbox WHERE status != 1 AND updated_at_ms < 1700176400000; SELECT changes(); DELETE FROM sent_messages WHERE sent_at_ms < 1700176400000; SELECT changes(); COMMIT;
