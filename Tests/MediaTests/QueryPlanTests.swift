import Foundation
import FriensoProto
import FriensoTesting
import GRDB
@testable import Media
import Testing

private typealias API = MediaV1.MediaService

extension MediaTestGroup {
    /// Deleting a photo and the expiry pass find their rows by an index, however many photos the
    /// store keeps (issue 16, item 156). Before, on SQLite, each deleted photo walked `media` for
    /// its blob's foreign key and both pointer tables by `media_id`, and each minute's expiry
    /// walked `media` and `uploads`, all in the single writer (180 ms a deleted photo at 1M users).
    @Suite("media: deletes and expiry search indexes", .timeLimit(.minutes(2)))
    struct QueryPlanTests {
        @Test(arguments: Engine.allCases) func everyForeignKey_leadsAnIndex(engine: Engine) async throws {
            let (count, missing) = try await ForeignKeyIndexes.audit(engine, service: "media", sqlite: { try SQLiteMediaStore(directory: $0).database },
                                                                     postgres: { _ = try await PostgresMediaStore.open($0) })
            #expect(count > 0, "no foreign key seen")
            #expect(missing.isEmpty, "walked whole when their parent row goes: \(missing)")
        }

        @Test func onSQLite_theExpiryPass_andAPhotosPointers_searchAnIndex() async throws {
            let storage = try await TestStorage.fresh(.sqlite, service: "media")
            let store = try SQLiteMediaStore(directory: storage.directory)
            let plans = try await store.database.read { db -> [String: [String]] in
                return [
                    "stale uploads": try queryPlan(db, SQLiteMediaStore.staleUploadsSQL, [1]),
                    "expired uploads": try queryPlan(db, SQLiteMediaStore.expireUploadsSQL, [1]),
                    "old uploads": try queryPlan(db, SQLiteMediaStore.pruneUploadsSQL, [1]),
                    "orphans": try queryPlan(db, SQLiteMediaStore.orphansSQL, [1]),
                    "profile picture": try queryPlan(db, SQLiteMediaStore.deletePointersSQL[0], [1, "m"]),
                    "check-in photo": try queryPlan(db, SQLiteMediaStore.deletePointersSQL[1], [1, "m"]),
                ]
            }
            await storage.remove()
            let indexes = ["stale uploads": "INDEX uploads_unfinished", "expired uploads": "INDEX uploads_unfinished",
                           "old uploads": "INDEX uploads_by_created", "orphans": "INDEX media_unattached",
                           "profile picture": "INTEGER PRIMARY KEY", "check-in photo": "INTEGER PRIMARY KEY"]
            for (statement, index) in indexes {
                let steps = plans[statement] ?? []
                #expect(steps.contains { $0.hasPrefix("SEARCH") && $0.contains(index) }, "\(statement): \(steps)")
                #expect(!steps.contains { $0.hasPrefix("SCAN") }, "\(statement) walks a table: \(steps)")
            }
        }

        /// As the pass runs them on PostgreSQL: prepared, and possibly on a generic plan (forced
        /// here), where only a predicate in the text can pick a partial index.
        @Test func onPostgreSQL_theExpiryPass_searchesAnIndex_onAGenericPlan() async throws {
            try await TestStorage.withOpen(.postgres, given: nil, service: "media") { storage, opened in
                guard case .postgres(let database) = opened else { return }
                _ = try await PostgresMediaStore.open(database)
                // 5,000 attached photos and finished uploads, with the statistics the planner reads.
                _ = try await storage.psql("""
                    INSERT INTO blobs SELECT 'b' || i, 1, 1 FROM generate_series(1, 5000) i;
                    INSERT INTO media SELECT 'm' || i, i, \(MediaV1.Purpose.checkIn.rawValue), 0, 1, 1, 1, 1, 'b' || i, i, true FROM generate_series(1, 5000) i;
                    INSERT INTO uploads SELECT 'u' || i, i, 2, 0, 1, i, i, 'm' || i FROM generate_series(1, 5000) i;
                    ANALYZE blobs, media, uploads;
                    """)
                let generic = "SET plan_cache_mode = force_generic_plan; "
                let orphans = try await storage.psql(generic + "PREPARE orphans AS \(PostgresMediaStore.orphans(before: 100).sql); EXPLAIN EXECUTE orphans(100);")
                #expect(orphans.contains("media_unattached") && !orphans.contains("Seq Scan"), "\(orphans)")
                let stale = try await storage.psql(generic + """
                    PREPARE stale AS \(PostgresMediaStore.expireUploads(now: 100).sql); EXPLAIN EXECUTE stale(100);
                    PREPARE old AS \(PostgresMediaStore.pruneUploads(before: 100).sql); EXPLAIN EXECUTE old(100);
                    """)
                #expect(stale.contains("uploads_unfinished") && stale.contains("uploads_by_created") && !stale.contains("Seq Scan"), "\(stale)")
            }
        }

        /// A deleted photo's pointers go with it (found by their owner), and nobody else's do.
        @Test(arguments: Engine.allCases) func deletingAPhoto_dropsItsOwnersPointers_only(engine: Engine) async throws {
            try await withMedia(engine: engine) { m in
                var ids: [UInt64: (profile: String, checkIn: String)] = [:]
                for user: UInt64 in [1, 2] {
                    let profile = try #require(try await m.upload(Fixture.png(), as: user, purpose: .profile).item)
                    let checkIn = try #require(try await m.upload(Fixture.jpeg(), as: user, purpose: .checkIn).item)
                    _ = try await m.call(user, API.attachCheckInPhoto, MediaV1.AttachCheckInPhotoRequest(userId: user, mediaId: checkIn.mediaId))
                    ids[user] = (profile.mediaId, checkIn.mediaId)
                }
                for id in [ids[1]!.profile, ids[1]!.checkIn] {
                    _ = try await m.call(1, API.deletePhoto, MediaV1.DeletePhotoRequest(mediaId: id))
                }
                #expect(try await m.pointers().sorted() == ["check-in 2 \(ids[2]!.checkIn)", "profile 2 \(ids[2]!.profile)"])
            }
        }
    }
}

extension MediaHarness {
    /// Every profile-picture and check-in-photo pointer stored, as "kind user media".
    func pointers() async throws -> [String] {
        let sql = """
            SELECT 'profile ' || \(storage.engine == .sqlite ? "user" : "user_id") || ' ' || media_id FROM profile_pictures
            UNION ALL SELECT 'check-in ' || \(storage.engine == .sqlite ? "user" : "user_id") || ' ' || media_id FROM check_in_photos
            """
        switch storage.engine {
        case .sqlite:
            let store = try #require(service.store as? SQLiteMediaStore)
            return try await store.database.read { db in try String.fetchAll(db, sql: sql) }
        case .postgres:
            return try await storage.psql(sql).split(separator: "\n").map(String.init)
        }
    }
}
