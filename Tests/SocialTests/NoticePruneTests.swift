@testable import Social
import FriensoProto
import FriensoTesting
import GRDB
import Logging
import Storage
import Synchronization
import Testing
import Wire

/// Notices (what a poke, a circle request or an invitation asks alerts to deliver) are kept a
/// week for alerts' relay, then deleted hourly below the first notice made since the cutoff
/// (issue 16, `docs/benchmarks.md` item 162). Before, none was ever deleted.
@Suite("social: the hourly prune of old notices", .serialized, .timeLimit(.minutes(2)))
struct NoticePruneTests {
    final class Clock: Sendable {
        let ms = Atomic<Int64>(1_790_000_000_000)
        var now: @Sendable () -> Int64 { { self.ms.load(ordering: .relaxed) } }
        func advance(days: Int64) { ms.add(days * 86_400_000, ordering: .relaxed) }
    }

    @Test(arguments: Engine.allCases) func noticesOlderThanAWeek_goAtThePrune(engine: Engine) async throws {
        let clock = Clock()
        try await withSocial(engine, now: clock.now) { stack in
            let (una, _) = try await stack.user("n_una")
            _ = try await una.call(API.addToCircle, SocialV1.AddToCircleRequest(phone: "+1 562 555 0101"))
            _ = try await una.call(API.addToCircle, SocialV1.AddToCircleRequest(phone: "+1 562 555 0102"))
            clock.advance(days: 6)
            _ = try await una.call(API.addToCircle, SocialV1.AddToCircleRequest(phone: "+1 562 555 0103"))
            #expect(try await stack.service.pruneNotices() == 0, "six days old: kept")
            clock.advance(days: 2)
            #expect(try await stack.service.pruneNotices() == 2, "eight days old")
            let left = try await stack.social.call(API.listNotices, SocialV1.ListNoticesRequest()).notices
            #expect(left.map(\.toPhone) == ["+15625550103"])
        }
    }

    /// The executable's `PeriodicPrune` prunes at its first turn (then hourly).
    @Test func thePeriodicPrune_prunesAtStart() async throws {
        let clock = Clock()
        try await withSocial(.sqlite, now: clock.now) { stack in
            let (una, _) = try await stack.user("n_vic")
            _ = try await una.call(API.addToCircle, SocialV1.AddToCircleRequest(phone: "+1 562 555 0104"))
            clock.advance(days: 8)
            let maintenance = Task { try await PeriodicPrune("notices", logger: Logger(label: "test")) { try await stack.service.pruneNotices() }.run() }
            defer { maintenance.cancel() }
            try await eventually("the first prune") {
                try await stack.social.call(API.listNotices, SocialV1.ListNoticesRequest()).notices.isEmpty
            }
            maintenance.cancel()
            _ = await maintenance.result
        }
    }

    @Test func onSQLite_thePrune_readsByRowid() async throws {
        let storage = try await TestStorage.fresh(.sqlite, service: "social")
        let store = try SQLiteSocialStore(path: "\(storage.directory)/social.sqlite")
        let steps = try await store.database.read { db in try queryPlan(db, SQLiteSocialStore.pruneNoticesSQL, [1_000]) }
        await storage.remove()
        #expect(steps.first == "SEARCH notices USING INTEGER PRIMARY KEY (rowid<?)", "\(steps)")
        #expect(!steps.contains { $0.contains("TEMP B-TREE") }, "a sort: every row read: \(steps)")
    }

    /// On PostgreSQL, on a generic plan (forced): the primary key's order, no sequential scan.
    @Test func onPostgreSQL_thePrune_readsByID_onAGenericPlan() async throws {
        try await TestStorage.withOpen(.postgres, given: nil, service: "social") { storage, opened in
            guard case .postgres(let database) = opened else { return }
            _ = try await PostgresSocialStore.open(database, onCommit: { _ in })
            _ = try await storage.psql("""
                INSERT INTO notices (kind, from_user, to_user, to_phone, created_at_ms) SELECT 1, i, i + 1, '', i FROM generate_series(1, 5000) i;
                ANALYZE notices;
                """)
            let plan = try await storage.psql("""
                SET plan_cache_mode = force_generic_plan;
                PREPARE prune AS \(PostgresSocialStore.pruneNotices(before: 100).sql); EXPLAIN EXECUTE prune(100, 100);
                """)
            #expect(plan.contains("Index Cond: (id < COALESCE"), "\(plan)")
            #expect(!plan.contains("Seq Scan") && !plan.contains("Sort"), "\(plan)")
        }
    }
}
