import Foundation
import GRDB
import Storage
import Testing

/// `Row.fetchOne(_:cached:arguments:as:)` and `fetchAll(…as:)`: rows decoded where the statement
/// holds them (issue 16, item 116) give what the copied rows of GRDB's `fetchOne`/`fetchAll` give,
/// by column index and by name, NULLs and every type included, and leave the cached statement
/// ready for its next use, also after a `fetchOne` that left rows unread.
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
        init(row: Row) {
            id = row[0]
            i = row["i"]
            s = row[2]
            d = row["d"]
            b = (row["b"] as Data?).map { [UInt8]($0) }
            n = row[5]
        }
    }

    @Test func inPlace_decodesAsCopiedRowsDo() throws {
        let queue = try open()
        try queue.read { db in
            for from in 0...4 {
                let copied = try Row.fetchAll(db, sql: Self.select, arguments: [from]).map(Record.init)
                #expect(try Row.fetchAll(db, cached: Self.select, arguments: [from], as: Record.init) == copied)
                #expect(try Row.fetchOne(db, cached: Self.select, arguments: [from], as: Record.init) == copied.first)
            }
        }
    }

    /// The first `fetchOne` leaves two rows unread; the cached statement still starts over with
    /// new arguments, and a write to the table goes through after it.
    @Test func aFetchOneLeavingRowsUnread_leavesTheStatementReusable() throws {
        let queue = try open()
        try queue.write { db in
            let first = try Row.fetchOne(db, cached: Self.select, arguments: [1]) { $0[0] as Int64 }
            let second = try Row.fetchOne(db, cached: Self.select, arguments: [2]) { $0[0] as Int64 }
            #expect(first == 1 && second == 2)
            try db.execute(sql: "DELETE FROM t WHERE id = 2")
            let left = try Row.fetchAll(db, cached: Self.select, arguments: [0]) { $0[0] as Int64 }
            let none = try Row.fetchOne(db, cached: Self.select, arguments: [4]) { $0[0] as Int64 }
            #expect(left == [1, 3] && none == nil)
        }
    }

    /// A decode that throws stops the fetch with its error; the statement serves the next.
    @Test func aThrowingDecode_throws_andTheStatementServesTheNext() throws {
        struct Refused: Error {}
        let queue = try open()
        try queue.read { db in
            #expect(throws: Refused.self) {
                _ = try Row.fetchAll(db, cached: Self.select, arguments: [0]) { row -> Int64 in
                    if row[0] as Int64 == 2 { throw Refused() }
                    return row[0]
                }
            }
            let all = try Row.fetchAll(db, cached: Self.select, arguments: [0]) { $0[0] as Int64 }
            #expect(all == [1, 2, 3])
        }
    }
}
