public import PostgresNIO
public import Logging
import Synchronization

extension PostgresConnection {
    /// Runs `query` as a prepared statement: PostgreSQL parses, analyses and plans its text once
    /// per connection, and every later run only binds and executes (a generic plan, once the
    /// server finds it no worse than planning each time). `query` runs each statement from its
    /// text: on the stores' paths that was about half of the server's time per statement
    /// (`docs/benchmarks.md`, issue 16, item 126).
    ///
    /// For statements whose text never changes (binds only; `unescaped:` parts that are
    /// constants): every distinct text stays prepared on every connection that ran it.
    ///
    /// postgres-nio prepares statements of a type (`PostgresPreparedStatement`: its name and SQL
    /// are static). Rather than a type per statement, `QueryStatement` takes them from a task-local
    /// value bound around the call: `execute` reads them in the calling task as it starts (the test
    /// `PostgresStorageTests` fails if a version of the library stopped doing so). With
    /// `?prepared_statements=off` in the database's URL, `query` runs it.
    @discardableResult
    public func prepared(_ query: PostgresQuery, logger: Logger, file: String = #fileID, line: Int = #line) async throws
        -> AsyncThrowingMapSequence<PostgresRowSequence, PostgresRow> {
        guard QueryStatement.prepares else {
            return try await self.query(query, logger: logger, file: file, line: line).map { (row: PostgresRow) async throws -> PostgresRow in row }
        }
        let text = QueryStatement.Text(name: QueryStatement.names.name(for: query.sql), sql: query.sql)
        do {
            return try await QueryStatement.$text.withValue(text) {
                try await execute(QueryStatement(bindings: query.binds), logger: logger, file: file, line: line)
            }
        } catch let error as PSQLError where error.serverInfo?[.sqlState] == Self.inFailedTransaction {
            // A statement first run inside a transaction that had already failed was not
            // prepared, and postgres-nio keeps that failure as the statement's on this connection:
            // every later run of it here would fail the same way. The connection goes (the pool
            // opens another); the transaction was lost anyway. Closed before this returns, so the
            // caller's transaction sees a closed connection instead of writing its ROLLBACK there.
            try? await close()
            throw error
        }
    }

    /// SQLSTATE 25P02: "current transaction is aborted, commands ignored until end of transaction block".
    static let inFailedTransaction = "25P02"
}

/// A `PostgresQuery` as postgres-nio's prepared statement (see `PostgresConnection.prepared`).
struct QueryStatement: PostgresPreparedStatement {
    struct Text: Sendable {
        var name: String
        var sql: String
    }

    /// Whether `PostgresConnection.prepared` prepares: the database's setting
    /// (`PostgresSettings.preparedStatements`), bound around every way into it.
    @TaskLocal static var prepares = true
    /// The statement being run by this task (`PostgresConnection.prepared` binds it).
    @TaskLocal static var text = Text(name: "", sql: "")
    /// Every text's name, the same on every connection of the process.
    static let names = StatementNames()

    static var name: String { text.name }
    static var sql: String { text.sql }

    let bindings: PostgresBindings

    func makeBindings() -> PostgresBindings { bindings }
    func decodeRow(_ row: PostgresRow) -> PostgresRow { row }
}

/// Names for statement texts: `frienso_1`, `frienso_2`, … in the order this process first ran
/// them. Numbered rather than hashed: two texts never share a name.
final class StatementNames: Sendable {
    private let names = Mutex<[String: String]>([:])

    func name(for sql: String) -> String {
        names.withLock { names in
            if let name = names[sql] { return name }
            let name = "frienso_\(names.count + 1)"
            names[sql] = name
            return name
        }
    }
}
