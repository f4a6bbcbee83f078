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

extension DatabaseValueConvertible where Self: StatementColumnConvertible {
    public static func fetchAll(_ db: Database, cached sql: String, arguments: StatementArguments = StatementArguments()) throws -> [Self] {
        try fetchAll(db.cachedStatement(sql: sql), arguments: arguments)
    }

    public static func fetchOne(_ db: Database, cached sql: String, arguments: StatementArguments = StatementArguments()) throws -> Self? {
        try fetchOne(db.cachedStatement(sql: sql), arguments: arguments)
    }
}
