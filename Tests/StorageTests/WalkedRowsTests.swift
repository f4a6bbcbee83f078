import FriensoTesting
import GRDB
@testable import Storage
import Testing

/// `WalkedRows`: a condition no index serves, walked on a snapshot, finished in a later write
/// with the rows made since (issue 16, items 160 and 163).
@Suite("storage: rows walked on a reader, deleted by the writer")
struct WalkedRowsTests {
    /// Events of person 1, as viewer or subject, in a table with AUTOINCREMENT ids.
    static let events = WalkedRows.Search(table: "events", identity: "id", condition: "viewer = ? OR subject = ?")
    /// Copies keyed by text, in a plain rowid table (a deleted last rowid is given again).
    static let copies = WalkedRows.Search(table: "copies", identity: "key", condition: "address = ?")

    func database() throws -> DatabaseQueue {
        let queue = try DatabaseQueue()
        try queue.write { db in
            try db.execute(sql: """
                CREATE TABLE events (id INTEGER PRIMARY KEY AUTOINCREMENT, viewer INTEGER NOT NULL, subject INTEGER NOT NULL);
                CREATE TABLE copies (key TEXT PRIMARY KEY, address TEXT NOT NULL);
                INSERT INTO events (viewer, subject) VALUES (1, 2), (2, 3), (3, 1), (2, 2);
                INSERT INTO copies (key, address) VALUES ('a', 'ana@example.org'), ('b', 'ben@example.org'), ('c', 'cy@example.org');
                """)
        }
        return queue
    }

    @Test func theWalksRows_andThoseMadeSince_areDeleted_othersKept() throws {
        let queue = try database()
        let (events, copies) = try queue.read { db in
            (try WalkedRows.walk(db, Self.events, [1, 1]), try WalkedRows.walk(db, Self.copies, ["ana@example.org"]))
        }
        #expect(events.rowids == [1, 3] && events.last?.identity == "4")
        #expect(copies.rowids == [1] && copies.last?.identity == "c")
        let deleted = try queue.write { db -> Int in
            try db.execute(sql: """
                INSERT INTO events (viewer, subject) VALUES (4, 1), (4, 4);
                INSERT INTO copies (key, address) VALUES ('d', 'ana@example.org'), ('e', 'eve@example.org');
                """)
            return try events.delete(db, Self.events, [1, 1]) + copies.delete(db, Self.copies, ["ana@example.org"])
        }
        #expect(deleted == 5)
        let left = try queue.read { db in
            (try Int64.fetchAll(db, sql: "SELECT id FROM events ORDER BY id"), try String.fetchAll(db, sql: "SELECT key FROM copies ORDER BY key"))
        }
        #expect(left.0 == [2, 4, 6] && left.1 == ["b", "c", "e"])
    }

    /// The snapshot's last copy deleted, a new one takes its rowid: the write walks the table.
    @Test func whenTheLastRowIsGone_theWriteWalksTheTable() throws {
        let queue = try database()
        let copies = try queue.read { db in try WalkedRows.walk(db, Self.copies, ["ana@example.org"]) }
        try queue.write { db in
            try db.execute(sql: "DELETE FROM copies WHERE key = 'c'; INSERT INTO copies (key, address) VALUES ('late', 'ana@example.org')")
            #expect(try Int64.fetchOne(db, sql: "SELECT rowid FROM copies WHERE key = 'late'") == copies.last?.rowid)
            #expect(try !copies.boundHolds(db, Self.copies))
            #expect(try copies.delete(db, Self.copies, ["ana@example.org"]) == 2)
        }
        #expect(try queue.read { db in try String.fetchAll(db, sql: "SELECT key FROM copies ORDER BY key") } == ["b"])
    }

    /// An empty table at the walk: every row since is above rowid 0.
    @Test func anEmptyTable_atTheWalk() throws {
        let queue = try DatabaseQueue()
        try queue.write { db in try db.execute(sql: "CREATE TABLE copies (key TEXT PRIMARY KEY, address TEXT NOT NULL)") }
        let copies = try queue.read { db in try WalkedRows.walk(db, Self.copies, ["ana@example.org"]) }
        #expect(copies.last == nil && copies.rowids.isEmpty)
        let deleted = try queue.write { db -> Int in
            try db.execute(sql: "INSERT INTO copies (key, address) VALUES ('a', 'ana@example.org'), ('b', 'ben@example.org')")
            return try copies.delete(db, Self.copies, ["ana@example.org"])
        }
        #expect(deleted == 1)
    }

    /// `JSONList`: what `json_each` reads back is what was given, quotes, backslashes, control
    /// characters and non-ASCII included, and ids past a `Double`'s 53 bits stay exact.
    @Test func aJSONList_readsBackAsGiven() throws {
        let queue = try DatabaseQueue()
        let strings = ["plain", "quote \" and back\\slash", "tab\tnew\nline\u{1}", "ünïcødé 🙂", ""]
        let ids: [UInt64] = [0, 1, UInt64(Int64.max)]
        let (readStrings, readIDs) = try queue.read { db in
            (try String.fetchAll(db, sql: "SELECT value FROM json_each(?)", arguments: [JSONList.of(strings)]),
             try Int64.fetchAll(db, sql: "SELECT value FROM json_each(?)", arguments: [JSONList.of(ids)]))
        }
        #expect(readStrings == strings)
        #expect(readIDs.map(UInt64.init) == ids)
    }

    /// The write's statements search by rowid, an `OR` condition included (it is bracketed).
    @Test func theWritesStatements_searchByRowid() throws {
        let queue = try database()
        let plans = try queue.read { db in
            [try queryPlan(db, "DELETE FROM events WHERE rowid > ? AND (\(Self.events.condition))", [4, 1, 1]),
             try queryPlan(db, "DELETE FROM events WHERE rowid IN (SELECT value FROM json_each(?))", ["[1,3]"])]
        }
        for steps in plans {
            #expect(!steps.contains { $0.hasPrefix("SCAN events") }, "\(steps)")
        }
    }
}
