import Foundation
import GRDB
import Identity
import Launcher
import Testing

/// `Backup` on a data folder made here: a consistent copy of a database another connection keeps
/// writing, the photos by content hash (one deleted mid-way listed as missing), a restore over an
/// existing folder that moves it aside, and a manifest whose paths cannot leave the backup.
@Suite struct BackupTests {
    let root: String

    init() throws {
        root = NSTemporaryDirectory() + "frienso-backup-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
    }

    /// A media folder with a database naming `blobs` and their files.
    func makeMedia(_ data: String, blobs: [String: Data]) throws -> DatabasePool {
        try FileManager.default.createDirectory(atPath: "\(data)/media", withIntermediateDirectories: true)
        let pool = try DatabasePool(path: "\(data)/media/media.sqlite")
        try pool.write { db in
            try db.execute(sql: "CREATE TABLE blobs (sha256 TEXT PRIMARY KEY, size INTEGER NOT NULL, refs INTEGER NOT NULL)")
            for (sha, bytes) in blobs {
                try db.execute(sql: "INSERT INTO blobs VALUES (?, ?, 1)", arguments: [sha, bytes.count])
            }
        }
        for (sha, bytes) in blobs {
            try FileManager.default.createDirectory(atPath: "\(data)/media/blobs/\(sha.prefix(2))", withIntermediateDirectories: true)
            try bytes.write(to: URL(fileURLWithPath: "\(data)/media/blobs/\(sha.prefix(2))/\(sha)"))
        }
        return pool
    }

    @Test func copiesWhileWritten_restoresOverAnExistingFolderByMovingItAside() async throws {
        defer { try? FileManager.default.removeItem(atPath: root) }
        let data = "\(root)/data", backup = "\(root)/backup"
        try FileManager.default.createDirectory(atPath: "\(data)/social", withIntermediateDirectories: true)
        let social = try DatabasePool(path: "\(data)/social/social.sqlite")
        try await social.write { db in
            try db.execute(sql: "CREATE TABLE friendships (a INTEGER, b INTEGER)")
            for i in 0..<1_000 { try db.execute(sql: "INSERT INTO friendships VALUES (?, ?)", arguments: [i, i + 1]) }
        }
        let photo = Data("a photo".utf8)
        let media = try makeMedia(data, blobs: [SHA256.hexDigest(Array(photo)): photo])

        // Writers keep going during the backup; the copy is one of their states, whole.
        let writing = Task.detached {
            for i in 1_000..<3_000 { try? social.write { db in try db.execute(sql: "INSERT INTO friendships VALUES (?, ?)", arguments: [i, i + 1]) } }
        }
        let manifest = try Backup.take(dataDirectory: data, into: backup)
        await writing.value
        #expect(manifest.databases.map(\.service) == ["social", "media"])
        #expect(manifest.files.map(\.path).contains("media/blobs/\(SHA256.hexDigest(Array(photo)).prefix(2))/\(SHA256.hexDigest(Array(photo)))"))
        let copied = try await DatabaseQueue(path: "\(backup)/social/social.sqlite").read { db in
            (try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM friendships")!, try Int.fetchOne(db, sql: "SELECT MAX(a) FROM friendships")!)
        }
        #expect(copied.0 >= 1_000 && copied.0 == copied.1 + 1, "a consistent prefix of the writes: \(copied)")
        try social.close()
        try media.close()

        // Restore over the live folder (changed since): it moves aside, the backup comes back.
        try Data("changed".utf8).write(to: URL(fileURLWithPath: "\(data)/marker"))
        let (restored, aside) = try Backup.restore(from: backup, dataDirectory: data, runDirectory: nil)
        #expect(restored == manifest)
        let moved = try #require(aside)
        #expect(FileManager.default.fileExists(atPath: "\(moved)/marker") && !FileManager.default.fileExists(atPath: "\(data)/marker"))
        let back = try await DatabaseQueue(path: "\(data)/social/social.sqlite").read { db in try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM friendships")! }
        #expect(back == copied.0)
        #expect(FileManager.default.contents(atPath: "\(data)/media/blobs/\(SHA256.hexDigest(Array(photo)).prefix(2))/\(SHA256.hexDigest(Array(photo)))") == photo)
    }

    @Test func aPhotoGoneBeforeItsCopyIsListed_aDamagedPhotoStoreIsRefused() throws {
        defer { try? FileManager.default.removeItem(atPath: root) }
        let data = "\(root)/data"
        let kept = Data("kept".utf8), gone = Data("gone".utf8)
        let media = try makeMedia(data, blobs: [SHA256.hexDigest(Array(kept)): kept, SHA256.hexDigest(Array(gone)): gone])
        try media.close()
        let goneSHA = SHA256.hexDigest(Array(gone))
        try FileManager.default.removeItem(atPath: "\(data)/media/blobs/\(goneSHA.prefix(2))/\(goneSHA)")
        let manifest = try Backup.take(dataDirectory: data, into: "\(root)/one")
        #expect(manifest.missingPhotos == [goneSHA])

        // A blob whose bytes do not hash to its name: the store is damaged, the backup says so.
        let keptSHA = SHA256.hexDigest(Array(kept))
        try Data("not what it was".utf8).write(to: URL(fileURLWithPath: "\(data)/media/blobs/\(keptSHA.prefix(2))/\(keptSHA)"))
        #expect(throws: BackupError.self) { try Backup.take(dataDirectory: data, into: "\(root)/two") }
    }

    @Test func aManifestNamingAFileOutsideTheBackupIsRefused() throws {
        defer { try? FileManager.default.removeItem(atPath: root) }
        let folder = "\(root)/evil"
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        let manifest = BackupManifest(format: BackupManifest.currentFormat, version: "x", startedAtMs: 0, finishedAtMs: 0, databases: [],
                                      files: [.init(path: "../../etc/passwd", bytes: 0, sha256: "")], missingPhotos: [])
        try JSONEncoder().encode(manifest).write(to: URL(fileURLWithPath: "\(folder)/manifest.json"))
        #expect(throws: BackupError.self) { try Backup.verify(folder) }
        #expect(throws: BackupError.self) { try Backup.verify("\(root)/nothing-here") }
    }
}
