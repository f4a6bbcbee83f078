/// The statement of an hourly prune on SQLite: rows past their retention, read from the oldest id
/// up to the first row made since the cutoff. Ids grow with time, so the rows before that one
/// are the ones to delete and the few kept from before (still pending, or changed since); without
/// the bound, each prune walked every row kept (alerts' outbox: 452 ms an hour at 4.5M rows, then
/// 7; issue 16, `docs/benchmarks.md` item 157). A row whose clock ran behind an older id's waits
/// for a later prune. `?1` is the cutoff.
public enum Retention {
    /// - Parameters:
    ///   - id: the column ids grow in (`rowid` for a table keyed otherwise).
    ///   - madeAt: when a row was made, in the cutoff's unit.
    ///   - condition: what else a row must meet to go (`status != 1 AND done_ms < ?1`).
    public static func pruneSQL(_ table: String, id: String = "id", madeAt: String, where condition: String) -> String {
        """
        DELETE FROM \(table)
        WHERE \(id) < COALESCE((SELECT \(id) FROM \(table) WHERE \(madeAt) >= ?1 ORDER BY \(id) LIMIT 1), \(Int64.max))
          AND \(condition)
        """
    }
}
