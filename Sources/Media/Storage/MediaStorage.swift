import Foundation
import FriensoProto
import Wire

/// What media keeps: photos' metadata, their bytes (stored once per content, with a count of the
/// items holding them), profile and check-in pointers, uploads in progress with the bytes received
/// so far, and idempotent replies. Two engines implement it with the same behaviour (the media
/// tests run on both): `SQLiteMediaStore` (the embedded default: `media.sqlite`, bytes in files
/// named by their SHA-256) and `PostgresMediaStore` (the `media` schema of a PostgreSQL database,
/// bytes in `bytea` columns, so that every instance on every host reads and writes the same photos).
///
/// The rules (who may read what, quotas' limits, what a chunk must hold) live in the service; the
/// storage applies each change in one transaction, committed before it returns, and is what makes
/// concurrent changes safe: two chunks of one upload, two finishes of one upload, or two
/// instances' maintenance passes take turns on the rows they touch.
protocol MediaStorage: Sendable {
    /// Where replies to idempotent requests are kept (the same database).
    var replies: any ReplyStore { get }

    // Reads.
    func item(_ id: String) async throws -> MediaRecord?
    func upload(_ id: String) async throws -> UploadRecord?
    func profilePicture(of user: UInt64) async throws -> MediaRecord?
    func checkInPhoto(of user: UInt64) async throws -> MediaRecord?
    /// Venue photos of `place`, or every photo of `owner`: newest first, after the cursor
    /// `(createdMs, id)` when one is given.
    func list(_ selection: PhotoSelection, after cursor: (Int64, String)?, limit: Int) async throws -> [MediaRecord]
    func usage(of owner: UInt64, now: Int64) async throws -> MediaUsage
    /// `count` bytes of `item`'s photo from `offset`; nil when its bytes are gone (deleted since).
    func photoBytes(_ item: MediaRecord, offset: Int, count: Int) async throws -> [UInt8]?

    // Uploads.
    /// Starts an upload after checking the quotas in the same transaction, so two concurrent
    /// starts cannot both squeeze under a limit.
    /// - Throws: `QuotaRefusal`.
    func startUpload(_ upload: UploadRecord, quotaBytes: Int64, uploadsPerHour: Int) async throws
    /// Adds a chunk at `offset` to an unfinished upload. A chunk wholly received already (a
    /// retry) adds nothing; one overlapping the end adds its new bytes only.
    func receiveChunk(_ upload: UploadRecord, offset: UInt64, data: [UInt8]) async throws -> ChunkOutcome
    /// The bytes an unfinished upload received so far, in order.
    func receivedBytes(_ upload: UploadRecord) async throws -> [UInt8]
    /// Stores a checked upload's photo (`bytes`; `unchanged`: exactly the bytes received), unless
    /// the same bytes are stored already, records the item, for a profile picture makes it the
    /// current one (deleting the one it replaces), marks the upload finished and drops its bytes.
    /// - Returns: nil when the upload was finished meanwhile (by another request): its stored
    ///   answer is the answer.
    func finish(upload: UploadRecord, item: MediaRecord, bytes: [UInt8], unchanged: Bool, locationRemoved: Bool) async throws -> FinishedUpload?
    /// Forgets an upload refused on its first bytes.
    func abandon(_ upload: String) async throws

    // Changes.
    /// - Returns: whether the bytes were released (nil: no such item of `owner`).
    func delete(_ id: String, owner: UInt64) async throws -> Bool?
    /// Makes `id` (empty: none) `user`'s check-in photo, deleting the previous one.
    func attachCheckInPhoto(user: UInt64, id: String) async throws -> AttachOutcome
    /// Drops unfinished uploads past their time (with their bytes), finished upload rows older
    /// than a day (kept that long so a late retry of FinishUpload is answered), and check-in
    /// photos never attached to a check-in within `unattachedFor`.
    func expire(now: Int64, unattachedFor: Int64) async throws -> (uploads: Int, photos: Int)

    // A deleted account.
    /// Deletes every photo `user` owns, their pointers, uploads and kept replies. - Returns: rows deleted.
    func erase(_ user: UInt64, traces: [String]) async throws -> Int
    /// Once rows were erased: removes what the engine may still hold of them (SQLite's WAL,
    /// PostgreSQL's dead row versions).
    func scrubErased() async throws

    /// What the store holds, for checks (tests, operators): blobs by SHA-256 with their
    /// reference counts, copies of photo bytes, and unfinished uploads holding bytes.
    func contents() async throws -> StoredContents
}

/// Which photos a listing reads.
enum PhotoSelection: Sendable {
    case venue(place: UInt64)
    case owner(UInt64)
}

enum ChunkOutcome: Sendable, Equatable {
    /// Everything up to `total` bytes is received.
    case received(total: UInt64)
    /// The chunk starts past what was received: chunks go in order.
    case outOfOrder(have: UInt64)
    /// The upload is no longer there (expired and dropped meanwhile).
    case gone
}

enum AttachOutcome: Sendable {
    case attached(released: String)
    case notFound
    case wrongPurpose
}

struct FinishedUpload: Sendable {
    var item: MediaRecord
    var deduplicated: Bool
    var replaced: String
}

/// What counts against a user's quotas: the size of every item they hold (each counts in full
/// even when its bytes are shared), unfinished uploads, and uploads started this hour.
struct MediaUsage: Sendable {
    var storedBytes: Int64
    var pendingBytes: Int64
    var uploadsLastHour: Int
}

struct StoredContents: Sendable, Equatable {
    var references: [String: Int]
    /// Copies of photo bytes: blob files (SQLite), rows with bytes (PostgreSQL).
    var byteCopies: Int
    /// Unfinished uploads' bytes: part files (SQLite), uploads with part rows (PostgreSQL).
    var uploadsHoldingBytes: Int
}

/// Why an upload cannot start: a user's quotas (the service maps each to a status).
enum QuotaRefusal: Error, Equatable {
    case uploadRate(perHour: Int)
    case storage(usedBytes: Int64, quotaBytes: Int64, wantedBytes: Int64)
}

extension QuotaRefusal {
    /// The refusal `usage` earns an upload of `size` bytes, if any.
    init?(usage: MediaUsage, size: Int64, quotaBytes: Int64, uploadsPerHour: Int) {
        if usage.uploadsLastHour >= uploadsPerHour {
            self = .uploadRate(perHour: uploadsPerHour)
        } else if usage.storedBytes + usage.pendingBytes + size > quotaBytes {
            self = .storage(usedBytes: usage.storedBytes + usage.pendingBytes, quotaBytes: quotaBytes, wantedBytes: size)
        } else {
            return nil
        }
    }
}

/// A stored photo's metadata.
struct MediaRecord: Sendable {
    var id: String
    var owner: UInt64
    var purpose: MediaV1.Purpose
    var placeID: UInt64
    var type: MediaV1.ImageType
    var size: Int64
    var width: UInt32
    var height: UInt32
    var sha256: String
    var createdMs: Int64
    var attached: Bool

    var proto: MediaV1.MediaItem {
        MediaV1.MediaItem(mediaId: id, ownerId: owner, purpose: purpose, placeId: placeID, type: type, sizeBytes: UInt64(size),
                          width: width, height: height, createdAtMs: createdMs, sha256: sha256,
                          mimeType: ImageInspector.mimeType(type), attached: attached)
    }

    /// The columns both engines store it in, in this order.
    static let columns = "id, owner, purpose, place_id, type, size, width, height, sha256, created_ms, attached"
}

/// An upload in progress (or finished: then `mediaID` is set, so finishing again answers the same).
struct UploadRecord: Sendable {
    var id: String
    var owner: UInt64
    var purpose: MediaV1.Purpose
    var placeID: UInt64
    var size: Int64
    var createdMs: Int64
    var expiresMs: Int64
    var mediaID: String? = nil
    var locationRemoved = false
    var deduplicated = false
    var replaced = ""

    static let columns = "id, owner, purpose, place_id, size, created_ms, expires_ms, media_id, location_removed, deduplicated, replaced"

    /// Upload and media ids: 128 random bits as 32 hex characters. Anything else names nothing
    /// (checked before a lookup, so no odd string reaches a query or a file name).
    static func isID(_ id: String) -> Bool { id.utf8.count == 32 && id.allSatisfy(\.isHexDigit) }
}

/// 128 random bits as 32 hex characters: media and upload ids cannot be guessed.
func randomID() -> String {
    var g = SystemRandomNumberGenerator()
    return (0..<2).map { _ in String(format: "%016llx", g.next() as UInt64) }.joined()
}
