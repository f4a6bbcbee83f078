import Foundation
import FriensoTesting
import GRDB
@testable import Storage
import Testing
import Wire
import FriensoProto

/// The SQLite reply store's rows: a save lands on its claim in place, and expired replies are
/// found by rowid, without an index on `created_at` (issue 16, `docs/benchmarks.md` item 66).
@Suite struct ReplyStoreTests {
    private func open(_ dir: TemporaryDirectory, upTo last: String? = nil) throws -> ServiceDatabase {
        var migrator = DatabaseMigrator()
        SQLiteReplyStore.migrate(&migrator)
        let database = try ServiceDatabase.open("\(dir.path)/replies.sqlite")
        if let last { try migrator.migrate(database.pool, upTo: last) } else { try database.migrate(migrator) }
        return database
    }

    private func reply(_ text: String) -> Envelope {
        Envelope(version: WireProtocol.version, kind: .reply, requestId: 7, payload: Array(text.utf8))
    }

    private func row(_ database: ServiceDatabase, _ key: String) async throws -> (rowid: Int64, createdAt: Double, bytes: Int)? {
        try await database.read { db in
            try Row.fetchOne(db, sql: "SELECT rowid, created_at, length(reply) FROM idempotent_replies WHERE key = ?", arguments: [key])
                .map { ($0[0], $0[1], $0[2]) }
        }
    }

    @Test func aSavedReply_landsOnItsClaimInPlace_andASaveWithoutAClaimIsKeptToo() async throws {
        let dir = try TemporaryDirectory("frienso-reply-rows")
        defer { dir.remove() }
        let database = try open(dir)
        let replies = SQLiteReplyStore(database: database)
        // The claims, as a mutation's transaction writes them (`SQLiteReplyStore.claim`); made
        // now, so the first save's pruning pass (a day's retention) keeps them.
        let now = Date().timeIntervalSince1970
        try await database.write { db in
            try db.run(sql: "INSERT INTO idempotent_replies (key, reply, digest, created_at) VALUES ('u1|a', x'', 11, ?)", arguments: [now])
            try db.run(sql: "INSERT INTO idempotent_replies (key, reply, digest, created_at) VALUES ('u1|b', x'', 12, ?)", arguments: [now])
        }
        let claimed = try #require(try await row(database, "u1|a"))
        #expect(claimed.bytes == 0)
        #expect(await replies.load("u1|a") == StoredReply(digest: 11, reply: nil), "a claim without its reply")

        await replies.save("u1|a", StoredReply(digest: 11, reply: reply("first")))
        let saved = try #require(try await row(database, "u1|a"))
        #expect(saved.rowid == claimed.rowid, "the row was updated, not deleted and inserted again")
        #expect(saved.createdAt == claimed.createdAt, "kept from the claim: expiry counts from it")
        #expect(await replies.load("u1|a") == StoredReply(digest: 11, reply: reply("first")))

        // Saved again (as `INSERT OR REPLACE` did): the reply and digest are the new ones.
        await replies.save("u1|a", StoredReply(digest: 13, reply: reply("second")))
        #expect(await replies.load("u1|a") == StoredReply(digest: 13, reply: reply("second")))
        #expect(try await row(database, "u1|a")?.rowid == claimed.rowid)

        // No claim first: a row of its own, after the others.
        await replies.save("u2|c", StoredReply(digest: 14, reply: reply("unclaimed")))
        #expect(await replies.load("u2|c") == StoredReply(digest: 14, reply: reply("unclaimed")))
        #expect(try #require(try await row(database, "u2|c")).rowid > claimed.rowid)
        #expect(await replies.load("u1|b") == StoredReply(digest: 12, reply: nil), "the other claim untouched")
    }

    @Test func pruning_deletesEveryRowMadeBeforeTheCutoff_andNeverALaterOne_evenOutOfOrder() async throws {
        let dir = try TemporaryDirectory("frienso-reply-prune")
        defer { dir.remove() }
        let database = try open(dir)
        // Rows 1…100 made at t = 1…100 s; row 5 at t = 1,000 (a clock set forward, then back);
        // row 101 at t = 10 (a clock set back). Cutoff t = 50.
        try await database.write { db in
            for id in 1...100 {
                try db.run(sql: "INSERT INTO idempotent_replies (rowid, key, reply, digest, created_at) VALUES (?, ?, x'01', 0, ?)",
                           arguments: [id, "u1|\(id)", id == 5 ? 1_000.0 : Double(id)])
            }
            try db.run(sql: "INSERT INTO idempotent_replies (rowid, key, reply, digest, created_at) VALUES (101, 'u1|101', x'01', 0, 10)")
        }
        try await database.write { db in try SQLiteReplyStore.prune(db, before: 50) }
        let kept = try await database.read { db in try Int64.fetchAll(db, sql: "SELECT rowid FROM idempotent_replies ORDER BY rowid") }
        #expect(kept == [5] + Array(50...101), "1…49 but 5 deleted; 5 (made after the cutoff) kept; 101 kept for a later pass")

        // Every row expired; then none left; then an empty table.
        try await database.write { db in try SQLiteReplyStore.prune(db, before: 2_000) }
        #expect(try await database.read { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM idempotent_replies") } == 0)
        try await database.write { db in try SQLiteReplyStore.prune(db, before: 2_000) }
    }

    @Test func pruning_aLargeTable_findsTheBoundaryExactly() async throws {
        let dir = try TemporaryDirectory("frienso-reply-prune-large")
        defer { dir.remove() }
        let database = try open(dir)
        // 5,000 rows, two a second, with gaps in the rowids (erased users' rows).
        try await database.write { db in
            for id in 1...5_000 where id % 7 != 0 {
                try db.run(sql: "INSERT INTO idempotent_replies (rowid, key, reply, digest, created_at) VALUES (?, ?, x'01', 0, ?)",
                           arguments: [id, "u\(id % 13)|\(id)", Double(id) / 2])
            }
        }
        for cutoff in [0.0, 0.5, 1.0, 333.25, 1_234.5, 2_499.5, 2_500, 2_500.5] {
            try await database.write { db in try SQLiteReplyStore.prune(db, before: cutoff) }
            let (oldest, older): (Double?, Int) = try await database.read { db in
                (try Double.fetchOne(db, sql: "SELECT min(created_at) FROM idempotent_replies"),
                 try Int.fetchOne(db, sql: "SELECT count(*) FROM idempotent_replies WHERE created_at < ?", arguments: [cutoff]) ?? -1)
            }
            #expect(older == 0, "cutoff \(cutoff)")
            let expected = (1...5_000).filter { $0 % 7 != 0 }.map { Double($0) / 2 }.first { $0 >= cutoff }
            #expect(oldest == expected, "cutoff \(cutoff): the first row made since is kept")
        }
    }

    @Test func anExistingDatabase_losesTheCreatedAtIndex_andKeepsItsReplies() async throws {
        let dir = try TemporaryDirectory("frienso-reply-migration")
        defer { dir.remove() }
        do {
            let old = try open(dir, upTo: "idempotent_replies_digest")
            try await old.write { db in
                try db.run(sql: "INSERT INTO idempotent_replies (key, reply, digest, created_at) VALUES ('u1|old', x'', 5, 1.0)")
            }
            #expect(try await old.read { db in try db.indexes(on: "idempotent_replies").map(\.name) }.contains("idempotent_replies_on_created_at"))
            try old.pool.close()
        }
        let database = try open(dir)
        #expect(try await database.read { db in try db.indexes(on: "idempotent_replies").map(\.name) }.contains("idempotent_replies_on_created_at") == false)
        #expect(await SQLiteReplyStore(database: database).load("u1|old") == StoredReply(digest: 5, reply: nil))
    }
}
