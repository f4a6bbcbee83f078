import Foundation
import GRDB
import Storage

// Geo's writes of location batches and of the fold behind them (`HistoryFolding`), on SQLite.
extension SQLiteGeoStore {
    /// Appends a batch of updates to history in one transaction, with a slice of the fold when
    /// one is due, and the place events the batch causes. - Returns: the history ids of the
    /// batch, in order, and the place events with their ids.
    /// - Parameter unrecorded: per update, whether history keeps it only until it is folded
    ///   (inside a private zone); nil: all kept.
    func write(_ batch: [LocationUpdate], fold: FoldWrite?, unrecorded: [Bool]?,
               placeEvents: [PlaceEventRecord]) throws -> (ids: [Int64], placeEvents: [PlaceEventRecord]) {
        try database.write { db in try Self.write(batch, fold: fold, unrecorded: unrecorded, placeEvents: placeEvents, db) }
    }

    /// Location batches commit in the service database's group commit, with the other mutations
    /// waiting at the same time (one fsync for both; item 69), unless `FRIENSO_GEO_LOCATION_COMMIT=own`.
    func locationWriter(_ steps: LocationBatchSteps) -> any LocationWriter {
        guard !locationsCommitOnTheirOwn else { return OwnCommitLocationWriter(store: self, steps: steps) }
        return SharedCommitLocationWriter(database: database, steps: steps) { batch, prepared, db in
            try Self.write(batch, fold: prepared.fold, unrecorded: prepared.plan.unrecorded, placeEvents: prepared.plan.told, db)
        }
    }

    /// A batch's rows in `db`'s transaction: the fold's slice first, then the history rows and
    /// the place events. - Returns: the history ids, in the batch's order, and the events with theirs.
    private static func write(_ batch: [LocationUpdate], fold: FoldWrite?, unrecorded: [Bool]?, placeEvents: [PlaceEventRecord],
                              _ db: Database) throws -> (ids: [Int64], placeEvents: [PlaceEventRecord]) {
        if let fold { try write(fold, db) } // first: its fixes are those before this batch
        var ids: [Int64] = []
        ids.reserveCapacity(batch.count)
        if Self.bindsThroughArguments || !Self.insertsManyRows {
            let historyInsert = historyInserts.sql(rows: 1)
            let historyRow = try db.cachedStatement(sql: historyInsert) // once a batch, not once a row
            for (i, update) in batch.enumerated() {
                let unrecorded: Int? = unrecorded?[i] == true ? 1 : nil
                if Self.bindsThroughArguments {
                    try db.run(sql: historyInsert, arguments: [update.user, update.lat, update.lon, update.accuracy, update.deviceMs,
                                                                        update.receivedMs, update.status, unrecorded])
                } else {
                    try db.run(historyRow, binding: update.user, update.lat, update.lon, update.accuracy, update.deviceMs,
                               update.receivedMs, update.status, unrecorded)
                }
                ids.append(db.lastInsertedRowID)
            }
        } else {
            try db.run(historyInserts, rows: batch.indices, binding: { i in
                let update = batch[i]
                return (update.user, update.lat, update.lon, update.accuracy, update.deviceMs, update.receivedMs,
                        NullableText(update.status), NullableInteger(unrecorded?[i] == true ? 1 : nil))
            }, afterEach: { rows in try appendIDs(ofRows: rows, to: &ids, db) })
        }
        return (ids, try insert(placeEvents, db))
    }

    /// `FRIENSO_GEO_HISTORY_INSERT=row`: one statement a history row, as before item 139 (A/B runs).
    static let insertsManyRows = ProcessInfo.processInfo.environment["FRIENSO_GEO_HISTORY_INSERT"] != "row"

    /// A batch's history rows: 32 to a statement, then the rest as 16, 8, 4, 2 and 1 (six
    /// statements in the cache, at most five more for any batch), eight parameters a row.
    static let historyInserts = RowsStatement(
        "INSERT INTO history (user_id, lat, lon, accuracy, device_ms, received_ms, status, unrecorded) VALUES",
        row: "(?, ?, ?, ?, ?, ?, ?, ?)")

    /// The ids of the `rows` rows the last statement inserted, in order. History's key is
    /// `AUTOINCREMENT`: in one statement, SQLite gives each row one more than the largest id the
    /// table ever had, the row before included (`OP_NewRowid`), so they are consecutive and the
    /// last is `lastInsertedRowID`. Checked where it can be: the statement wrote `rows` rows, and
    /// its first id follows the previous statement's last.
    private static func appendIDs(ofRows rows: Int, to ids: inout [Int64], _ db: Database) throws {
        let last = db.lastInsertedRowID, first = last - Int64(rows) + 1
        guard db.changesCount == rows, ids.last.map({ $0 + 1 == first }) ?? true else {
            throw DatabaseError(resultCode: .SQLITE_INTERNAL, message: "history rows \(first)...\(last) are not the \(rows) rows just written")
        }
        ids.append(contentsOf: first...last)
    }

    /// A fold's `latest` fixes and index rows, 32 to a statement as history's rows (item 141).
    static let latestUpserts = RowsStatement(
        "INSERT INTO latest (user_id, lat, lon, accuracy, device_ms, received_ms, status, history_id) VALUES", row: "(?, ?, ?, ?, ?, ?, ?, ?)",
        tail: """
            ON CONFLICT(user_id) DO UPDATE SET lat = excluded.lat, lon = excluded.lon, accuracy = excluded.accuracy, device_ms = excluded.device_ms,
            received_ms = excluded.received_ms, status = excluded.status, history_id = excluded.history_id
            """)
    static let historyIndexInserts = RowsStatement("INSERT OR IGNORE INTO history_by_user (user_id, history_id) VALUES", row: "(?, ?)")
    /// `FRIENSO_GEO_FOLD_WRITES=row`: a fold's rows written a statement each, as before item 141 (A/B runs).
    static let foldsManyRows = ProcessInfo.processInfo.environment["FRIENSO_GEO_FOLD_WRITES"] != "row"
    /// `FRIENSO_GEO_BINDING=arguments`: the batch's rows bound through GRDB's `StatementArguments`,
    /// as before item 83 (A/B runs only).
    static let bindsThroughArguments = ProcessInfo.processInfo.environment["FRIENSO_GEO_BINDING"] == "arguments"

    /// A fold at start-up, in a transaction of its own.
    func writeFold(_ fold: FoldWrite) throws {
        try database.write { db in try Self.write(fold, db) }
    }

    /// The fixes are everything committed so far (the memory state before the next batch), so
    /// each row records the last history id it reflects: replay skips what it already holds.
    static func write(_ fold: FoldWrite, _ db: Database) throws {
        let through = try Int64.fetchOne(db, cached: "SELECT max(id) FROM history") ?? 0
        if foldsManyRows, !bindsThroughArguments {
            try db.run(latestUpserts, rows: fold.fixes) { user, fix in
                (user, fix.lat, fix.lon, fix.accuracy, fix.deviceMs, fix.receivedMs, fix.status, through)
            }
            try db.run(historyIndexInserts, rows: fold.pairs) { ($0.user, $0.id) }
        } else {
            try writeRowByRow(fold, through: through, db)
        }
        if let done = fold.completesThrough {
            try db.run(sql: "UPDATE geo_meta SET value = max(value, ?) WHERE key = 'folded_through'", arguments: [done])
            try dropUnrecorded(through: done, db)
        }
    }

    /// `write(_:_:)`'s rows a statement each (`FRIENSO_GEO_FOLD_WRITES=row`, `FRIENSO_GEO_BINDING=arguments`).
    private static func writeRowByRow(_ fold: FoldWrite, through: Int64, _ db: Database) throws {
        // The one-row forms of the statements of many rows: the same SQL, a row at a time.
        let latestUpsert = latestUpserts.sql(rows: 1), historyIndexInsert = historyIndexInserts.sql(rows: 1)
        let upsert = try db.cachedStatement(sql: latestUpsert), indexInsert = try db.cachedStatement(sql: historyIndexInsert)
        for (user, fix) in fold.fixes {
            if bindsThroughArguments {
                try db.run(sql: latestUpsert, arguments: [user, fix.lat, fix.lon, fix.accuracy, fix.deviceMs, fix.receivedMs, fix.status, through])
            } else {
                try db.run(upsert, binding: user, fix.lat, fix.lon, fix.accuracy, fix.deviceMs, fix.receivedMs, fix.status, through)
            }
        }
        for pair in fold.pairs {
            if bindsThroughArguments {
                try db.run(sql: historyIndexInsert, arguments: [pair.user, pair.id])
            } else {
                try db.run(indexInsert, binding: pair.user, pair.id)
            }
        }
    }
}
