import Foundation
import FriensoProto
import FriensoTesting
@testable import Geo
import GRDB
import Storage
import Testing

extension GeoTestGroup {
    /// The sweep plan alone (pure): pacing, slices, the watermark, forgetting a user.
    @Suite("geo: the history fold plan")
    struct HistoryFoldingPlanTests {
        typealias Pair = HistoryFolding.Pair

        @Test func aSweepStartsWithWhatCommitted_isPacedOverItsPeriod_andMovesTheWatermarkWhenDone() {
            var plan = HistoryFolding(foldedThrough: 0, lastID: 0, periodMs: 1_000, maxChunk: 100)
            #expect(plan.next(nowMs: 0) == nil, "nothing committed")
            plan.committed((1...10).map { Pair(user: UInt64(11 - $0), id: Int64($0)) }) // users 10...1, ids 1...10
            #expect(plan.next(nowMs: 5_000) == nil, "the sweep starts now: nothing is due yet")
            #expect(plan.backlog == 10)
            plan.committed([Pair(user: 3, id: 11)]) // after the start: the next sweep's
            guard let half = plan.next(nowMs: 5_500) else { Issue.record("half the period: half the sweep"); return }
            #expect(half.users == [1, 2, 3, 4, 5] && half.completesThrough == nil, "sorted by user, half of them")
            #expect(half.pairs.map(\.id) == [10, 9, 8, 7, 6])
            #expect(plan.next(nowMs: 5_500) == half, "not advanced (its commit failed): planned again")
            plan.advance(past: half)
            #expect(plan.foldedThrough == 0, "the watermark waits for the whole sweep")
            guard let rest = plan.next(nowMs: 6_000) else { Issue.record("the period is over: the rest"); return }
            #expect(rest.users == [6, 7, 8, 9, 10] && rest.completesThrough == 10, "id 11 committed after the start")
            plan.advance(past: rest)
            #expect(plan.foldedThrough == 10 && plan.backlog == 1)
            #expect(plan.next(nowMs: 6_000) == nil, "a new sweep for id 11 starts")
            #expect(plan.next(nowMs: 7_000)?.completesThrough == 11)
        }

        /// A sweep's rows sorted by user with a radix sort (item 147) come out exactly as
        /// `sorted()` sorts them: rows in id order (as one instance commits them), rows in any
        /// other order (sorted by comparison instead), few rows, users that differ in one byte
        /// only or span all eight, and the same row twice.
        @Test func aSweepsRadixSort_ordersRowsAsTheComparisonSortDoes() {
            var random = SystemRandomNumberGenerator()
            let userRanges: [ClosedRange<UInt64>] = [1...50, 1...5_000, 1...1_000_000, 0...UInt64.max, 0x0100_0000_0000_0000...0x0100_0000_0000_00FF]
            for count in [0, 1, 2, 63, 64, 65, 500, 5_000] {
                for users in userRanges {
                    var pairs = (0..<count).map { Pair(user: UInt64.random(in: users, using: &random), id: Int64($0) + 1) }
                    #expect(HistoryFolding.sortedByUser(pairs) == pairs.sorted(), "\(count) rows in id order, users \(users)")
                    pairs.shuffle(using: &random)
                    #expect(HistoryFolding.sortedByUser(pairs) == pairs.sorted(), "\(count) rows in any order, users \(users)")
                    pairs += pairs.prefix(10)
                    #expect(HistoryFolding.sortedByUser(pairs) == pairs.sorted(), "\(count) rows, some twice, users \(users)")
                }
            }
        }

        @Test func slicesAreCapped_butKeepAUsersRowsTogether() {
            var plan = HistoryFolding(foldedThrough: 0, lastID: 0, periodMs: 1, maxChunk: 2)
            plan.committed([Pair(user: 1, id: 1), Pair(user: 1, id: 2), Pair(user: 1, id: 3), Pair(user: 2, id: 4), Pair(user: 3, id: 5)])
            _ = plan.next(nowMs: 0)
            var slices: [[UInt64]] = []
            while let chunk = plan.next(nowMs: 10) {
                slices.append(chunk.users)
                plan.advance(past: chunk)
                if chunk.completesThrough != nil { break }
            }
            #expect(slices == [[1], [2, 3]], "user 1's three rows stay in one slice, past the cap")
            #expect(plan.foldedThrough == 5)
        }

        @Test func aForgottenUser_leavesThePlan_atTheNextSlice_andAnEmptiedSweepStillCompletes() {
            var plan = HistoryFolding(foldedThrough: 0, lastID: 0, periodMs: 1_000, maxChunk: 100)
            plan.committed([Pair(user: 1, id: 1), Pair(user: 2, id: 2), Pair(user: 3, id: 3)])
            _ = plan.next(nowMs: 0)
            let first = plan.next(nowMs: 400) // one of three
            #expect(first?.users == [1])
            plan.forget(2) // while `first` is being written: its positions stay valid
            if let first { plan.advance(past: first) }
            plan.committed([Pair(user: 2, id: 4)])
            #expect(plan.next(nowMs: 1_000)?.users == [3], "2's rows are gone from the sweep and from the next one")
            var emptied = HistoryFolding(foldedThrough: 0, lastID: 0, periodMs: 1_000, maxChunk: 100)
            emptied.committed([Pair(user: 7, id: 1)])
            _ = emptied.next(nowMs: 0)
            emptied.forget(7)
            let chunk = emptied.next(nowMs: 0)
            #expect(chunk?.users == [] && chunk?.completesThrough == 1)
            if let chunk { emptied.advance(past: chunk) }
            #expect(emptied.foldedThrough == 1)
        }

        @Test func all_takesEverythingWaiting_asOneChunk() {
            var plan = HistoryFolding(foldedThrough: 0, lastID: 0, periodMs: 1_000, maxChunk: 1)
            plan.committed([Pair(user: 2, id: 1), Pair(user: 1, id: 2)])
            _ = plan.next(nowMs: 0)
            plan.committed([Pair(user: 3, id: 3)])
            let chunk = plan.all()
            #expect(chunk?.users == [1, 2, 3] && chunk?.completesThrough == 3)
            if let chunk { plan.advance(past: chunk) }
            #expect(plan.foldedThrough == 3 && plan.backlog == 0 && plan.all() == nil)
        }
    }

    /// The store: history is the log; `latest` and the per-user index follow it; nothing
    /// acknowledged depends on the fold.
    @Suite("geo: history is the log, latest folds behind", .timeLimit(.minutes(1)))
    struct HistoryWriteBehindTests {
        static func table(_ geo: GeoHarness) async throws -> (latest: [UInt64: Double], historyIDs: Set<Int64>, foldedThrough: Int64, maxID: Int64) {
            var latest: [UInt64: Double] = [:]
            var ids: Set<Int64> = []
            for row in try await geo.rows("SELECT user_id, lat, history_id FROM latest") {
                latest[UInt64(row[0])!] = Double(row[1])!
                ids.insert(Int64(row[2])!)
            }
            let through = Int64(try await geo.number("SELECT value FROM geo_meta WHERE key = 'folded_through'"))
            let maxID = Int64(try await geo.number("SELECT coalesce(max(id), 0) FROM history"))
            return (latest, ids, through, maxID)
        }

        static func status(_ geo: GeoHarness, _ user: UInt64) -> String? {
            geo.service.state.mutex.withLock { $0.latest[user]?.status }
        }

        @Test(arguments: Engine.allCases) func aRestartReplaysTheUnfoldedTail_withTheLiveRule(engine: Engine) async throws {
            let storage = try await TestStorage.fresh(engine, service: "geo")
            let clock = TestClock()
            try await withGeo(storage: storage, clock: clock) { geo async throws in
                #expect(try await geo.locate(1, 40.0, -73.0, status: "walking"))
                #expect(try await geo.locate(1, 41.0, -74.0, ago: 60_000) == false, "older: history only")
                #expect(try await geo.locate(1, 41.5, -74.5, ago: 120_000, status: "home") == false, "older, but its status applies")
                for u in 2...20 as ClosedRange<UInt64> { #expect(try await geo.locate(u, 40.0 + Double(u) / 100, -73.0)) }
                let stored = try await Self.table(geo)
                #expect(stored.latest.isEmpty && stored.foldedThrough == 0, "the clock has not moved: no sweep was due")
                #expect(try await geo.service.store.historyCount(of: 1) == 3, "every update is in history at once")
            }
            // No stop hook ran (as after kill -9): the new process replays history.
            try await withGeo(storage: storage, clock: clock) { geo async throws in
                let latest = try await geo.call(1, API.latestLocation, GeoV1.LatestLocationRequest(userId: 1))
                #expect(latest.fix?.latitude == 40.0 && Self.status(geo, 1) == "home", "the same rule as live: newest fix, last status")
                #expect(try await geo.call(20, API.latestLocation, GeoV1.LatestLocationRequest(userId: 20)).fix?.latitude == 40.2)
                let stored = try await Self.table(geo)
                #expect(stored.latest.count == 20 && stored.foldedThrough == 22 && stored.maxID == 22, "the replay is folded at start")
                #expect(stored.historyIDs == [22])
                #expect(try await geo.service.store.historyCount(of: 1) == 3, "and indexed")
            }
            await storage.remove()
        }

        @Test(arguments: Engine.allCases) func aRunningSweep_foldsAfterItsPeriod_deleteHistoryReachesEveryRow_andPruneWaitsForTheFold(engine: Engine) async throws {
            let storage = try await TestStorage.fresh(engine, service: "geo")
            let clock = TestClock()
            try await withGeo(storage: storage, clock: clock) { geo async throws in
                #expect(try await geo.locate(2, 42.0, -75.0))             // id 1: pending
                #expect(try await geo.locate(3, 43.0, -75.0))             // id 2: a sweep of {1} starts now
                clock.advance(10_001)
                #expect(try await geo.locate(4, 44.0, -75.0))             // id 3: the sweep's period is over: 2's fix folds
                var stored = try await Self.table(geo)
                #expect(stored.latest == [2: 42.0] && stored.foldedThrough == 1)
                #expect(try await geo.locate(2, 42.5, -75.0))             // id 4: a sweep of {2, 3} starts
                clock.advance(10_001)
                #expect(try await geo.locate(5, 45.0, -75.0))             // id 5: {2, 3} fold
                stored = try await Self.table(geo)
                #expect(stored.latest == [2: 42.0, 3: 43.0, 4: 44.0] && stored.foldedThrough == 3)
                #expect(try await geo.locate(2, 42.7, -75.0))             // id 6: a sweep of {4, 5} starts; 6 pending
                // User 2 has a folded row (1), a row in the running sweep (4) and a pending one (6).
                #expect(try await geo.call(2, API.deleteHistory, GeoV1.DeleteHistoryRequest()).deleted == 3)
                #expect(try await geo.service.store.historyCount(of: 2) == 0)
                #expect(try await Self.table(geo).latest[2] == 42.7, "the latest fix stays, written before its rows went")
                // Retention: everything is past it, but only folded rows go (3 and 5 wait for a sweep).
                clock.advance(31 * 24 * 3_600_000)
                #expect(try await geo.service.pruneHistory() == 2, "ids 2 and 3: user 3's and user 4's folded rows")
                #expect(try await geo.service.store.historyCount(of: 5) == 1, "not folded yet: kept")
            }
            try await withGeo(storage: storage, clock: clock) { geo async throws in
                #expect(try await geo.call(2, API.latestLocation, GeoV1.LatestLocationRequest(userId: 2)).fix?.latitude == 42.7)
                #expect(try await geo.service.store.historyCount(of: 2) == 0, "deleted rows stay deleted: nothing replays them")
                #expect(try await geo.call(5, API.latestLocation, GeoV1.LatestLocationRequest(userId: 5)).fix?.latitude == 45.0)
            }
            await storage.remove()
        }

        /// SQLite only: a batch's history rows go in statements of many rows (item 139), and the
        /// ids the write returns are its rows', in order, for every batch size, after the newest
        /// rows were deleted (`AUTOINCREMENT` does not give their ids again) and with rows kept
        /// only until folded among them.
        @Test func aBatchsHistoryRows_goInStatementsOfManyRows_andEachIDIsItsRows() async throws {
            #expect(SQLiteGeoStore.historyInserts.sizes(0) == [])
            #expect(SQLiteGeoStore.historyInserts.sizes(1) == [1])
            #expect(SQLiteGeoStore.historyInserts.sizes(37) == [32, 4, 1])
            #expect(SQLiteGeoStore.historyInserts.sizes(63) == [32, 16, 8, 4, 2, 1])
            #expect(SQLiteGeoStore.historyInserts.sizes(100) == [32, 32, 32, 4])
            let storage = try await TestStorage.fresh(.sqlite, service: "geo")
            let store = try SQLiteGeoStore(path: "\(storage.directory)/geo.sqlite")
            var device: Int64 = 0
            var written: [Int64: Int64] = [:] // id → device_ms, as the writes returned them
            for size in [1, 2, 3, 31, 32, 33, 37, 64, 100, 5] {
                let batch = (0..<size).map { i -> LocationUpdate in
                    device += 1
                    return LocationUpdate(user: UInt64(i % 7 + 1), lat: 40, lon: -73, accuracy: 5, deviceMs: device, receivedMs: device,
                                          status: i % 3 == 0 ? "s\(device)" : nil)
                }
                let unrecorded = (0..<size).map { $0 % 4 == 1 }
                let (ids, _) = try store.write(batch, fold: nil, unrecorded: unrecorded, placeEvents: [])
                #expect(ids.count == size && zip(ids, ids.dropFirst()).allSatisfy { $0 + 1 == $1 }, "consecutive, in order")
                for (id, update) in zip(ids, batch) { written[id] = update.deviceMs }
                if size == 64 {
                    // The newest rows go (a user's DeleteHistory can take them): their ids are not given again.
                    try await store.database.pool.write { db in try db.execute(sql: "DELETE FROM history WHERE id > (SELECT max(id) - 10 FROM history)") }
                    for id in written.keys.sorted().suffix(10) { written[id] = nil }
                }
            }
            let stored = try store.database.pool.read { db in
                try Row.fetchAll(db, sql: "SELECT id, device_ms, received_ms, status, unrecorded FROM history ORDER BY id")
            }
            #expect(stored.count == written.count)
            for row in stored {
                let id: Int64 = row["id"], deviceMs: Int64 = row["device_ms"]
                #expect(written[id] == deviceMs, "id \(id) is the row the write said")
                #expect(row["received_ms"] as Int64 == deviceMs)
                let status: String? = row["status"]
                #expect(status == nil || status == "s\(deviceMs)")
            }
            #expect(try await store.database.pool.read { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM history WHERE unrecorded = 1") } ?? 0 > 0)
            try store.database.pool.close()
            await storage.remove()
        }

        /// SQLite only (its history has no index by time; item 138): retention walks history in id
        /// order, up to the first row still inside retention, and never takes a row inside it,
        /// even where the clock was set back (a row received before the step, past that first
        /// row, waits for a later sweep); rows not folded yet wait for their sweep.
        @Test func retention_walksHistoryInIDOrder_andNeverTakesARowInsideIt() async throws {
            let storage = try await TestStorage.fresh(.sqlite, service: "geo")
            let store = try SQLiteGeoStore(path: "\(storage.directory)/geo.sqlite")
            try await store.database.pool.write { db in
                // Received at 100, 200, then 5,000 (the clock ran ahead), 300 (set back), 400.
                try db.execute(sql: """
                    INSERT INTO history (user_id, lat, lon, accuracy, device_ms, received_ms)
                    VALUES (1, 40, -73, 5, 1, 100), (2, 40, -73, 5, 1, 200), (3, 40, -73, 5, 1, 5000), (4, 40, -73, 5, 1, 300), (5, 40, -73, 5, 1, 400)
                    """)
                try db.execute(sql: "INSERT INTO history_by_user (user_id, history_id) SELECT user_id, id FROM history")
                try db.execute(sql: "UPDATE geo_meta SET value = 4 WHERE key = 'folded_through'") // 5 is not folded
            }
            func left() async throws -> (history: [Int64], byUser: [Int64]) {
                try await store.database.pool.read { db in
                    (try Int64.fetchAll(db, sql: "SELECT id FROM history ORDER BY id"),
                     try Int64.fetchAll(db, sql: "SELECT history_id FROM history_by_user ORDER BY history_id"))
                }
            }
            #expect(try await store.pruneHistory(before: 1_000) == 2, "1 and 2; 3 is inside retention, and 4 lies past it")
            #expect(try await left() == ([3, 4, 5], [3, 4, 5]))
            #expect(try await store.pruneHistory(before: 6_000) == 2, "3 and 4; 5 is not folded")
            #expect(try await left() == ([5], [5]))
            let plan = try await store.database.pool.read { db in
                (try String.fetchAll(db, sql: "SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'history'"),
                 try queryPlan(db, "DELETE FROM history WHERE id < 9 AND id <= 9 AND received_ms < 9"))
            }
            #expect(!plan.0.contains("history_received"), "no index by time: \(plan.0)")
            #expect(plan.1.contains { $0.contains("INTEGER PRIMARY KEY") }, "the sweep's delete reads a range of ids: \(plan.1)")
            try store.database.pool.close()
            await storage.remove()
        }

        /// SQLite only: the PostgreSQL store was made after the fold.
        @Test func aDatabaseFromBeforeTheFold_isMigrated_withEverythingFolded() async throws {
            let storage = try await TestStorage.fresh(.sqlite, service: "geo")
            // The file as the previous release left it: latest kept current, history indexed by user.
            let old = try ServiceDatabase.open("\(storage.directory)/geo.sqlite")
            try SQLiteGeoStore.migrator.migrate(old.pool, upTo: "idempotent_replies_digest")
            try await old.pool.write { db in
                try db.execute(sql: "INSERT INTO latest (user_id, lat, lon, accuracy, device_ms, received_ms, status) VALUES (1, 40, -73, 5, 2, 2, 'here')")
                try db.execute(sql: "INSERT INTO history (user_id, lat, lon, accuracy, device_ms, received_ms) VALUES (1, 41, -73, 5, 1, 1), (1, 40, -73, 5, 2, 2)")
            }
            try old.pool.close()
            try await withGeo(storage: storage) { geo async throws in
                #expect(try await geo.call(1, API.latestLocation, GeoV1.LatestLocationRequest(userId: 1)).fix?.latitude == 40)
                #expect(Self.status(geo, 1) == "here")
                #expect(try await Self.table(geo).foldedThrough == 2)
                #expect(try await geo.service.store.historyCount(of: 1) == 2)
                #expect(try await geo.call(1, API.deleteHistory, GeoV1.DeleteHistoryRequest()).deleted == 2)
            }
            await storage.remove()
        }
    }
}
