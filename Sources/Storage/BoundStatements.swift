public import GRDB
import GRDBSQLite

// The data statements the services run for every row or mutation they write (geo's location
// rows, audit flush, grants and place events, every idempotency claim and saved reply, alerts'
// outbox and alerts), bound by position
// straight to SQLite. `Statement.execute(arguments:)` first builds a
// `StatementArguments` (an existential and a `DatabaseValue` per value), validates it against
// the statement, and binds through nested closures (strings bound without a copy): about 5% of
// geo's samples under location updates, for three statements a row (`docs/benchmarks.md`,
// issue 16, item 83). Here each value binds itself with GRDB's own `StatementBinding` (the same
// `sqlite3_bind_*` call and storage as GRDB's path, SQLite copying strings), and the statement
// steps to its end.
//
// Hand-written because GRDB has no public way to execute a statement without a
// `StatementArguments`. What GRDB does around `execute` that this skips, and why that is safe
// here: transaction observers and observed regions (the project registers none); the check that
// the transaction was not aborted (the write queue checks `isInsideTransaction` after every
// mutation, and a failed statement throws here); the schema cache (data statements only: no DDL).
// A failed step resets the statement, so its next use (here or through GRDB) starts clean.

extension Database {
    /// Executes one data statement (INSERT, UPDATE, DELETE) from the connection's statement
    /// cache, inside the current transaction, with `values` bound to its parameters in order:
    /// as many values as the statement's highest parameter index (`?NNN` counts once).
    /// Inlinable, as `run(_:binding:)` is, so that a call's pack of values is specialized where
    /// it is written (item 135).
    /// - Throws: `DatabaseError` when the statement fails (its SQLite code and message), when
    ///   the values do not match the parameters (`SQLITE_MISUSE`), or outside a transaction.
    @inlinable
    public func run<each Value: StatementBinding>(sql: String, binding values: repeat each Value) throws {
        guard isInsideTransaction else { throw Self.outsideTransaction(sql) }
        try runInTransaction(cachedStatement(sql: sql), binding: repeat each values)
    }

    /// `run(sql:binding:)` with a statement already taken from this connection's cache
    /// (`cachedStatement(sql:)`), for a loop that runs one statement for many rows: the cache
    /// is asked once, not once a row (its key is the SQL, hashed on every question).
    /// (`Statement.sql` is read only for an error: GRDB trims it anew on every read.)
    @inlinable
    public func run<each Value: StatementBinding>(_ statement: Statement, binding values: repeat each Value) throws {
        guard isInsideTransaction else { throw Self.outsideTransaction(statement.sql) }
        try runInTransaction(statement, binding: repeat each values)
    }

    /// Binds and steps `statement` to its end (a write's RETURNING rows are not read); the
    /// caller checked that a transaction is open.
    @inlinable
    func runInTransaction<each Value: StatementBinding>(_ statement: Statement, binding values: repeat each Value) throws {
        try StatementSteps.bind(statement, repeat each values)
        while try StatementSteps.step(statement) {}
    }

    /// Executes one data statement that writes several rows at once (an `INSERT … VALUES (…),
    /// (…), …` with a group of parameters per row), from this connection's cache, inside the
    /// current transaction: `values(row)` binds each of `rows`, in order, to the next group. One
    /// statement for many rows runs SQLite's per-statement work once (its start and end, an
    /// `AUTOINCREMENT` table's `sqlite_sequence` row), not once a row: about 6,000 instructions a
    /// row for geo's history (`docs/benchmarks.md`, issue 16, item 139; for alerts' few rows a
    /// raise it made no difference that showed: item 140).
    /// - Throws: `DatabaseError` when the statement fails, when the values bound do not fill its
    ///   parameters exactly (`SQLITE_MISUSE`), or outside a transaction.
    @inlinable
    public func run<Item, each Value: StatementBinding>(_ statement: Statement, rows: some Collection<Item>,
                                                        binding values: (Item) -> (repeat each Value)) throws {
        try bind(statement, rows: rows, binding: values)
        while try StatementSteps.step(statement) {}
    }

    /// Writes `rows` with the statements of `statements`, as few as its sizes allow, in order:
    /// `run(_:rows:binding:)` for each, then `afterEach` with how many rows it wrote.
    @inlinable
    public func run<Items: Collection, each Value: StatementBinding>(
        _ statements: RowsStatement, rows: Items, binding values: (Items.Element) -> (repeat each Value),
        afterEach: (Int) throws -> Void = { _ in }
    ) throws {
        var start = rows.startIndex
        for size in statements.sizes(rows.count) {
            let end = rows.index(start, offsetBy: size)
            try run(cachedStatement(sql: statements.sql(rows: size)), rows: rows[start..<end], binding: values)
            try afterEach(size)
            start = end
        }
    }

    /// Binds `values(row)` for each of `rows` to the next group of `statement`'s parameters.
    @inlinable
    func bind<Item, each Value: StatementBinding>(_ statement: Statement, rows: some Collection<Item>,
                                                  binding values: (Item) -> (repeat each Value)) throws {
        guard isInsideTransaction else { throw Self.outsideTransaction(statement.sql) }
        let (handle, expected) = StatementSteps.startBinding(statement)
        var bound: CInt = 0
        var failed: CInt = 0 // SQLITE_OK
        for item in rows {
            let row = values(item)
            for value in repeat each row {
                bound += 1
                if failed == 0, bound <= expected { failed = value.bind(to: handle, at: bound) }
            }
        }
        if failed != 0 || bound != expected { try StatementSteps.bindingFailed(statement, code: failed, bound: bound, expected: expected) }
    }

    @usableFromInline
    static func outsideTransaction(_ sql: String) -> DatabaseError {
        DatabaseError(resultCode: .SQLITE_MISUSE, message: "run(sql:binding:) runs inside a transaction only", sql: sql)
    }
}

/// One statement writing several rows (`INSERT … VALUES (…), (…), …`), made for 1, 2, 4, …
/// `maxRows` rows, so that a connection caches a handful of them whatever the number of rows:
/// `sizes` splits a number of rows into those, `sql(rows:)` is the statement for one.
public struct RowsStatement: Sendable {
    public let maxRows: Int
    @usableFromInline let statements: [String]

    /// - Parameters:
    ///   - head: the statement up to `VALUES`, included.
    ///   - row: one row's parameters, `(?, ?, …)`.
    ///   - tail: what follows the rows (`ON CONFLICT …`, `RETURNING …`), if anything.
    ///   - maxRows: a power of two.
    public init(_ head: String, row: String, tail: String = "", maxRows: Int = 32) {
        precondition(maxRows > 0 && maxRows & (maxRows - 1) == 0, "maxRows is a power of two")
        self.maxRows = maxRows
        statements = (0...maxRows.trailingZeroBitCount).map { n in
            head + " " + repeatElement(row, count: 1 << n).joined(separator: ", ") + (tail.isEmpty ? "" : " " + tail)
        }
    }

    /// The statement for `rows` rows, one of `sizes`' numbers.
    @inlinable
    public func sql(rows: Int) -> String { statements[rows.trailingZeroBitCount] }

    /// The rows of each statement for `count` rows: `maxRows` at a time, then the rest by halves.
    @inlinable
    public func sizes(_ count: Int) -> [Int] {
        var sizes = Array(repeating: maxRows, count: count / maxRows)
        var rest = count % maxRows, size = maxRows / 2
        while rest > 0 {
            if rest >= size { sizes.append(size); rest -= size }
            size /= 2
        }
        return sizes
    }
}

/// Text that may be NULL, for a pack of values given to `run(…binding:)`: `NullableText(status)`.
/// A bare `String?` there binds through GRDB's `Optional: StatementBinding`, which is generic:
/// a pack calls each value's `bind` through its conformance, and a generic one's copies and
/// destroys the optional through its metadata, about 600 instructions a value (two a location
/// row in geo: `docs/benchmarks.md`, issue 16, item 144). A generic wrapper is no better, for the
/// same reason; these two are concrete, and two structs alike rather than one enum of the kinds,
/// whose copies and destruction through its value witnesses cost about 170 instructions a row
/// more. Each binds as that conformance does: NULL for nil, else the value's own binding.
public struct NullableText: StatementBinding {
    @usableFromInline let value: String?

    @inlinable
    public init(_ value: String?) { self.value = value }

    @inlinable
    public func bind(to sqliteStatement: SQLiteStatement, at index: CInt) -> CInt {
        guard let value else { return StatementSteps.bindNull(sqliteStatement, at: index) }
        return value.bind(to: sqliteStatement, at: index)
    }
}

/// An integer that may be NULL (see `NullableText`).
public struct NullableInteger: StatementBinding {
    @usableFromInline let value: Int64?

    @inlinable
    public init(_ value: Int64?) { self.value = value }

    @inlinable
    public func bind(to sqliteStatement: SQLiteStatement, at index: CInt) -> CInt {
        guard let value else { return StatementSteps.bindNull(sqliteStatement, at: index) }
        return value.bind(to: sqliteStatement, at: index)
    }
}
