import FriensoProto
import PostgresNIO
import Storage

/// The minute's expiry pass (`MediaWorker`); its indexes are migration `media_expiry_by_index`.
extension PostgresMediaStore {
    /// Uploads not finished by their time: a search of `uploads_unfinished`.
    static func expireUploads(now: Int64) -> PostgresQuery {
        "DELETE FROM uploads WHERE media_id IS NULL AND expires_ms <= \(now) RETURNING 1"
    }

    /// Upload rows past their day (kept that long for a late retry of FinishUpload): a search of `uploads_by_created`.
    static func pruneUploads(before cutoff: Int64) -> PostgresQuery {
        "DELETE FROM uploads WHERE created_ms <= \(cutoff)"
    }

    /// The check-in photos never attached, made before `cutoff`: a search of `media_unattached`,
    /// whose predicate is in the text (a bound purpose could not prove it on a generic plan).
    static func orphans(before cutoff: Int64) -> PostgresQuery {
        """
        SELECT id FROM media WHERE purpose = \(unescaped: String(MediaV1.Purpose.checkIn.rawValue)) AND NOT attached AND created_ms <= \(cutoff)
        FOR UPDATE SKIP LOCKED
        """
    }

    /// Two instances' passes at once each delete what they find; an item the other took is
    /// skipped (`SKIP LOCKED`), and deleting a row twice deletes it once.
    func expire(now: Int64, unattachedFor: Int64) async throws -> (uploads: Int, photos: Int) {
        try await database.transaction { connection in
            let stale = try await PostgresServiceDatabase.count(connection.prepared(Self.expireUploads(now: now), logger: self.logger))
            try await connection.prepared(Self.pruneUploads(before: now - 86_400_000), logger: self.logger)
            let orphans = try await connection.prepared(Self.orphans(before: now - unattachedFor), logger: self.logger)
            var ids: [String] = []
            for try await id in orphans.decode(String.self) { ids.append(id) }
            for id in ids { try await self.deleteItem(id, on: connection) }
            return (stale, ids.count)
        }
    }
}
