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
    /// The first row made into a value by `decode`, which reads it where the statement holds it
    /// (`CurrentRow`). GRDB's `fetchOne(_:cached:arguments:)` copies the row first (every column
    /// made a `DatabaseValue` in an array of its own), and a copied row's columns are decoded
    /// through `DatabaseValue` and generic code that looks `T?`'s metadata up in the runtime's
    /// cache: about 570 instructions a column (`docs/benchmarks.md`, issue 16, item 116). Read in
    /// place, a column is one `sqlite3_column_*` call, and no `Row` is made (item 117). `decode`
    /// must not keep the row: it is valid only during the call. Inlinable so that it is
    /// specialized in the caller's module.
    @inlinable
    public static func fetchOne<T>(_ db: Database, cached sql: String, arguments: StatementArguments,
                                   as decode: (CurrentRow) throws -> T) throws -> T? {
        let statement = try db.cachedStatement(sql: sql)
        try statement.setArguments(arguments) // resets, checks and binds, as GRDB's cursors do
        return try first(of: statement, decode)
    }

    /// `fetchOne(_:cached:arguments:as:)` with `values` bound to the statement's parameters in
    /// order, without a `StatementArguments` (an array of existentials, each value made a
    /// `DatabaseValue` and checked against the statement first: item 117).
    @inlinable
    public static func fetchOne<T, each Value: StatementBinding>(_ db: Database, cached sql: String, binding values: repeat each Value,
                                                                as decode: (CurrentRow) throws -> T) throws -> T? {
        let statement = try db.cachedStatement(sql: sql)
        try StatementSteps.bind(statement, repeat each values)
        return try first(of: statement, decode)
    }

    /// Every row made into a value by `decode`, each read where the statement holds it (see
    /// `fetchOne(_:cached:arguments:as:)`).
    @inlinable
    public static func fetchAll<T>(_ db: Database, cached sql: String, arguments: StatementArguments,
                                   as decode: (CurrentRow) throws -> T) throws -> [T] {
        let statement = try db.cachedStatement(sql: sql)
        try statement.setArguments(arguments)
        return try all(of: statement, decode)
    }

    /// `fetchAll(_:cached:arguments:as:)` with `values` bound by position (see
    /// `fetchOne(_:cached:binding:as:)`).
    @inlinable
    public static func fetchAll<T, each Value: StatementBinding>(_ db: Database, cached sql: String, binding values: repeat each Value,
                                                                as decode: (CurrentRow) throws -> T) throws -> [T] {
        let statement = try db.cachedStatement(sql: sql)
        try StatementSteps.bind(statement, repeat each values)
        return try all(of: statement, decode)
    }

    /// `fetchAll(_:cached:arguments:as:)` for SQL that is compiled for this call only (text built
    /// with a variable number of placeholders, which would fill the statement cache).
    @inlinable
    public static func fetchAll<T>(_ db: Database, sql: String, arguments: StatementArguments = StatementArguments(),
                                   as decode: (CurrentRow) throws -> T) throws -> [T] {
        let statement = try db.makeStatement(sql: sql)
        try statement.setArguments(arguments)
        return try all(of: statement, decode)
    }

    /// Every row through `body`, each read where the statement holds it and none kept: for a
    /// table read whole (at start-up) or in pages, where `fetchAll` would hold every value at
    /// once. A throw from `body` stops the read with its error.
    @inlinable
    public static func forEach(_ db: Database, cached sql: String, arguments: StatementArguments = StatementArguments(),
                               _ body: (CurrentRow) throws -> Void) throws {
        let statement = try db.cachedStatement(sql: sql)
        try statement.setArguments(arguments)
        try each(of: statement, body)
    }

    /// The bound `statement`'s first row through `decode`; the statement reset after it.
    @inlinable
    static func first<T>(of statement: Statement, _ decode: (CurrentRow) throws -> T) throws -> T? {
        defer { StatementSteps.finish(statement) }
        guard try StatementSteps.step(statement) else { return nil }
        return try decode(CurrentRow(statement.sqliteStatement))
    }

    /// The bound `statement`'s rows through `decode`; the statement reset after them.
    @inlinable
    static func all<T>(of statement: Statement, _ decode: (CurrentRow) throws -> T) throws -> [T] {
        var values: [T] = []
        try each(of: statement) { values.append(try decode($0)) }
        return values
    }

    /// The bound `statement`'s rows, each through `body`; the statement reset after them.
    @inlinable
    static func each(of statement: Statement, _ body: (CurrentRow) throws -> Void) throws {
        defer { StatementSteps.finish(statement) }
        while try StatementSteps.step(statement) {
            try body(CurrentRow(statement.sqliteStatement))
        }
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
