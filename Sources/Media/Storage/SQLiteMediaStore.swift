import Foundation
import FriensoProto
import GRDB
import Storage
import Wire

extension MediaRecord {
    init(row: CurrentRow) throws {
        try self.init(id: row[0], owner: row[1], purpose: MediaV1.Purpose(rawValue: row[2]), placeID: row[3],
                  type: MediaV1.ImageType(rawValue: row[4]), size: row[5], width: row[6], height: row[7],
                  sha256: row[8], createdMs: row[9], attached: row[10])
    }
}

extension UploadRecord {
    init(row: CurrentRow) throws {
        try self.init(id: row[0], owner: row[1], purpose: MediaV1.Purpose(rawValue: row[2]), placeID: row[3], size: row[4],
                  createdMs: row[5], expiresMs: row[6], mediaID: row[7], locationRemoved: row[8], deduplicated: row[9], replaced: row[10])
    }
}

/// Metadata in `media.sqlite`; bytes in files named by their SHA-256 under `blobs/`, each stored
/// once however many items hold it (`blobs.refs`). Every change of references runs in the
/// database's single writer, file operations included, so a blob is never unlinked while another
/// writer adds a reference to it:
/// - a new blob's file is renamed into place *before* its row commits (a crash in between leaves
///   a file without a row, which the start-up sweep deletes: never a row without a file);
/// - a released blob's file is unlinked *after* its row is deleted (a crash leaves an orphan file,
///   swept likewise).
final class SQLiteMediaStore: MediaStorage {
    let database: ServiceDatabase
    let replies: any ReplyStore
    let blobDirectory: String
    let uploadDirectory: String

    init(directory: String) throws {
        blobDirectory = "\(directory)/blobs"
        uploadDirectory = "\(directory)/uploads"
        for d in [blobDirectory, uploadDirectory] { try FileManager.default.createDirectory(atPath: d, withIntermediateDirectories: true) }
        database = try ServiceDatabase.open("\(directory)/media.sqlite")
        var migrator = DatabaseMigrator()
        SQLiteReplyStore.migrate(&migrator)
        migrator.registerMigration("media") { db in
            try db.execute(sql: """
                CREATE TABLE blobs (sha256 TEXT PRIMARY KEY, size INTEGER NOT NULL, refs INTEGER NOT NULL) STRICT;
                CREATE TABLE media (
                    id TEXT PRIMARY KEY, owner INTEGER NOT NULL, purpose INTEGER NOT NULL, place_id INTEGER NOT NULL,
                    type INTEGER NOT NULL, size INTEGER NOT NULL, width INTEGER NOT NULL, height INTEGER NOT NULL,
                    sha256 TEXT NOT NULL REFERENCES blobs(sha256), created_ms INTEGER NOT NULL, attached INTEGER NOT NULL DEFAULT 0
                ) STRICT;
                CREATE INDEX media_by_place ON media(place_id, created_ms DESC, id DESC) WHERE purpose = 3;
                CREATE INDEX media_by_owner ON media(owner, created_ms DESC, id DESC);
                CREATE TABLE profile_pictures (user INTEGER PRIMARY KEY, media_id TEXT NOT NULL) STRICT;
                CREATE TABLE check_in_photos (user INTEGER PRIMARY KEY, media_id TEXT NOT NULL) STRICT;
                CREATE TABLE uploads (
                    id TEXT PRIMARY KEY, owner INTEGER NOT NULL, purpose INTEGER NOT NULL, place_id INTEGER NOT NULL,
                    size INTEGER NOT NULL, created_ms INTEGER NOT NULL, expires_ms INTEGER NOT NULL, media_id TEXT,
                    location_removed INTEGER NOT NULL DEFAULT 0, deduplicated INTEGER NOT NULL DEFAULT 0, replaced TEXT NOT NULL DEFAULT ''
                ) STRICT;
                CREATE INDEX uploads_by_owner ON uploads(owner, created_ms);
                """)
        }
        migrator.registerMigration("media_deletes_and_expiry_by_index") { db in try db.execute(sql: Self.searchIndexesSQL) }
        try database.migrate(migrator)
        replies = SQLiteReplyStore(database: database)
        try sweep()
    }

    /// A deleted item's pointers (`deleteItem`): found by their user, the item's owner, whose
    /// row is the table's key (a pointer names only its own user's items: `finish` and
    /// `attachCheckInPhoto` check that), not by `media_id`, which no index holds.
    static let deletePointersSQL = [
        "DELETE FROM profile_pictures WHERE user = ? AND media_id = ?",
        "DELETE FROM check_in_photos WHERE user = ? AND media_id = ?",
    ]

    // MARK: Files

    func blobPath(_ sha: String) -> String { "\(blobDirectory)/\(sha.prefix(2))/\(sha)" }
    func partPath(_ upload: String) -> String { "\(uploadDirectory)/\(upload).part" }

    /// Deletes what a crash may have left: blob files no row names, temporary files, and parts of
    /// uploads that are gone. Runs before the service answers anything.
    func sweep() throws {
        let known = try database.read { db in Set(try String.fetchAll(db, cached: "SELECT sha256 FROM blobs")) }
        let live = try database.read { db in Set(try String.fetchAll(db, cached: "SELECT id FROM uploads WHERE media_id IS NULL")) }
        let fm = FileManager.default
        for shard in (try? fm.contentsOfDirectory(atPath: blobDirectory)) ?? [] {
            for name in (try? fm.contentsOfDirectory(atPath: "\(blobDirectory)/\(shard)")) ?? [] where !known.contains(name) {
                try? fm.removeItem(atPath: "\(blobDirectory)/\(shard)/\(name)")
            }
        }
        for name in (try? fm.contentsOfDirectory(atPath: uploadDirectory)) ?? [] {
            let id = name.hasSuffix(".part") ? String(name.dropLast(5)) : ""
            if !live.contains(id) { try? fm.removeItem(atPath: "\(uploadDirectory)/\(name)") }
        }
    }

    // MARK: Reads

    func item(_ id: String) async throws -> MediaRecord? {
        try await database.read { db in
            try Row.fetchOne(db, cached: "SELECT \(MediaRecord.columns) FROM media WHERE id = ?", binding: id, as: MediaRecord.init(row:))
        }
    }

    func upload(_ id: String) async throws -> UploadRecord? {
        try await database.read { db in
            try Row.fetchOne(db, cached: "SELECT \(UploadRecord.columns) FROM uploads WHERE id = ?", binding: id, as: UploadRecord.init(row:))
        }
    }

    func profilePicture(of user: UInt64) async throws -> MediaRecord? {
        try await database.read { db in
            try Row.fetchOne(db, cached: "SELECT \(MediaRecord.columns) FROM media WHERE id = (SELECT media_id FROM profile_pictures WHERE user = ?)",
                             binding: user, as: MediaRecord.init(row:))
        }
    }

    func checkInPhoto(of user: UInt64) async throws -> MediaRecord? {
        try await database.read { db in
            try Row.fetchOne(db, cached: "SELECT \(MediaRecord.columns) FROM media WHERE id = (SELECT media_id FROM check_in_photos WHERE user = ?)",
                             binding: user, as: MediaRecord.init(row:))
        }
    }

    func list(_ selection: PhotoSelection, after cursor: (Int64, String)?, limit: Int) async throws -> [MediaRecord] {
        try await database.read { db in
            var sql = "SELECT \(MediaRecord.columns) FROM media WHERE "
            var arguments: StatementArguments
            switch selection {
            case .venue(let place):
                sql += "purpose = 3 AND place_id = ?"
                arguments = [place]
            case .owner(let owner):
                sql += "owner = ?"
                arguments = [owner]
            }
            if let (ms, id) = cursor {
                sql += " AND (created_ms < ? OR (created_ms = ? AND id < ?))"
                arguments += [ms, ms, id]
            }
            sql += " ORDER BY created_ms DESC, id DESC LIMIT ?"
            arguments += [limit]
            return try Row.fetchAll(db, cached: sql, arguments: arguments, as: MediaRecord.init(row:))
        }
    }

    static func usage(_ db: Database, owner: UInt64, now: Int64) throws -> MediaUsage {
        let stored = try Int64.fetchOne(db, cached: "SELECT COALESCE(SUM(size), 0) FROM media WHERE owner = ?", arguments: [owner]) ?? 0
        let pending = try Int64.fetchOne(db, cached: "SELECT COALESCE(SUM(size), 0) FROM uploads WHERE owner = ? AND media_id IS NULL AND expires_ms > ?",
                                         arguments: [owner, now]) ?? 0
        let recent = try Int.fetchOne(db, cached: "SELECT COUNT(*) FROM uploads WHERE owner = ? AND created_ms > ?", arguments: [owner, now - 3_600_000]) ?? 0
        return MediaUsage(storedBytes: stored, pendingBytes: pending, uploadsLastHour: recent)
    }

    func usage(of owner: UInt64, now: Int64) async throws -> MediaUsage {
        try await database.read { db in try Self.usage(db, owner: owner, now: now) }
    }

    // MARK: Writes

    func startUpload(_ upload: UploadRecord, quotaBytes: Int64, uploadsPerHour: Int) async throws {
        try await database.write { db in
            let usage = try Self.usage(db, owner: upload.owner, now: upload.createdMs)
            if let refusal = QuotaRefusal(usage: usage, size: upload.size, quotaBytes: quotaBytes, uploadsPerHour: uploadsPerHour) {
                throw refusal
            }
            try db.run(sql: "INSERT INTO uploads (id, owner, purpose, place_id, size, created_ms, expires_ms) VALUES (?, ?, ?, ?, ?, ?, ?)",
                           arguments: [upload.id, upload.owner, upload.purpose.rawValue, upload.placeID, upload.size, upload.createdMs, upload.expiresMs])
        }
    }

    // MARK: Parts (one file per unfinished upload; the service takes one request of an upload at a time)

    func receiveChunk(_ upload: UploadRecord, offset: UInt64, data: [UInt8]) async throws -> ChunkOutcome {
        let fd = open(partPath(upload.id), O_WRONLY | O_CREAT | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw RPCError.internal("cannot write the upload (errno \(errno))") }
        defer { close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0 else { throw RPCError.internal("cannot write the upload (errno \(errno))") }
        let have = UInt64(info.st_size)
        let end = offset + UInt64(data.count)
        if end <= have { return .received(total: have) } // a retry: already here
        guard offset <= have else { return .outOfOrder(have: have) }
        let skip = Int(have - offset)
        let written = data.withUnsafeBytes { raw in pwrite(fd, raw.baseAddress! + skip, raw.count - skip, off_t(have)) }
        guard written == data.count - skip else { throw RPCError.internal("cannot write the upload (errno \(errno))") }
        return .received(total: end)
    }

    func receivedBytes(_ upload: UploadRecord) async throws -> [UInt8] {
        FileManager.default.contents(atPath: partPath(upload.id)).map(Array.init) ?? []
    }

    func photoBytes(_ item: MediaRecord, offset: Int, count: Int) async throws -> [UInt8]? {
        let fd = open(blobPath(item.sha256), O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil } // deleted meanwhile
        defer { close(fd) }
        var data = [UInt8](repeating: 0, count: count)
        var done = 0
        while done < count {
            let n = data.withUnsafeMutableBytes { pread(fd, $0.baseAddress! + done, count - done, off_t(offset + done)) }
            guard n > 0 else { throw RPCError.internal("cannot read photo \(item.id) (errno \(errno))") }
            done += n
        }
        return data
    }

    /// Files to unlink once the transaction that released them committed.
    typealias Released = [String]

    /// Drops one reference to `sha`; the blob's row goes with its last one.
    private func release(_ db: Database, sha: String, into released: inout Released) throws {
        try db.run(sql: "UPDATE blobs SET refs = refs - 1 WHERE sha256 = ?", arguments: [sha])
        if try Int.fetchOne(db, cached: "SELECT refs FROM blobs WHERE sha256 = ?", arguments: [sha]) ?? 0 <= 0 {
            try db.run(sql: "DELETE FROM blobs WHERE sha256 = ?", arguments: [sha])
            released.append(blobPath(sha))
        }
    }

    /// Deletes an item and its pointers, releasing its bytes.
    func deleteItem(_ db: Database, _ id: String, into released: inout Released) throws {
        guard let (sha, owner) = try Row.fetchOne(db, cached: "DELETE FROM media WHERE id = ? RETURNING sha256, owner", binding: id,
                                                  as: { row -> (String, Int64) in try (row[0], row[1]) }) else { return }
        for sql in Self.deletePointersSQL { try db.run(sql: sql, arguments: [owner, id]) }
        try release(db, sha: sha, into: &released)
    }

    /// Runs `body` in a transaction of the single writer, then unlinks the files it released
    /// while still holding the writer (see the type's comment).
    func writing<T: Sendable>(_ body: @escaping @Sendable (Database, inout Released) throws -> T) async throws -> (T, Bool) {
        try await database.writeWithoutTransaction { db, scope in
            var released: Released = []
            var result: T?
            let committed = try scope.transaction(db) {
                released = []
                result = try body(db, &released)
            }
            if !committed { released = [] } // a dry run released nothing
            for path in released { unlink(path) }
            return (result!, !released.isEmpty)
        }
    }

    /// The photo goes to a file of its own, synced, then renamed into place in the writer. The
    /// part is kept until the item is committed, so a failed finish can be retried; unchanged
    /// bytes are stored from a hard link to the part (synced), not written again.
    func finish(upload: UploadRecord, item: MediaRecord, bytes: [UInt8], unchanged: Bool, locationRemoved: Bool) async throws -> FinishedUpload? {
        let part = partPath(upload.id)
        let file = "\(part).final"
        unlink(file)
        if !unchanged || link(part, file) != 0 {
            try writeSynced(bytes, to: file)
        } else {
            try syncFile(file)
        }
        let blob = blobPath(item.sha256)
        let finished: FinishedUpload?
        do {
            (finished, _) = try await writing { db, released -> FinishedUpload? in
                guard try String.fetchOne(db, cached: "SELECT media_id FROM uploads WHERE id = ?", arguments: [upload.id]) == nil else {
                    unlink(file)
                    return nil // finished meanwhile
                }
                let existing = try Int.fetchOne(db, cached: "SELECT refs FROM blobs WHERE sha256 = ?", arguments: [item.sha256])
                if existing != nil {
                    try db.run(sql: "UPDATE blobs SET refs = refs + 1 WHERE sha256 = ?", arguments: [item.sha256])
                    unlink(file)
                } else {
                    try FileManager.default.createDirectory(atPath: (blob as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
                    guard rename(file, blob) == 0 else { throw StoreInvariant("cannot move the photo into the store (errno \(errno))") }
                    syncDirectory(of: blob)
                    try db.run(sql: "INSERT INTO blobs (sha256, size, refs) VALUES (?, ?, 1)", arguments: [item.sha256, item.size])
                }
                try db.run(sql: "INSERT INTO media (\(MediaRecord.columns)) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                               arguments: [item.id, item.owner, item.purpose.rawValue, item.placeID, item.type.rawValue, item.size,
                                           item.width, item.height, item.sha256, item.createdMs, item.attached])
                var replaced = ""
                if item.purpose == .profile {
                    replaced = try String.fetchOne(db, cached: "SELECT media_id FROM profile_pictures WHERE user = ?", arguments: [item.owner]) ?? ""
                    if !replaced.isEmpty { try self.deleteItem(db, replaced, into: &released) }
                    try db.run(sql: "INSERT OR REPLACE INTO profile_pictures (user, media_id) VALUES (?, ?)", arguments: [item.owner, item.id])
                }
                try db.run(sql: "UPDATE uploads SET media_id = ?, location_removed = ?, deduplicated = ?, replaced = ? WHERE id = ?",
                               arguments: [item.id, locationRemoved, existing != nil, replaced, upload.id])
                return FinishedUpload(item: item, deduplicated: existing != nil, replaced: replaced)
            }
        } catch {
            unlink(file)
            throw error
        }
        unlink(part) // a crash before this leaves a part of a finished upload: the start-up sweep deletes it
        return finished
    }

    /// - Returns: whether the bytes were released (nil: no such item of `owner`).
    func delete(_ id: String, owner: UInt64) async throws -> Bool? {
        let (found, releasedAny) = try await writing { db, released in
            guard try Int.fetchOne(db, cached: "SELECT 1 FROM media WHERE id = ? AND owner = ?", arguments: [id, owner]) != nil else { return false }
            try self.deleteItem(db, id, into: &released)
            return true
        }
        return found ? releasedAny : nil
    }

    /// Makes `id` (empty: none) `user`'s check-in photo, deleting the previous one.
    func attachCheckInPhoto(user: UInt64, id: String) async throws -> AttachOutcome {
        try await writing { db, released -> AttachOutcome in
            if !id.isEmpty {
                guard let purpose = try Row.fetchOne(db, cached: "SELECT purpose FROM media WHERE id = ? AND owner = ?", binding: id, user,
                                                     as: { try MediaV1.Purpose(rawValue: $0[0]) }) else {
                    return .notFound
                }
                guard purpose == .checkIn else { return .wrongPurpose }
            }
            let previous = try String.fetchOne(db, cached: "SELECT media_id FROM check_in_photos WHERE user = ?", arguments: [user]) ?? ""
            guard previous != id else { return .attached(released: "") }
            if !previous.isEmpty { try self.deleteItem(db, previous, into: &released) }
            if id.isEmpty {
                try db.run(sql: "DELETE FROM check_in_photos WHERE user = ?", arguments: [user])
            } else {
                try db.run(sql: "INSERT OR REPLACE INTO check_in_photos (user, media_id) VALUES (?, ?)", arguments: [user, id])
                try db.run(sql: "UPDATE media SET attached = 1 WHERE id = ?", arguments: [id])
            }
            return .attached(released: previous)
        }.0
    }

    /// Forgets an upload refused on its first bytes.
    func abandon(_ upload: String) async throws {
        _ = try await writing { db, released in
            try db.run(sql: "DELETE FROM uploads WHERE id = ? AND media_id IS NULL", arguments: [upload])
            released.append(self.partPath(upload))
        }
    }
}

/// fsync of an existing file.
func syncFile(_ path: String) throws {
    let fd = open(path, O_RDONLY | O_CLOEXEC)
    guard fd >= 0 else { throw RPCError.internal("cannot store the photo (errno \(errno))") }
    defer { close(fd) }
    guard fsync(fd) == 0 else { throw RPCError.internal("cannot store the photo (errno \(errno))") }
}

/// Writes `bytes` to a new file at `path` and fsyncs it.
func writeSynced(_ bytes: [UInt8], to path: String) throws {
    let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
    guard fd >= 0 else { throw RPCError.internal("cannot store the photo (errno \(errno))") }
    defer { close(fd) }
    var done = 0
    while done < bytes.count {
        let n = bytes.withUnsafeBytes { write(fd, $0.baseAddress! + done, bytes.count - done) }
        guard n > 0 else { throw RPCError.internal("cannot store the photo (errno \(errno))") }
        done += n
    }
    guard fsync(fd) == 0 else { throw RPCError.internal("cannot store the photo (errno \(errno))") }
}

/// fsync of the folder holding `path`, so a rename into it survives a power cut.
func syncDirectory(of path: String) {
    let fd = open((path as NSString).deletingLastPathComponent, O_RDONLY | O_DIRECTORY)
    guard fd >= 0 else { return }
    _ = fsync(fd)
    close(fd)
}

