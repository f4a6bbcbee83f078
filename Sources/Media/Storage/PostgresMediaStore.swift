import Foundation
import FriensoProto
import Logging
import PostgresNIO
import Storage
import Wire

/// Media's storage on PostgreSQL: the `media` schema of the deployment's database, photos' bytes
/// included (`chunks`: a row per chunk received, first an upload's, then its photo's), so that every instance on every host reads
/// and writes the same photos and a database backup holds them all. The same tables as the
/// SQLite store, and the same behaviour (the media tests run on both engines).
///
/// Several instances may share the schema and PostgreSQL runs changes at once, so:
/// - the changes of one person's photos (quota checks, finishing an upload, deleting, attaching,
///   erasing) take that person's turn first (a transaction-scoped advisory lock): two uploads
///   cannot both squeeze under a quota, nor two profile pictures both replace the same one;
/// - a chunk or a finish locks its upload's row: chunks sent to two instances append in turn,
///   and a finish that reached two instances stores one photo;
/// - a blob's reference count changes in one statement on its row, and the row goes with its last
///   reference in the same transaction.
///
/// Bytes are stored uncompressed out of line (`STORAGE EXTERNAL`: photos are compressed already),
/// so reading part of a chunk reads that part only. A finished upload whose bytes are stored as
/// received hands its chunk rows to the photo (an `UPDATE` of their owner columns: PostgreSQL
/// keeps an unchanged out-of-line value where it is, so the bytes are not written again).
final class PostgresMediaStore: MediaStorage {
    let database: PostgresServiceDatabase
    let replies: any ReplyStore
    var logger: Logger { database.logger }

    private init(database: PostgresServiceDatabase) {
        self.database = database
        replies = PostgresReplyStore(database: database)
    }

    /// Runs media's migrations on `database` (its schema must be `media`).
    static func open(_ database: PostgresServiceDatabase) async throws -> PostgresMediaStore {
        try await database.migrate(migrations)
        return PostgresMediaStore(database: database)
    }

    static let tables = ["blobs", "chunks", "media", "profile_pictures", "check_in_photos", "uploads", "idempotent_replies"]

    static let migrations: [PostgresMigration] = PostgresReplyStore.migrations + [
        PostgresMigration("media_v1", [
            "CREATE TABLE blobs (sha256 text COLLATE \"C\" PRIMARY KEY, size bigint NOT NULL, refs bigint NOT NULL)",
            """
            CREATE TABLE media (
                id text COLLATE "C" PRIMARY KEY, owner bigint NOT NULL, purpose bigint NOT NULL, place_id bigint NOT NULL,
                type bigint NOT NULL, size bigint NOT NULL, width bigint NOT NULL, height bigint NOT NULL,
                sha256 text COLLATE "C" NOT NULL REFERENCES blobs (sha256), created_ms bigint NOT NULL, attached boolean NOT NULL DEFAULT false)
            """,
            "CREATE INDEX media_by_place ON media (place_id, created_ms DESC, id DESC) WHERE purpose = 3",
            "CREATE INDEX media_by_owner ON media (owner, created_ms DESC, id DESC)",
            "CREATE INDEX media_by_blob ON media (sha256)",
            "CREATE TABLE profile_pictures (user_id bigint PRIMARY KEY, media_id text COLLATE \"C\" NOT NULL)",
            "CREATE TABLE check_in_photos (user_id bigint PRIMARY KEY, media_id text COLLATE \"C\" NOT NULL)",
            """
            CREATE TABLE uploads (
                id text COLLATE "C" PRIMARY KEY, owner bigint NOT NULL, purpose bigint NOT NULL, place_id bigint NOT NULL,
                size bigint NOT NULL, created_ms bigint NOT NULL, expires_ms bigint NOT NULL, media_id text COLLATE "C",
                location_removed boolean NOT NULL DEFAULT false, deduplicated boolean NOT NULL DEFAULT false, replaced text NOT NULL DEFAULT '')
            """,
            "CREATE INDEX uploads_by_owner ON uploads (owner, created_ms)",
            // A chunk of an unfinished upload (`upload_id`) or of a stored photo (`sha256`).
            """
            CREATE TABLE chunks (
                id bigserial PRIMARY KEY,
                upload_id text COLLATE "C" REFERENCES uploads (id) ON DELETE CASCADE,
                sha256 text COLLATE "C" REFERENCES blobs (sha256) ON DELETE CASCADE,
                start_offset bigint NOT NULL,
                bytes bytea NOT NULL,
                CHECK ((upload_id IS NULL) <> (sha256 IS NULL)))
            """,
            "ALTER TABLE chunks ALTER COLUMN bytes SET STORAGE EXTERNAL",
            "CREATE UNIQUE INDEX chunks_of_upload ON chunks (upload_id, start_offset) WHERE upload_id IS NOT NULL",
            "CREATE UNIQUE INDEX chunks_of_blob ON chunks (sha256, start_offset) WHERE sha256 IS NOT NULL",
        ]),
        // The expiry pass's searches (`expire`), as on SQLite (`SQLiteMediaStore.searchIndexesSQL`):
        // it walked `media` and `uploads` once a minute. The predicates are in the statements' text,
        // so that a generic plan can use the partial indexes.
        PostgresMigration("media_expiry_by_index", [
            "CREATE INDEX media_unattached ON media (created_ms) WHERE purpose = \(MediaV1.Purpose.checkIn.rawValue) AND NOT attached",
            "CREATE INDEX uploads_unfinished ON uploads (expires_ms) WHERE media_id IS NULL",
            "CREATE INDEX uploads_by_created ON uploads (created_ms)",
        ]),
    ]

    /// A stored enum value as the generated enums take it.
    static func raw(_ value: Int64) -> Int32 { Int32(truncatingIfNeeded: value) }

    typealias ItemRow = (String, Int64, Int64, Int64, Int64, Int64, Int64, Int64, String, Int64, Bool)
    typealias UploadRow = (String, Int64, Int64, Int64, Int64, Int64, Int64, String?, Bool, Bool, String)

    static func item(_ r: ItemRow) -> MediaRecord {
        MediaRecord(id: r.0, owner: UInt64(r.1), purpose: MediaV1.Purpose(rawValue: raw(r.2)), placeID: UInt64(r.3),
                    type: MediaV1.ImageType(rawValue: raw(r.4)), size: r.5, width: UInt32(clamping: r.6), height: UInt32(clamping: r.7),
                    sha256: r.8, createdMs: r.9, attached: r.10)
    }

    static func upload(_ r: UploadRow) -> UploadRecord {
        UploadRecord(id: r.0, owner: UInt64(r.1), purpose: MediaV1.Purpose(rawValue: raw(r.2)), placeID: UInt64(r.3), size: r.4,
                     createdMs: r.5, expiresMs: r.6, mediaID: r.7, locationRemoved: r.8, deduplicated: r.9, replaced: r.10)
    }

    private func items(_ query: PostgresQuery, on connection: PostgresConnection) async throws -> [MediaRecord] {
        var result: [MediaRecord] = []
        for try await row in try await connection.prepared(query, logger: logger).decode(ItemRow.self) { result.append(Self.item(row)) }
        return result
    }

    private func items(_ query: PostgresQuery) async throws -> [MediaRecord] {
        try await database.read { connection in try await self.items(query, on: connection) }
    }

    /// Takes `owner`'s turn for changes of their photos until the transaction ends.
    func lockOwner(_ owner: UInt64, on connection: PostgresConnection) async throws {
        let key = "frienso media owner \(owner)"
        try await connection.prepared("SELECT pg_advisory_xact_lock(hashtextextended(\(key), 0))", logger: logger)
    }

    // MARK: Reads

    func item(_ id: String) async throws -> MediaRecord? {
        try await items("SELECT \(unescaped: MediaRecord.columns) FROM media WHERE id = \(id)").first
    }

    func upload(_ id: String) async throws -> UploadRecord? {
        try await database.read { connection in
            for try await row in try await connection.prepared("SELECT \(unescaped: UploadRecord.columns) FROM uploads WHERE id = \(id)",
                                                            logger: self.logger).decode(UploadRow.self) {
                return Self.upload(row)
            }
            return nil
        }
    }

    func profilePicture(of user: UInt64) async throws -> MediaRecord? {
        try await items("""
            SELECT \(unescaped: MediaRecord.columns) FROM media WHERE id = (SELECT media_id FROM profile_pictures WHERE user_id = \(Int64(user)))
            """).first
    }

    func checkInPhoto(of user: UInt64) async throws -> MediaRecord? {
        try await items("""
            SELECT \(unescaped: MediaRecord.columns) FROM media WHERE id = (SELECT media_id FROM check_in_photos WHERE user_id = \(Int64(user)))
            """).first
    }

    func list(_ selection: PhotoSelection, after cursor: (Int64, String)?, limit: Int) async throws -> [MediaRecord] {
        let (ms, id) = cursor ?? (Int64.max, "")
        let after = cursor != nil
        switch selection {
        case .venue(let place):
            return try await items("""
                SELECT \(unescaped: MediaRecord.columns) FROM media WHERE purpose = 3 AND place_id = \(Int64(place))
                    AND (NOT \(after) OR created_ms < \(ms) OR (created_ms = \(ms) AND id < \(id)))
                ORDER BY created_ms DESC, id DESC LIMIT \(limit)
                """)
        case .owner(let owner):
            return try await items("""
                SELECT \(unescaped: MediaRecord.columns) FROM media WHERE owner = \(Int64(owner))
                    AND (NOT \(after) OR created_ms < \(ms) OR (created_ms = \(ms) AND id < \(id)))
                ORDER BY created_ms DESC, id DESC LIMIT \(limit)
                """)
        }
    }

    private func usage(of owner: UInt64, now: Int64, on connection: PostgresConnection) async throws -> MediaUsage {
        let rows = try await connection.prepared("""
            SELECT (SELECT COALESCE(SUM(size), 0)::bigint FROM media WHERE owner = \(Int64(owner))),
                   (SELECT COALESCE(SUM(size), 0)::bigint FROM uploads WHERE owner = \(Int64(owner)) AND media_id IS NULL AND expires_ms > \(now)),
                   (SELECT COUNT(*) FROM uploads WHERE owner = \(Int64(owner)) AND created_ms > \(now - 3_600_000))
            """, logger: logger)
        for try await (stored, pending, recent) in rows.decode((Int64, Int64, Int64).self) {
            return MediaUsage(storedBytes: stored, pendingBytes: pending, uploadsLastHour: Int(recent))
        }
        return MediaUsage(storedBytes: 0, pendingBytes: 0, uploadsLastHour: 0)
    }

    func usage(of owner: UInt64, now: Int64) async throws -> MediaUsage {
        try await database.read { connection in try await self.usage(of: owner, now: now, on: connection) }
    }

    /// One statement, so one snapshot: a photo deleted meanwhile has no chunks left (they go with
    /// its blob row), never some of them.
    func photoBytes(_ item: MediaRecord, offset: Int, count: Int) async throws -> [UInt8]? {
        try await database.read { connection in
            // The chunks that overlap [offset, offset + count), each cut to the overlap.
            let (start, end) = (Int64(offset), Int64(offset + count))
            let rows = try await connection.prepared("""
                SELECT substring(bytes FROM (greatest(\(start), start_offset) - start_offset + 1)::integer
                                 FOR (least(\(end), start_offset + length(bytes)) - greatest(\(start), start_offset))::integer)
                FROM chunks WHERE sha256 = \(item.sha256) AND start_offset < \(end) AND start_offset + length(bytes) > \(start)
                ORDER BY start_offset
                """, logger: self.logger)
            var bytes: [UInt8] = []
            bytes.reserveCapacity(count)
            for try await part in rows.decode(Data.self) { bytes.append(contentsOf: part) }
            if bytes.isEmpty && count > 0 { return nil } // deleted meanwhile
            guard bytes.count == count else { throw RPCError.internal("photo \(item.id): \(bytes.count) of \(count) bytes stored") }
            return bytes
        }
    }

    // MARK: Uploads

    func startUpload(_ upload: UploadRecord, quotaBytes: Int64, uploadsPerHour: Int) async throws {
        try await database.write { connection in
            try await self.lockOwner(upload.owner, on: connection)
            let usage = try await self.usage(of: upload.owner, now: upload.createdMs, on: connection)
            if let refusal = QuotaRefusal(usage: usage, size: upload.size, quotaBytes: quotaBytes, uploadsPerHour: uploadsPerHour) {
                throw refusal
            }
            try await connection.prepared("""
                INSERT INTO uploads (id, owner, purpose, place_id, size, created_ms, expires_ms)
                VALUES (\(upload.id), \(Int64(upload.owner)), \(Int64(upload.purpose.rawValue)), \(Int64(upload.placeID)), \(upload.size),
                        \(upload.createdMs), \(upload.expiresMs))
                """, logger: self.logger)
        }
    }

    /// Bytes received so far, with the upload's row locked: nil when the row is gone.
    private func received(_ upload: String, on connection: PostgresConnection) async throws -> Int64? {
        guard try await PostgresServiceDatabase.exists(connection.prepared("SELECT 1 FROM uploads WHERE id = \(upload) FOR UPDATE", logger: logger)) else {
            return nil
        }
        let rows = try await connection.prepared("SELECT COALESCE(SUM(length(bytes)), 0)::bigint FROM chunks WHERE upload_id = \(upload)",
                                              logger: logger)
        return try await PostgresServiceDatabase.first(rows, Int64.self) ?? 0
    }

    func receiveChunk(_ upload: UploadRecord, offset: UInt64, data: [UInt8]) async throws -> ChunkOutcome {
        try await database.write { connection in
            guard let have = try await self.received(upload.id, on: connection).map({ UInt64($0) }) else { return .gone }
            let end = offset + UInt64(data.count)
            if end <= have { return .received(total: have) } // a retry: already here
            guard offset <= have else { return .outOfOrder(have: have) }
            let fresh = Data(data[Int(have - offset)...])
            try await connection.prepared("""
                INSERT INTO chunks (upload_id, start_offset, bytes) VALUES (\(upload.id), \(Int64(have)), \(fresh))
                """, logger: self.logger)
            return .received(total: end)
        }
    }

    func receivedBytes(_ upload: UploadRecord) async throws -> [UInt8] {
        try await database.read { connection in
            var bytes: [UInt8] = []
            let rows = try await connection.prepared("SELECT bytes FROM chunks WHERE upload_id = \(upload.id) ORDER BY start_offset",
                                                  logger: self.logger)
            for try await part in rows.decode(Data.self) { bytes.append(contentsOf: part) }
            return bytes
        }
    }

    func finish(upload: UploadRecord, item: MediaRecord, bytes: [UInt8], unchanged: Bool, locationRemoved: Bool) async throws -> FinishedUpload? {
        try await database.write { connection -> FinishedUpload? in
            try await self.lockOwner(item.owner, on: connection)
            let state = try await connection.prepared("SELECT media_id FROM uploads WHERE id = \(upload.id) FOR UPDATE", logger: self.logger)
            var found = false
            for try await mediaID in state.decode(String?.self) {
                found = true
                if mediaID != nil { return nil } // finished meanwhile
            }
            guard found else { throw RPCError.notFound("upload \(upload.id) expired: start again") }
            let sha = item.sha256
            let added = try await connection.prepared("UPDATE blobs SET refs = refs + 1 WHERE sha256 = \(sha) RETURNING 1", logger: self.logger)
            let deduplicated = try await PostgresServiceDatabase.exists(added)
            if !deduplicated {
                // Another transaction may store the same bytes at the same moment: then this one
                // counts a reference to its row, and its own chunks go.
                let inserted = try await PostgresServiceDatabase.first(connection.prepared("""
                    INSERT INTO blobs (sha256, size, refs) VALUES (\(sha), \(item.size), 1)
                    ON CONFLICT (sha256) DO UPDATE SET refs = blobs.refs + 1 RETURNING (xmax = 0)
                    """, logger: self.logger), Bool.self) ?? false
                if inserted && unchanged {
                    try await connection.prepared("UPDATE chunks SET upload_id = NULL, sha256 = \(sha) WHERE upload_id = \(upload.id)",
                                               logger: self.logger)
                } else if inserted {
                    try await connection.prepared("INSERT INTO chunks (sha256, start_offset, bytes) VALUES (\(sha), 0, \(Data(bytes)))",
                                               logger: self.logger)
                }
            }
            try await connection.prepared("""
                INSERT INTO media (\(unescaped: MediaRecord.columns))
                VALUES (\(item.id), \(Int64(item.owner)), \(Int64(item.purpose.rawValue)), \(Int64(item.placeID)), \(Int64(item.type.rawValue)),
                        \(item.size), \(Int64(item.width)), \(Int64(item.height)), \(sha), \(item.createdMs), \(item.attached))
                """, logger: self.logger)
            var replaced = ""
            if item.purpose == .profile {
                let owner = Int64(item.owner)
                replaced = try await PostgresServiceDatabase.first(
                    connection.prepared("SELECT media_id FROM profile_pictures WHERE user_id = \(owner)", logger: self.logger), String.self) ?? ""
                if !replaced.isEmpty { _ = try await self.deleteItem(replaced, on: connection) }
                try await connection.prepared("""
                    INSERT INTO profile_pictures (user_id, media_id) VALUES (\(owner), \(item.id))
                    ON CONFLICT (user_id) DO UPDATE SET media_id = excluded.media_id
                    """, logger: self.logger)
            }
            try await connection.prepared("""
                UPDATE uploads SET media_id = \(item.id), location_removed = \(locationRemoved), deduplicated = \(deduplicated), replaced = \(replaced)
                WHERE id = \(upload.id)
                """, logger: self.logger)
            try await connection.prepared("DELETE FROM chunks WHERE upload_id = \(upload.id)", logger: self.logger)
            return FinishedUpload(item: item, deduplicated: deduplicated, replaced: replaced)
        }
    }

    func abandon(_ upload: String) async throws {
        try await database.write { connection in
            try await connection.prepared("DELETE FROM uploads WHERE id = \(upload) AND media_id IS NULL", logger: self.logger)
        }
    }

    // MARK: Changes

    /// Deletes an item and its pointers, releasing its bytes. - Returns: whether the bytes went
    /// (the last reference); nil when there was no such item.
    @discardableResult
    func deleteItem(_ id: String, on connection: PostgresConnection) async throws -> Bool? {
        var deleted: (sha: String, owner: Int64)?
        for try await row in try await connection.prepared("DELETE FROM media WHERE id = \(id) RETURNING sha256, owner", logger: logger)
            .decode((String, Int64).self) { deleted = row }
        guard let (sha, owner) = deleted else { return nil }
        // Its pointers by their user, the item's owner (the tables' key), as on SQLite
        // (`SQLiteMediaStore.deletePointersSQL`): no index holds `media_id`.
        try await connection.prepared("DELETE FROM profile_pictures WHERE user_id = \(owner) AND media_id = \(id)", logger: logger)
        try await connection.prepared("DELETE FROM check_in_photos WHERE user_id = \(owner) AND media_id = \(id)", logger: logger)
        let left = try await PostgresServiceDatabase.first(
            connection.prepared("UPDATE blobs SET refs = refs - 1 WHERE sha256 = \(sha) RETURNING refs", logger: logger), Int64.self) ?? 0
        guard left <= 0 else { return false }
        try await connection.prepared("DELETE FROM blobs WHERE sha256 = \(sha) AND refs <= 0", logger: logger)
        return true
    }

    func delete(_ id: String, owner: UInt64) async throws -> Bool? {
        try await database.write { connection -> Bool? in
            try await self.lockOwner(owner, on: connection)
            guard try await PostgresServiceDatabase.exists(
                connection.prepared("SELECT 1 FROM media WHERE id = \(id) AND owner = \(Int64(owner))", logger: self.logger)) else { return nil }
            return try await self.deleteItem(id, on: connection)
        }
    }

    func attachCheckInPhoto(user: UInt64, id: String) async throws -> AttachOutcome {
        try await database.write { connection -> AttachOutcome in
            try await self.lockOwner(user, on: connection)
            let owner = Int64(user)
            if !id.isEmpty {
                guard let purpose = try await PostgresServiceDatabase.first(
                    connection.prepared("SELECT purpose FROM media WHERE id = \(id) AND owner = \(owner) FOR UPDATE", logger: self.logger), Int64.self) else {
                    return .notFound
                }
                guard MediaV1.Purpose(rawValue: Self.raw(purpose)) == .checkIn else { return .wrongPurpose }
            }
            let previous = try await PostgresServiceDatabase.first(
                connection.prepared("SELECT media_id FROM check_in_photos WHERE user_id = \(owner)", logger: self.logger), String.self) ?? ""
            guard previous != id else { return .attached(released: "") }
            if !previous.isEmpty { try await self.deleteItem(previous, on: connection) }
            if id.isEmpty {
                try await connection.prepared("DELETE FROM check_in_photos WHERE user_id = \(owner)", logger: self.logger)
            } else {
                try await connection.prepared("""
                    INSERT INTO check_in_photos (user_id, media_id) VALUES (\(owner), \(id))
                    ON CONFLICT (user_id) DO UPDATE SET media_id = excluded.media_id
                    """, logger: self.logger)
                try await connection.prepared("UPDATE media SET attached = true WHERE id = \(id)", logger: self.logger)
            }
            return .attached(released: previous)
        }
    }

}
