public import GRDB
import GRDBSQLite

/// The row a statement is on, read where SQLite holds it: what a decoder passed to
/// `Row.fetchOne(_:cached:arguments:as:)` or `Row.fetchAll(…as:)` gets. Subscripts by column
/// index or name, as on GRDB's `Row`; an optional type gives nil for a NULL column or a missing
/// one. Where GRDB's `Row` stops the process (a NULL read as a non-optional type, a column
/// that is missing, an index out of range), a subscript here throws `StoreInvariant`: the
/// schemas make such columns NOT NULL and the decoders name columns the statements select, so
/// it is a bug or a damaged database, and the request that met it is answered INTERNAL (the
/// read's transaction rolled back, the statement reset) while the service goes on serving the
/// others.
///
/// Why not GRDB's `Row`: a `Row` over a statement (GRDB's `RowCursor`, which its `fetchOne` and
/// `fetchAll` step through too) builds a dictionary of the statement's column names, each read
/// with `String(cString:)`, lowercased and hashed, every time a cursor is made, whether the
/// decoder reads a column by name or not: about 8,500 instructions a fetch for `accounts`'
/// session and user rows, more than the rest of the read, SQLite's work included
/// (`docs/benchmarks.md`, issue 16, item 117). GRDB has no public way to make a `Row` without it.
/// Here a name is found by comparing it with SQLite's own column names, case-insensitively as
/// `Row` does, only when a decoder asks for one.
///
/// Valid only during the decoder's call: the statement moves on after it.
public struct CurrentRow {
    @usableFromInline let handle: SQLiteStatement

    @usableFromInline init(_ handle: SQLiteStatement) {
        self.handle = handle
    }

    /// The value of the column at `index` (0-based). For an optional type, nil when the column
    /// is NULL.
    /// - Throws: `StoreInvariant` when there is no such column, or when the value cannot be
    ///   `Value` (a NULL for a non-optional type).
    @inlinable
    public subscript<Value: DatabaseValueConvertible & StatementColumnConvertible>(_ index: Int) -> Value {
        get throws {
            guard index >= 0, index < columnCount else { throw outOfRange(index) }
            guard let value = Value.fromStatement(handle, atUncheckedIndex: CInt(index)) else {
                throw undecodable(Value.self, at: index)
            }
            return value
        }
    }

    /// The value of the column named `name` (any case). For an optional type, nil when the
    /// column is NULL or there is no such column.
    /// - Throws: `StoreInvariant` for a non-optional type when there is no such column or its
    ///   value cannot be `Value` (a NULL).
    @inlinable
    public subscript<Value: DatabaseValueConvertible & StatementColumnConvertible>(_ name: String) -> Value {
        get throws {
            guard let index = index(of: name) else {
                guard let absent = Value.fromMissingColumn() else { throw missing(name) }
                return absent
            }
            guard let value = Value.fromStatement(handle, atUncheckedIndex: CInt(index)) else {
                throw undecodable(Value.self, at: index)
            }
            return value
        }
    }

    @usableFromInline
    var columnCount: Int { Int(sqlite3_column_count(handle)) }

    /// The index of the column named `name`, compared as `Row` compares (ASCII letters in any
    /// case); the leftmost when several have it.
    @usableFromInline
    func index(of name: String) -> Int? {
        var name = name
        return name.withUTF8 { wanted -> Int? in
            for column in 0..<sqlite3_column_count(handle) {
                guard let own = sqlite3_column_name(handle, column) else { continue }
                if Self.sameName(own, wanted) { return Int(column) }
            }
            return nil
        }
    }

    /// Whether SQLite's NUL-terminated `own` is `wanted`, ASCII letters compared in any case.
    private static func sameName(_ own: UnsafePointer<CChar>, _ wanted: UnsafeBufferPointer<UInt8>) -> Bool {
        for (offset, byte) in wanted.enumerated() {
            let other = UInt8(bitPattern: own[offset])
            guard other != 0, lowered(other) == lowered(byte) else { return false }
        }
        return own[wanted.count] == 0
    }

    private static func lowered(_ byte: UInt8) -> UInt8 {
        byte >= 65 && byte <= 90 ? byte | 0x20 : byte
    }

    // The errors name the statement, the column and the stored value's SQLite type, never the
    // value: the log that gets them must not get a row's contents (a token's hash, a place).

    @usableFromInline
    func outOfRange(_ index: Int) -> StoreInvariant {
        StoreInvariant("row index \(index) out of range (\(columnCount) columns) in \(sql)")
    }

    @usableFromInline
    func undecodable(_ type: Any.Type, at index: Int) -> StoreInvariant {
        let name = sqlite3_column_name(handle, CInt(index)).map { String(cString: $0) } ?? "\(index)"
        let stored = switch sqlite3_column_type(handle, CInt(index)) {
        case SQLITE_NULL: "NULL"
        case SQLITE_INTEGER: "an INTEGER"
        case SQLITE_FLOAT: "a REAL"
        case SQLITE_TEXT: "a TEXT"
        default: "a BLOB"
        }
        return StoreInvariant("could not decode \(type) from \(stored) in column \(name) of \(sql)")
    }

    @usableFromInline
    func missing(_ name: String) -> StoreInvariant {
        StoreInvariant("no column \(name) in \(sql)")
    }

    private var sql: String {
        sqlite3_sql(handle).map { String(cString: $0) } ?? "a statement"
    }
}

/// Binding, stepping and resetting a cached statement with `sqlite3_*` calls, for the reads
/// decoded in place (`Row.fetchOne(_:cached:binding:as:)`) and the writes bound by position
/// (`Database.run(sql:binding:)`).
@usableFromInline
enum StatementSteps {
    /// Steps `statement`, whose arguments are bound and which was reset: true on a row, false at
    /// its end. A failure resets the statement (its next use starts clean) and throws SQLite's
    /// code and message.
    ///
    /// Stepped by hand, as `Database.run(sql:binding:)` steps its writes (`BoundStatements.swift`
    /// says what of GRDB's stepping that skips, and why that is safe here: no transaction
    /// observers, no observed regions, no suspension).
    @usableFromInline
    static func step(_ statement: Statement) throws -> Bool {
        let handle = statement.sqliteStatement
        switch sqlite3_step(handle) {
        case SQLITE_ROW: return true
        case SQLITE_DONE: return false
        case let code:
            let message = String(cString: sqlite3_errmsg(sqlite3_db_handle(handle)))
            sqlite3_reset(handle)
            throw DatabaseError(resultCode: ResultCode(rawValue: code), message: message, sql: statement.sql)
        }
    }

    /// Runs `statement` (no parameters, no rows: a transaction's `BEGIN`, `COMMIT`) from its
    /// start to its end, and resets it.
    static func run(_ statement: Statement) throws {
        sqlite3_reset(statement.sqliteStatement)
        while try step(statement) {}
        sqlite3_reset(statement.sqliteStatement)
    }

    /// Binds NULL to parameter `index` (the nil of `NullableText` and `NullableInteger`).
    @usableFromInline
    static func bindNull(_ statement: SQLiteStatement, at index: CInt) -> CInt {
        sqlite3_bind_null(statement, index)
    }

    /// Resets `statement` after its rows were read (all or some): the read's hold on the
    /// database ends now, not at the statement's next use, as GRDB's cursors reset on `deinit`.
    @usableFromInline
    static func finish(_ statement: Statement) {
        sqlite3_reset(statement.sqliteStatement)
    }

    /// Binds `values` to `statement`'s parameters in order, after a reset (as
    /// `Database.run(sql:binding:)` binds): as many values as its highest parameter index.
    /// Inlinable, so that it is specialized where it is called: unspecialized, a pack of values
    /// asks the runtime for its tuple's metadata on every call (`docs/benchmarks.md`, issue 16,
    /// item 135). SQLite is called through the two helpers below.
    /// - Throws: `DatabaseError` (`SQLITE_MISUSE` for a wrong count, SQLite's code for a value it
    ///   refused).
    @inlinable
    static func bind<each Value: StatementBinding>(_ statement: Statement, _ values: repeat each Value) throws {
        let (handle, expected) = startBinding(statement)
        var index: CInt = 0
        var failed: CInt = 0 // SQLITE_OK
        for value in repeat each values {
            index += 1
            if failed == 0, index <= expected { failed = value.bind(to: handle, at: index) }
        }
        if failed != 0 || index != expected { try bindingFailed(statement, code: failed, bound: index, expected: expected) }
    }

    /// Resets `statement` for new bindings. - Returns: its SQLite handle and how many parameters
    /// it has.
    @usableFromInline
    static func startBinding(_ statement: Statement) -> (handle: SQLiteStatement, parameters: CInt) {
        let handle = statement.sqliteStatement
        sqlite3_reset(handle)
        return (handle, sqlite3_bind_parameter_count(handle))
    }

    /// `bind`'s failure: clears what was bound and throws `SQLITE_MISUSE` for a wrong count, or
    /// `code` (a value SQLite refused) with SQLite's message.
    @usableFromInline
    static func bindingFailed(_ statement: Statement, code: CInt, bound: CInt, expected: CInt) throws {
        let handle = statement.sqliteStatement
        let message = bound != expected ? "\(bound) values bound for \(expected) parameters"
            : String(cString: sqlite3_errmsg(sqlite3_db_handle(handle)))
        sqlite3_clear_bindings(handle)
        throw DatabaseError(resultCode: ResultCode(rawValue: bound != expected ? SQLITE_MISUSE : code), message: message, sql: statement.sql)
    }
}
