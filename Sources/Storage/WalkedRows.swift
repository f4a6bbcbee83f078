public import GRDB

/// The rows of a rowid table that match a condition no index serves, found by a reader's walk
/// of one snapshot and deleted in a later write transaction with the rows made since.
///
/// A rowid table gives a new row the largest rowid plus one. So while the snapshot's last row is
/// still there, every row made since has a larger rowid: the write deletes the walk's rowids and
/// searches only above that bound. The last row is known by its identity, which the table never
/// gives a second row (alerts: a send's key, an alert's recipient's place, a prompt's AUTOINCREMENT id).
/// If it is gone, a new row may have taken a rowid at or below the bound, and the write walks the
/// table itself. The searched columns must never change once a row is written. Used by the
/// SQLite stores' erasures (issue 16, `docs/benchmarks.md` items 160 and 163).
public struct WalkedRows: Sendable {
    /// A table, the text that identifies a row, and the condition (its arguments bound in order).
    public struct Search: Sendable {
        public let table: String
        public let identity: String
        public let condition: String

        public init(table: String, identity: String, condition: String) {
            self.table = table
            self.identity = identity
            self.condition = condition
        }
    }

    /// The rowids, at or below the bound, of the rows that matched.
    public var rowids: [Int64] = []
    /// The snapshot's last row (none: the table was empty, so every row since is above 0).
    public var last: (rowid: Int64, identity: String)?

    public init() {}

    /// The walk, in a read transaction.
    public static func walk(_ db: Database, _ search: Search, _ arguments: StatementArguments) throws -> WalkedRows {
        var walked = WalkedRows()
        guard let last = try Row.fetchOne(db, sql: "SELECT rowid, CAST(\(search.identity) AS TEXT) FROM \(search.table) ORDER BY rowid DESC LIMIT 1") else {
            return walked
        }
        walked.last = (last[0], last[1])
        walked.rowids = try Int64.fetchAll(db, sql: "SELECT rowid FROM \(search.table) WHERE rowid <= ? AND (\(search.condition))",
                                           arguments: [last[0] as Int64] + arguments)
        return walked
    }

    /// Deletes the walk's rows and those made since, in the write transaction. - Returns: rows deleted.
    public func delete(_ db: Database, _ search: Search, _ arguments: StatementArguments) throws -> Int {
        guard try boundHolds(db, search) else {
            try db.execute(sql: "DELETE FROM \(search.table) WHERE \(search.condition)", arguments: arguments)
            return db.changesCount
        }
        try db.execute(sql: "DELETE FROM \(search.table) WHERE rowid IN (SELECT value FROM json_each(?))",
                       arguments: [JSONList.of(rowids)])
        var deleted = db.changesCount
        try db.execute(sql: "DELETE FROM \(search.table) WHERE rowid > ? AND (\(search.condition))", arguments: [last?.rowid ?? 0] + arguments)
        deleted += db.changesCount
        return deleted
    }

    /// Whether every row made since the walk has a rowid above its bound: its last row is still there.
    public func boundHolds(_ db: Database, _ search: Search) throws -> Bool {
        guard let last else { return true }
        return try String.fetchOne(db, sql: "SELECT CAST(\(search.identity) AS TEXT) FROM \(search.table) WHERE rowid = ?", arguments: [last.rowid]) == last.identity
    }
}
