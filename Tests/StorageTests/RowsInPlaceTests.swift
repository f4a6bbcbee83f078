import Foundation
import GRDB
import Storage
import Testing

/// `Row.fetchOne(_:cached:arguments:as:)`, `fetchAll(…as:)` and `forEach`: rows decoded where the statement
/// holds them (issue 16, items 116–117, `CurrentRow`) give what the copied rows of GRDB's
/// `fetchOne`/`fetchAll` give, by column index and by name, NULLs and every type included, with
/// arguments or values bound by position, and leave the cached statement ready for its next use,
/// also after a `fetchOne` that left rows unread or a step that failed.
@Suite("storage: rows decoded in place")
struct RowsInPlaceTests {
    static let select = "SELECT id, i, s, d, b, n FROM t WHERE id >= ? ORDER BY id"

    func open() throws -> DatabaseQueue {
        let queue = try DatabaseQueue()
        try queue.write { db in
            try db.execute(sql: "CREATE TABLE t (id INTEGER PRIMARY KEY, i INTEGER, s TEXT, d REAL, b BLOB, n INTEGER)")
            try db.execute(sql: "INSERT INTO t VALUES (1, -7, 'ünï', 0.5, x'00ff', NULL), (2, 9223372036854775807, '', -1e300, x'', 3), (3, 0, NULL, 0, NULL, NULL)")
        }
        return queue
    }

    struct Record: Equatable {
        var id: Int64, i: Int64, s: String?, d: Double, b: [UInt8]?, n: Int?
    }

    @Test func inPlace_decodesAsCopiedRowsDo() throws {
        let queue = try open()
        try queue.read { db in
            for from in 0...4 {
                let copied = try Row.fetchAll(db, sql: Self.select, arguments: [from]).map(Record.init)
                #expect(try Row.fetchAll(db, cached: Self.select, arguments: [from], as: Record.init(row:)) == copied)
                #expect(try Row.fetchOne(db, cached: Self.select, arguments: [from], as: Record.init(row:)) == copied.first)
                #expect(try Row.fetchAll(db, cached: Self.select, binding: from, as: Record.init(row:)) == copied)
                #expect(try Row.fetchOne(db, cached: Self.select, binding: Int64(from), as: Record.init(row:)) == copied.first)
                var each: [Record] = []
                try Row.forEach(db, cached: Self.select, arguments: [from]) { each.append(try Record(row: $0)) }
                #expect(each == copied)
                #expect(try Row.fetchAll(db, sql: Self.select, arguments: [from], as: Record.init(row:)) == copied)
            }
        }
    }

    /// A column missing by name is nil for an optional type; no argument, numbered parameters
    /// (`?1` twice counts once) and optional values bind as GRDB binds them.
    @Test func names_numberedParameters_andOptionalValues() throws {
        let queue = try open()
        try queue.read { db in
            let missing = try Row.fetchOne(db, cached: "SELECT id FROM t WHERE id = 1") { row -> Int64? in try row["nope"] }
            #expect(missing == .some(nil))
            let count = try Row.fetchOne(db, cached: "SELECT count(*) FROM t WHERE id >= ?1 OR n = ?1", binding: 2) { try $0[0] as Int }
            #expect(count == 2)
            let none: Int64? = nil
            let nulls = try Row.fetchAll(db, cached: "SELECT id FROM t WHERE n IS ? OR s IS ? ORDER BY id", binding: none, Optional<String>.none) { try $0[0] as Int64 }
            #expect(nulls == [1, 3])
            let text = try Row.fetchOne(db, cached: "SELECT ?, ?", binding: "ünï", Data([0, 1])) { row in (try row[0] as String, try row[1] as Data) }
            #expect(text?.0 == "ünï" && text?.1 == Data([0, 1]))
        }
    }

    /// Too few or too many values for the parameters: SQLITE_MISUSE, nothing read, and the
    /// statement serves the next call.
    @Test func aWrongNumberOfValues_isMisuse_andTheStatementServesTheNext() throws {
        let queue = try open()
        try queue.read { db in
            for values in [[], [1, 2]] as [[Int]] {
                do {
                    _ = try values.count == 0
                        ? Row.fetchOne(db, cached: Self.select) { try $0[0] as Int64 }
                        : Row.fetchOne(db, cached: Self.select, binding: values[0], values[1]) { try $0[0] as Int64 }
                    Issue.record("\(values.count) values were bound for one parameter")
                } catch let error as DatabaseError {
                    #expect(error.resultCode == .SQLITE_MISUSE, "\(error)")
                }
            }
            #expect(try Row.fetchOne(db, cached: Self.select, binding: 3) { try $0[0] as Int64 } == 3)
        }
    }

    /// A step that fails (malformed JSON in the third row) throws SQLite's error; the statement
    /// serves the next call.
    @Test func aFailedStep_throwsSQLitesError_andTheStatementServesTheNext() throws {
        let queue = try open()
        let sql = "SELECT id, CASE WHEN id = ? THEN json(s) ELSE '' END FROM t ORDER BY id DESC"
        try queue.read { db in
            var read: [Int64] = []
            do {
                _ = try Row.fetchAll(db, cached: sql, binding: 1) { row -> Int64 in read.append(try row[0]); return try row[0] }
                Issue.record("json() of text that is not JSON did not fail")
            } catch let error as DatabaseError {
                #expect(error.resultCode == .SQLITE_ERROR && error.message?.contains("JSON") == true, "\(error)")
            }
            #expect(read == [3, 2])
            let ok = try Row.fetchAll(db, cached: sql, binding: 0) { try $0[0] as Int64 }
            #expect(ok == [3, 2, 1])
        }
    }

    /// The first `fetchOne` leaves two rows unread; the cached statement still starts over with
    /// new arguments, and a write to the table goes through after it.
    @Test func aFetchOneLeavingRowsUnread_leavesTheStatementReusable() throws {
        let queue = try open()
        try queue.write { db in
            let first = try Row.fetchOne(db, cached: Self.select, arguments: [1]) { try $0[0] as Int64 }
            let second = try Row.fetchOne(db, cached: Self.select, arguments: [2]) { try $0[0] as Int64 }
            #expect(first == 1 && second == 2)
            try db.execute(sql: "DELETE FROM t WHERE id = 2")
            let left = try Row.fetchAll(db, cached: Self.select, arguments: [0]) { try $0[0] as Int64 }
            let none = try Row.fetchOne(db, cached: Self.select, arguments: [4]) { try $0[0] as Int64 }
            #expect(left == [1, 3] && none == nil)
            // Reset after its first row: a statement left on a row would hold the table
            // ("database table is locked"), and dropping it would fail.
            _ = try Row.fetchOne(db, cached: Self.select, binding: 1) { try $0[0] as Int64 }
            try db.execute(sql: "DROP TABLE t")
        }
    }

    /// Where GRDB's `Row` stops the process (a NULL read as a non-optional type, a missing column,
    /// an index out of range), `CurrentRow` throws `StoreInvariant`, naming the statement and the
    /// column but no stored value; the statement serves the next read, and a write whose read
    /// threw rolls back whole.
    @Test func anUndecodableColumn_throwsStoreInvariant_andNothingIsKeptHalfDone() throws {
        let queue = try open()
        try queue.read { db in
            let failures: [(String, (CurrentRow) throws -> Int64)] = [
                ("could not decode Int64 from NULL in column n of", { try $0[5] }),
                ("could not decode Int64 from NULL in column n of", { try $0["N"] }),
                ("no column nope in", { try $0["nope"] }),
                ("row index 6 out of range (6 columns) in", { try $0[6] }),
                ("row index -1 out of range (6 columns) in", { try $0[-1] }),
            ]
            for (message, decode) in failures {
                do {
                    _ = try Row.fetchAll(db, cached: Self.select, binding: 0, as: decode)
                    Issue.record("\(message) did not throw")
                } catch let error as StoreInvariant {
                    #expect(error.description.hasPrefix(message) && error.description.hasSuffix(Self.select), "\(error)")
                    #expect(!error.description.contains("ünï") && !error.description.contains("-7"), "\(error)")
                }
                #expect(try Row.fetchAll(db, cached: Self.select, binding: 0) { try $0[0] as Int64 } == [1, 2, 3])
            }
            var read: [Int64] = []
            #expect(throws: StoreInvariant.self) {
                try Row.forEach(db, cached: Self.select, arguments: [0]) { read.append(try $0[0]); _ = try $0[5] as Int64 }
            }
            #expect(read == [1])
            #expect(try Row.fetchAll(db, cached: Self.select, binding: 0) { try $0[0] as Int64 } == [1, 2, 3])
            // The same column read as an optional type is nil, as on `Row`.
            #expect(try Row.fetchAll(db, cached: Self.select, binding: 0) { try $0["n"] as Int64? } == [nil, 3, nil])
        }
        #expect(throws: StoreInvariant.self) {
            try queue.write { db in
                try db.execute(sql: "INSERT INTO t (id, i, d) VALUES (4, 4, 4)")
                _ = try Row.fetchOne(db, cached: Self.select, binding: 4) { try $0["s"] as String }
            }
        }
        #expect(try queue.read { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM t") } == 3)
    }

    /// A decode that throws stops the fetch with its error; the statement serves the next.
    @Test func aThrowingDecode_throws_andTheStatementServesTheNext() throws {
        struct Refused: Error {}
        let queue = try open()
        try queue.read { db in
            #expect(throws: Refused.self) {
                _ = try Row.fetchAll(db, cached: Self.select, arguments: [0]) { row -> Int64 in
                    if try row[0] as Int64 == 2 { throw Refused() }
                    return try row[0]
                }
            }
            let all = try Row.fetchAll(db, cached: Self.select, arguments: [0]) { try $0[0] as Int64 }
            #expect(all == [1, 2, 3])
        }
    }
}

extension RowsInPlaceTests.Record {
    /// From a copied row, as GRDB decodes it, every column by name.
    init(row: Row) {
        self.init(id: row["id"], i: row["i"], s: row["s"], d: row["d"], b: (row["b"] as Data?).map { [UInt8]($0) }, n: row["n"])
    }

    /// In place, by index and by names in another case than the statement's, as `Row` allows.
    init(row: CurrentRow) throws {
        id = try row[0]
        i = try row["I"]
        s = try row[2]
        d = try row["d"]
        b = (try row["B"] as Data?).map { [UInt8]($0) }
        n = try row[5]
    }
}
