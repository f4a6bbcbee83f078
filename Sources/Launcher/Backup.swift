import Foundation
import GRDB
import Identity
public import ServiceKit
import Storage
public import Wire

/// What `frienso-launch backup DIR` wrote: every file with its size and SHA-256, and when.
public struct BackupManifest: Codable, Sendable, Equatable {
    public static let fileName = "manifest.json"
    public static let currentFormat = 1

    public struct File: Codable, Sendable, Equatable {
        /// Relative to the backup folder and to the data folder alike (`geo/geo.sqlite`, `media/blobs/ab/ab…`).
        public var path: String
        public var bytes: Int64
        public var sha256: String

        public init(path: String, bytes: Int64, sha256: String) {
            self.path = path
            self.bytes = bytes
            self.sha256 = sha256
        }
    }

    public struct Database: Codable, Sendable, Equatable {
        public var service: String
        public var path: String
        /// When its snapshot was taken (the copy holds every write committed before then).
        public var snapshotAtMs: Int64
        public var pages: Int
    }

    public var format: Int
    public var version: String
    /// Every write acknowledged before `startedAtMs` is in the backup; each database is a
    /// consistent snapshot taken at its own `snapshotAtMs`, between the two.
    public var startedAtMs: Int64
    public var finishedAtMs: Int64
    public var databases: [Database]
    public var files: [File]
    /// Photos the media snapshot names whose file was deleted before it could be copied (a photo
    /// deleted during the backup); restored, they read as missing.
    public var missingPhotos: [String]

    public init(format: Int, version: String, startedAtMs: Int64, finishedAtMs: Int64, databases: [Database], files: [File],
                missingPhotos: [String]) {
        self.format = format
        self.version = version
        self.startedAtMs = startedAtMs
        self.finishedAtMs = finishedAtMs
        self.databases = databases
        self.files = files
        self.missingPhotos = missingPhotos
    }
}

public struct BackupError: Error, CustomStringConvertible {
    public var description: String
    public init(_ description: String) { self.description = description }
}

/// Online backups of a deployment's data folder and their restore. The databases are copied with
/// SQLite's online backup API in one step each (a consistent snapshot while the services keep
/// writing); the photo store is copied by content hash (each file checked against its name, a
/// hard link when the backup is on the same file system, since a blob never changes once written);
/// the manifest, written last, lists every file's SHA-256. A restore checks every checksum before
/// it touches anything, and moves an existing data folder aside rather than overwrite it.
public enum Backup {
    /// The members with a database, in the order they are copied (media last: its photos follow).
    public static let services = ["accounts", "social", "geo", "alerts", "media"]

    // MARK: Backup

    public static func take(dataDirectory data: String, into target: String, now: () -> Int64 = WallClock.milliseconds) throws -> BackupManifest {
        let fm = FileManager.default
        if fm.fileExists(atPath: target) {
            guard (try fm.contentsOfDirectory(atPath: target)).isEmpty else {
                throw BackupError("\(target) is not empty: a backup goes into a new folder")
            }
        }
        try fm.createDirectory(atPath: target, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        let started = now()
        var databases: [BackupManifest.Database] = []
        var files: [BackupManifest.File] = []
        for service in services {
            let relative = "\(service)/\(service).sqlite"
            let source = "\(data)/\(relative)"
            guard fm.fileExists(atPath: source) else { continue } // not deployed here, or never started
            try fm.createDirectory(atPath: "\(target)/\(service)", withIntermediateDirectories: true)
            let (at, pages) = try copyDatabase(source, to: "\(target)/\(relative)", now: now)
            databases.append(.init(service: service, path: relative, snapshotAtMs: at, pages: pages))
            files.append(try describe("\(target)/\(relative)", as: relative))
        }
        var missing: [String] = []
        if databases.contains(where: { $0.service == "media" }) {
            let (copied, gone) = try copyPhotos(named: "\(target)/media/media.sqlite", from: "\(data)/media", to: "\(target)/media")
            files += copied
            missing = gone
        }
        var manifest = BackupManifest(format: BackupManifest.currentFormat, version: FriensoVersion.current, startedAtMs: started,
                                      finishedAtMs: now(), databases: databases, files: files, missingPhotos: missing)
        manifest.files.sort { $0.path < $1.path }
        try syncTree(target)
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        try writeDurably(try encoder.encode(manifest), to: "\(target)/\(BackupManifest.fileName)")
        return manifest
    }

    /// One database, copied in a single backup step (SQLite holds a read snapshot of the source
    /// for the step: writers go on in WAL mode), then checked (`quick_check`).
    static func copyDatabase(_ source: String, to destination: String, now: () -> Int64) throws -> (at: Int64, pages: Int) {
        // Read-write, though it only reads: a read-only connection cannot open a WAL database
        // whose -shm file is not there yet.
        var reading = Configuration()
        reading.busyMode = .timeout(10)
        let from = try DatabaseQueue(path: source, configuration: reading)
        let to = try DatabaseQueue(path: destination)
        var at: Int64 = 0
        var pages = 0
        try from.inDatabase { fromDB in
            try to.writeWithoutTransaction { toDB in
                at = now()
                try fromDB.backup(to: toDB) { progress in pages = progress.totalPageCount }
            }
        }
        try to.writeWithoutTransaction { db in
            // One file: the copy needs no -wal beside it.
            try db.execute(sql: "PRAGMA journal_mode = DELETE")
            let check = try String.fetchOne(db, sql: "PRAGMA quick_check") ?? ""
            guard check == "ok" else { throw BackupError("the copy of \(source) fails SQLite's check: \(check)") }
        }
        try from.close()
        try to.close()
        return (at, pages)
    }

    /// The blobs the media snapshot names, from the live store into the backup.
    static func copyPhotos(named snapshot: String, from media: String, to target: String) throws -> ([BackupManifest.File], [String]) {
        var readOnly = Configuration()
        readOnly.readonly = true
        let names = try DatabaseQueue(path: snapshot, configuration: readOnly).read { db in
            try String.fetchAll(db, sql: "SELECT sha256 FROM blobs ORDER BY sha256")
        }
        var files: [BackupManifest.File] = []
        var missing: [String] = []
        let fm = FileManager.default
        for sha in names {
            guard sha.count == 64, sha.allSatisfy(\.isHexDigit) else { throw BackupError("media names a blob \"\(sha)\" that is not a SHA-256") }
            let relative = "blobs/\(sha.prefix(2))/\(sha)"
            let source = "\(media)/\(relative)", destination = "\(target)/\(relative)"
            guard fm.fileExists(atPath: source) else {
                missing.append(sha)
                continue
            }
            try fm.createDirectory(atPath: "\(target)/blobs/\(sha.prefix(2))", withIntermediateDirectories: true)
            // Immutable once written: a hard link is a copy that costs nothing; else copy.
            if link(source, destination) != 0 { try fm.copyItem(atPath: source, toPath: destination) }
            let file = try describe(destination, as: "media/\(relative)")
            guard file.sha256 == sha else {
                throw BackupError("the photo \(source) does not hash to its name (\(file.sha256)): the store is damaged")
            }
            files.append(file)
        }
        return (files, missing)
    }

    /// What `frienso-launch backup` prints.
    public static func report(taken manifest: BackupManifest, from data: String, into folder: String) -> String {
        let bytes = manifest.files.reduce(Int64(0)) { $0 + $1.bytes }
        var lines = [
            "backed up \(manifest.databases.map(\.service).joined(separator: ", ")) and \(manifest.files.count - manifest.databases.count) photos from \(data)",
            "into \(folder): \(manifest.files.count) files, \(bytes) bytes, in \(manifest.finishedAtMs - manifest.startedAtMs) ms",
            "holds every write acknowledged before \(iso(manifest.startedAtMs))",
        ]
        if !manifest.missingPhotos.isEmpty {
            lines.append("warning: \(manifest.missingPhotos.count) photos were deleted while the backup ran and are not in it")
        }
        return lines.joined(separator: "\n")
    }

    /// A line for each service that keeps its data in PostgreSQL (so in that database, not in a
    /// backup of the data folder), naming the database without its password.
    public static func notInBackup(_ config: FriensoConfig) -> [String] {
        services.compactMap { service in
            guard let storage = config.storage(for: service), storage.kind == "postgres" else { return nil }
            return "note: \(service) keeps its data in PostgreSQL (\(PostgresSettings.redact(storage.url ?? ""))), not in this backup: "
                + "back up that database with pg_dump or pg_basebackup (docs/operations.md, Backups)"
        }
    }

    /// What `frienso-launch restore` prints.
    public static func report(restored manifest: BackupManifest, into data: String, movedAside: String?) -> String {
        var lines: [String] = []
        if let movedAside { lines.append("the data that was in \(data) is now in \(movedAside)") }
        lines.append("restored \(manifest.databases.map(\.service).joined(separator: ", ")) and \(manifest.files.count - manifest.databases.count) photos into \(data) (\(manifest.files.count) files checked)")
        lines.append("the deployment holds what was acknowledged before \(iso(manifest.startedAtMs)): start it with frienso-launch")
        return lines.joined(separator: "\n")
    }

    private static func iso(_ ms: Int64) -> String {
        ISO8601DateFormatter().string(from: Date(timeIntervalSince1970: Double(ms) / 1_000))
    }

    // MARK: Verify and restore

    /// Reads the manifest and checks every file it lists (size and SHA-256).
    public static func verify(_ folder: String) throws -> BackupManifest {
        let path = "\(folder)/\(BackupManifest.fileName)"
        guard let data = FileManager.default.contents(atPath: path) else {
            throw BackupError("no \(BackupManifest.fileName) in \(folder): not a finished frienso backup")
        }
        let manifest = try JSONDecoder().decode(BackupManifest.self, from: data)
        guard manifest.format == BackupManifest.currentFormat else {
            throw BackupError("\(folder) is backup format \(manifest.format); this frienso-launch reads format \(BackupManifest.currentFormat)")
        }
        for file in manifest.files {
            guard !file.path.hasPrefix("/"), !file.path.split(separator: "/").contains("..") else {
                throw BackupError("the manifest names a file outside the backup: \(file.path)")
            }
            let found = try? describe("\(folder)/\(file.path)", as: file.path)
            guard let found, found == file else {
                throw BackupError("\(folder)/\(file.path) is missing or damaged (its size or SHA-256 differs from the manifest's)")
            }
        }
        return manifest
    }

    /// Restores a verified backup into `data` for a stopped deployment. An existing data folder
    /// with anything in it is moved aside to `<data>.before-restore-<time>`, never deleted.
    /// - Returns: the manifest, and where the previous data went (nil when there was none).
    public static func restore(from folder: String, dataDirectory data: String, runDirectory run: String?,
                               now: () -> Int64 = WallClock.milliseconds) throws -> (BackupManifest, movedAside: String?) {
        if let run, let status = try? LaunchStatus.read(run), LaunchStatus.alive(status.launcherPID) {
            throw BackupError("frienso-launch \(status.launcherPID) runs on \(run): stop the deployment before restoring")
        }
        for service in services {
            if let run, let pid = Supervisor.recordedPID(run, service), LaunchStatus.alive(pid) {
                throw BackupError("\(service) still runs (pid \(pid)): stop the deployment before restoring")
            }
        }
        let manifest = try verify(folder)
        let fm = FileManager.default
        var aside: String?
        if fm.fileExists(atPath: data), !((try? fm.contentsOfDirectory(atPath: data)) ?? []).isEmpty {
            let formatter = DateFormatter()
            formatter.dateFormat = "yyyyMMdd-HHmmss"
            formatter.timeZone = TimeZone(identifier: "UTC")
            let moved = "\(data).before-restore-\(formatter.string(from: Date(timeIntervalSince1970: Double(now()) / 1_000)))"
            try fm.moveItem(atPath: data, toPath: moved)
            aside = moved
        }
        try fm.createDirectory(atPath: data, withIntermediateDirectories: true)
        for file in manifest.files {
            let destination = "\(data)/\(file.path)"
            try fm.createDirectory(atPath: (destination as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
            let temporary = destination + ".restoring"
            try? fm.removeItem(atPath: temporary)
            try fm.copyItem(atPath: "\(folder)/\(file.path)", toPath: temporary)
            try fsync(path: temporary)
            try fm.moveItem(atPath: temporary, toPath: destination)
        }
        try syncTree(data)
        return (manifest, aside)
    }

    // MARK: Files

    static func describe(_ path: String, as relative: String) throws -> BackupManifest.File {
        guard let (bytes, hex) = try SHA256.hexDigest(ofFile: path) else { throw BackupError("cannot read \(path)") }
        return .init(path: relative, bytes: bytes, sha256: hex)
    }

    static func writeDurably(_ data: Data, to path: String) throws {
        let temporary = path + ".writing"
        try data.write(to: URL(fileURLWithPath: temporary))
        try fsync(path: temporary)
        try FileManager.default.moveItem(atPath: temporary, toPath: path)
        try fsync(path: (path as NSString).deletingLastPathComponent)
    }

    /// fsync of every file and folder under `root` (a backup is only a backup once on disk).
    static func syncTree(_ root: String) throws {
        let fm = FileManager.default
        if let walker = fm.enumerator(atPath: root) {
            for case let relative as String in walker { try fsync(path: "\(root)/\(relative)") }
        }
        try fsync(path: root)
    }

    static func fsync(path: String) throws {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw BackupError("cannot open \(path) to sync it: errno \(errno)") }
        defer { close(fd) }
        guard Glibc.fsync(fd) == 0 else { throw BackupError("fsync of \(path) failed: errno \(errno)") }
    }
}
