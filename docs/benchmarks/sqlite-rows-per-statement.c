// Instructions a row for history-shaped INSERTs, N rows a statement (docs/benchmarks.md, issue 16,
// item 139): 200,000 rows, 40 a transaction, into a table with history's columns, AUTOINCREMENT
// key and partial index, in the current folder (t.db). Not part of the build.
//   cc -O2 -o rows sqlite-rows-per-statement.c -lsqlite3
//   for n in 1 8 40; do valgrind --tool=callgrind ./rows $n; done   # "Collected" ÷ 200,000
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
int main(int argc, char **argv) {
  int per = atoi(argv[1]); // rows per statement
  int total = 200000, batch = 40;
  unlink("t.db"); unlink("t.db-wal");
  sqlite3 *db; sqlite3_open("t.db", &db);
  sqlite3_exec(db, "PRAGMA journal_mode=WAL; PRAGMA synchronous=OFF;"
    "CREATE TABLE history (id INTEGER PRIMARY KEY AUTOINCREMENT, user_id INTEGER NOT NULL, lat DOUBLE NOT NULL, lon DOUBLE NOT NULL, accuracy DOUBLE NOT NULL, device_ms INTEGER NOT NULL, received_ms INTEGER NOT NULL, status TEXT, unrecorded INTEGER);"
    "CREATE INDEX history_unrecorded ON history(id) WHERE unrecorded = 1;"
    "CREATE TABLE places (id INTEGER PRIMARY KEY AUTOINCREMENT, x);", 0, 0, 0);
  char sql[65536]; strcpy(sql, "INSERT INTO history (user_id, lat, lon, accuracy, device_ms, received_ms, status, unrecorded) VALUES ");
  for (int r = 0; r < per; r++) strcat(sql, r ? ",(?,?,?,?,?,?,?,?)" : "(?,?,?,?,?,?,?,?)");
  sqlite3_stmt *st; if (sqlite3_prepare_v2(db, sql, -1, &st, 0)) { printf("%s\n", sqlite3_errmsg(db)); return 1; }
  long n = 0;
  while (n < total) {
    sqlite3_exec(db, "BEGIN", 0, 0, 0);
    for (int b = 0; b < batch; b += per) {
      for (int r = 0; r < per; r++) {
        int k = r * 8;
        sqlite3_bind_int64(st, k+1, n % 5000); sqlite3_bind_double(st, k+2, 42.1); sqlite3_bind_double(st, k+3, -75.2);
        sqlite3_bind_double(st, k+4, 5); sqlite3_bind_int64(st, k+5, 1700000000000 + n); sqlite3_bind_int64(st, k+6, 1700000000000 + n);
        sqlite3_bind_null(st, k+7); sqlite3_bind_null(st, k+8); n++;
      }
      sqlite3_step(st); sqlite3_reset(st);
    }
    sqlite3_exec(db, "COMMIT", 0, 0, 0);
  }
  printf("%ld rows, last %lld\n", n, sqlite3_last_insert_rowid(db));
  return 0;
}
