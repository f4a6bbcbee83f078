import FriensoProto
import GRDB
import Storage

/// The minute's expiry pass (`MediaWorker`), and the indexes its statements and a photo's
/// delete search.
extension SQLiteMediaStore {
    /// What lets every delete and every expiry pass find its rows without walking a table, however
    /// many photos the store keeps (issue 16, item 156). Before them, each photo deleted (replaced
    /// as a profile or check-in photo, deleted, expired, erased) walked `media` whole for the
    /// foreign-key check of its blob's row, and the expiry pass walked `media` and `uploads` once
    /// a minute, all in the single writer: 180 ms a deleted photo and 200 ms a pass at 1M users.
    /// - `media_by_blob`: a blob's row is deleted only once no item names it, which SQLite checks
    ///   by searching `media` for its `sha256`;
    /// - `media_unattached`: check-in photos never attached (`orphansSQL`);
    /// - `uploads_unfinished`: uploads not finished (`staleUploadsSQL`, and the start-up sweep);
    /// - `uploads_by_created`: upload rows past their day (`pruneUploadsSQL`).
    static let searchIndexesSQL = """
        CREATE INDEX media_by_blob ON media(sha256);
        CREATE INDEX media_unattached ON media(created_ms) WHERE purpose = \(MediaV1.Purpose.checkIn.rawValue) AND attached = 0;
        CREATE INDEX uploads_unfinished ON uploads(expires_ms) WHERE media_id IS NULL;
        CREATE INDEX uploads_by_created ON uploads(created_ms);
        """
    /// The expiry pass's statements (`expire`), each searching an index of `searchIndexesSQL`.
    static let staleUploadsSQL = "SELECT id FROM uploads WHERE media_id IS NULL AND expires_ms <= ?"
    static let expireUploadsSQL = "DELETE FROM uploads WHERE media_id IS NULL AND expires_ms <= ?"
    static let pruneUploadsSQL = "DELETE FROM uploads WHERE created_ms <= ?"
    static let orphansSQL = "SELECT id FROM media WHERE purpose = \(MediaV1.Purpose.checkIn.rawValue) AND attached = 0 AND created_ms <= ?"

    /// Drops unfinished uploads past their time (and their parts), finished upload rows older
    /// than a day (kept that long so a late retry of FinishUpload is answered), and check-in
    /// photos never attached to a check-in within `unattachedFor`.
    func expire(now: Int64, unattachedFor: Int64) async throws -> (uploads: Int, photos: Int) {
        let (counts, _) = try await writing { db, released -> (Int, Int) in
            let stale = try String.fetchAll(db, cached: Self.staleUploadsSQL, arguments: [now])
            for id in stale { released.append(self.partPath(id)) }
            try db.run(sql: Self.expireUploadsSQL, arguments: [now])
            try db.run(sql: Self.pruneUploadsSQL, arguments: [now - 86_400_000])
            let orphans = try String.fetchAll(db, cached: Self.orphansSQL, arguments: [now - unattachedFor])
            for id in orphans { try self.deleteItem(db, id, into: &released) }
            return (stale.count, orphans.count)
        }
        return counts
    }
}
