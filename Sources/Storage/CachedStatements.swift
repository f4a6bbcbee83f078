public import GRDB

// Statements compiled once per connection and kept (GRDB's statement cache), for the SQL a
// service runs on every request. `db.execute(sql:)` and `Row.fetchAll(db, sql:)` compile the
// text each time, and GRDB compiles it under its statement authorizer: in alerts under load that
// was a quarter of the process's CPU (`docs/benchmarks.md`). Only for SQL whose text is fixed or
// takes a few shapes: text built from a variable number of placeholders stays uncached, so the
// cache stays bounded.

extension Database {
    /// Executes one statement from the connection's statement cache.
    public func run(sql: String, arguments: StatementArguments = StatementArguments()) throws {
        try cachedStatement(sql: sql).execute(arguments: arguments)
    }
}

extension Row {
    public static func fetchAll(_ db: Database, cached sql: String, arguments: StatementArguments = StatementArguments()) throws -> [Row] {
        try fetchAll(db.cachedStatement(sql: sql), arguments: arguments)
    }

    public static func fetchOne(_ db: Database, cached sql: String, arguments: StatementArguments = StatementArguments()) throws -> Row? {
        try fetchOne(db.cachedStatement(sql: sql), arguments: arguments)
    }

    public static func fetchCursor(_ db: Database, cached sql: String, arguments: StatementArguments = StatementArguments()) throws -> RowCursor {
        try fetchCursor(db.cachedStatement(sql: sql), arguments: arguments)
    }
}

extension Row {
    /// The first row made into a value by `decode`, which reads it where the statement holds it.
    /// `fetchOne(_:cached:arguments:)` copies the row first (GRDB's `ArrayRowImpl`: every column
    /// made a `DatabaseValue` in an array of its own), and a copied row's columns are decoded
    /// through `DatabaseValue` and generic code that looks `T?`'s metadata up in the runtime's
    /// cache: about 570 instructions a column (`docs/benchmarks.md`, issue 16, item 116). Read in
    /// place, a column is one `sqlite3_column_*` call. `decode` must not keep the row: it is
    /// valid only during the call. Inlinable so that it is specialized in the caller's module.
    @inlinable
    public static func fetchOne<T>(_ db: Database, cached sql: String, arguments: StatementArguments = StatementArguments(),
                                   as decode: (Row) throws -> T) throws -> T? {
        let rows = try fetchCursor(db.cachedStatement(sql: sql), arguments: arguments)
        return try withExtendedLifetime(rows) { rows in try rows.next().map(decode) }
    }

    /// Every row made into a value by `decode`, each read where the statement holds it (see
    /// `fetchOne(_:cached:arguments:as:)`).
    @inlinable
    public static func fetchAll<T>(_ db: Database, cached sql: String, arguments: StatementArguments = StatementArguments(),
                                   as decode: (Row) throws -> T) throws -> [T] {
        let rows = try fetchCursor(db.cachedStatement(sql: sql), arguments: arguments)
        var values: [T] = []
        try withExtendedLifetime(rows) { rows in
            while let row = try rows.next() { values.append(try decode(row)) }
        }
        return values
    }
}

extension DatabaseValueConvertible where Self: StatementColumnConvertible {
    public static func fetchAll(_ db: Database, cached sql: String, arguments: StatementArguments = StatementArguments()) throws -> [Self] {
        try fetchAll(db.cachedStatement(sql: sql), arguments: arguments)
    }

    public static func fetchOne(_ db: Database, cached sql: String, arguments: StatementArguments = StatementArguments()) throws -> Self? {
        try fetchOne(db.cachedStatement(sql: sql), arguments: arguments)
    }
}
