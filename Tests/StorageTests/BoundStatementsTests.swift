import GRDB
import Storage
import Testing

/// `Database.run(sql:binding:)`: values bound by position straight to SQLite store exactly what
/// GRDB's own arguments store, and a statement that fails or is given the wrong values throws and
/// leaves its cached statement usable.
@Suite("storage: statements bound by position")
struct BoundStatementsTests {
    static let insert = "INSERT INTO t (i, u, d, s, n, b) VALUES (?, ?, ?, ?, ?, ?)"

    func open() throws -> DatabaseQueue {
        let queue = try DatabaseQueue()
        try queue.write { db in
            try db.execute(sql: "CREATE TABLE t (id INTEGER PRIMARY KEY, i INTEGER, u INTEGER UNIQUE, d REAL, s TEXT, n INTEGER, b INTEGER)")
        }
        return queue
    }

    /// Every column read back with its SQLite type and value.
    func rows(_ queue: DatabaseQueue) throws -> [String] {
        try queue.read { db in
            try Row.fetchAll(db, sql: """
                SELECT typeof(i), i, typeof(u), u, typeof(d), d, typeof(s), s, typeof(n), n, typeof(b), b FROM t ORDER BY id
                """).map { $0.description }
        }
    }

    @Test func boundValues_storeWhatGRDBsArgumentsStore() throws {
        let bound = try open(), argued = try open()
        let values: [(Int64, UInt64, Double, String?, Int?, Bool)] = [
            (-7, 1, 0.1, "", nil, true), (Int64.max, UInt64(Int64.max), -180.000001, "ünïcode ✓", 1, false),
            (Int64.min, 0, .infinity, nil, 0, true), (0, 42, 1e-300, "a\u{0}b", -1, false),
        ]
        try bound.write { db in
            for v in values { try db.run(sql: Self.insert, binding: v.0, v.1, v.2, v.3, v.4, v.5) }
        }
        try argued.write { db in
            for v in values { try db.execute(sql: Self.insert, arguments: [v.0, v.1, v.2, v.3, v.4, v.5]) }
        }
        #expect(try rows(bound) == rows(argued))
        #expect(try rows(bound).count == values.count)
    }

    /// `NullableText` and `NullableInteger` (item 144) store what a bare optional stores: NULL for
    /// nil, the value otherwise, with its type.
    @Test func nullableWrappers_storeWhatABareOptionalStores() throws {
        let wrapped = try open(), bare = try open()
        let values: [(String?, Int64?)] = [("", nil), (nil, 0), ("ünïcode ✓", Int64.min), (nil, nil), ("a\u{0}b", Int64.max)]
        try wrapped.write { db in
            for (i, v) in values.enumerated() {
                try db.run(sql: Self.insert, binding: Int64(i), UInt64(i), 0.5, NullableText(v.0), NullableInteger(v.1), true)
            }
        }
        try bare.write { db in
            for (i, v) in values.enumerated() { try db.run(sql: Self.insert, binding: Int64(i), UInt64(i), 0.5, v.0, v.1, true) }
        }
        #expect(try rows(wrapped) == rows(bare))
        #expect(try rows(wrapped).filter { $0.contains("typeof(s):\"null\"") }.count == 2)
    }

    @Test func aFailingStatement_throwsItsError_andRunsAgainAfterwards() throws {
        let queue = try open()
        try queue.write { db in
            try db.run(sql: Self.insert, binding: 1 as Int64, 5 as UInt64, 1.0, "one", 1, true)
            // The same unique value: SQLite's constraint error, with its code.
            let error = #expect(throws: DatabaseError.self) {
                try db.run(sql: Self.insert, binding: 2 as Int64, 5 as UInt64, 2.0, "two", 2, true)
            }
            #expect(error?.resultCode == .SQLITE_CONSTRAINT)
            // Too few values: refused before any step (no earlier value may stay bound).
            let short = #expect(throws: DatabaseError.self) {
                try db.run(sql: Self.insert, binding: 3 as Int64, 6 as UInt64, 3.0)
            }
            #expect(short?.resultCode == .SQLITE_MISUSE)
            // The cached statement works again, here and through GRDB.
            try db.run(sql: Self.insert, binding: 4 as Int64, 7 as UInt64, 4.0, "four", 4, false)
            try db.execute(sql: Self.insert, arguments: [5, 8, 5.0, "five", 5, true])
        }
        #expect(try queue.read { db in try Int.fetchAll(db, sql: "SELECT i FROM t ORDER BY id") } == [1, 4, 5])
    }

    /// The form for a loop (`run(_:binding:)`, one cached statement for many rows): the same rows,
    /// the same errors with the statement's SQL, and the statement usable after a failure.
    @Test func aStatementTakenOnce_runsForManyRows_andNamesItsSQLWhenItFails() throws {
        let once = try open(), each = try open()
        try once.write { db in
            let insert = try db.cachedStatement(sql: Self.insert)
            for n in 1...3 as ClosedRange<Int64> { try db.run(insert, binding: n, UInt64(n), Double(n), "row \(n)", Int(n), n % 2 == 0) }
            let error = #expect(throws: DatabaseError.self) {
                try db.run(insert, binding: 9 as Int64, 2 as UInt64, 9.0, "again", 9, true) // u = 2 is taken
            }
            #expect(error?.resultCode == .SQLITE_CONSTRAINT)
            #expect(error?.sql == Self.insert)
            try db.run(insert, binding: 4 as Int64, 4 as UInt64, 4.0, "row 4", 4, true)
        }
        try each.write { db in
            for n in 1...4 as ClosedRange<Int64> { try db.run(sql: Self.insert, binding: n, UInt64(n), Double(n), "row \(n)", Int(n), n % 2 == 0) }
        }
        #expect(try rows(once) == rows(each))
        try once.writeWithoutTransaction { db in
            let insert = try db.cachedStatement(sql: Self.insert)
            let outside = #expect(throws: DatabaseError.self) { try db.run(insert, binding: 5 as Int64, 5 as UInt64, 5.0, "x", 5, true) }
            #expect(outside?.resultCode == .SQLITE_MISUSE)
        }
        #expect(try rows(once).count == 4)
    }

    /// `run(_:rows:binding:)`: one statement for several rows stores what a statement a row
    /// stores; too few or too many rows for its parameters are refused before any step, a row
    /// SQLite refuses fails the whole statement (none of its rows stays), and it runs again.
    @Test func aStatementOfManyRows_storesWhatAStatementARowStores_andRefusesTheWrongCount() throws {
        let values: [(Int64, UInt64, Double, String?, Int?, Bool)] = [
            (-7, 1, 0.1, "", nil, true), (Int64.max, UInt64(Int64.max), -180.000001, "ünïcode ✓", 1, false),
            (Int64.min, 0, .infinity, nil, 0, true),
        ]
        let three = "INSERT INTO t (i, u, d, s, n, b) VALUES " + Array(repeating: "(?, ?, ?, ?, ?, ?)", count: 3).joined(separator: ", ")
        let many = try open(), each = try open()
        try many.write { db in
            let statement = try db.cachedStatement(sql: three)
            try db.run(statement, rows: values) { $0 }
            for wrong in [Array(values.prefix(2)), values + values.prefix(1)] {
                let error = #expect(throws: DatabaseError.self) { try db.run(statement, rows: wrong) { $0 } }
                #expect(error?.resultCode == .SQLITE_MISUSE)
            }
            // u = 1 is taken by the first statement: SQLite's error, and none of these rows stays.
            let taken: [(Int64, UInt64, Double, String?, Int?, Bool)] = [(1, 11, 1, "a", 1, true), (2, 12, 2, "b", 2, true), (3, 1, 3, "c", 3, true)]
            let error = #expect(throws: DatabaseError.self) { try db.run(statement, rows: taken) { $0 } }
            #expect(error?.resultCode == .SQLITE_CONSTRAINT)
            #expect(try Int.fetchOne(db, sql: "SELECT count(*) FROM t") == 3)
        }
        try each.write { db in
            for v in values { try db.run(sql: Self.insert, binding: v.0, v.1, v.2, v.3, v.4, v.5) }
        }
        #expect(try rows(many) == rows(each))
        many.writeWithoutTransaction { db in
            let error = #expect(throws: DatabaseError.self) { try db.run(db.cachedStatement(sql: three), rows: values) { $0 } }
            #expect(error?.resultCode == .SQLITE_MISUSE)
        }
    }

    @Test func outsideATransaction_itRefusesToRun() throws {
        let queue = try open()
        queue.writeWithoutTransaction { db in
            let error = #expect(throws: DatabaseError.self) {
                try db.run(sql: Self.insert, binding: 1 as Int64, 1 as UInt64, 1.0, "x", 1, true)
            }
            #expect(error?.resultCode == .SQLITE_MISUSE)
        }
        #expect(try rows(queue).isEmpty)
    }
}
