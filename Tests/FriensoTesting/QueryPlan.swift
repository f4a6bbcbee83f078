public import GRDB

/// SQLite's plan for `sql`: the `detail` of each step `EXPLAIN QUERY PLAN` gives, in order
/// (`SEARCH t USING INDEX …`, `SCAN t`, `USE TEMP B-TREE FOR ORDER BY`).
public func queryPlan(_ db: Database, _ sql: String, _ arguments: StatementArguments = StatementArguments()) throws -> [String] {
    try Row.fetchAll(db, sql: "EXPLAIN QUERY PLAN " + sql, arguments: arguments).map { $0["detail"] as String }
}
