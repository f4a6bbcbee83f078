public import FriensoProto
import GRDB
import Storage
public import Wire

/// Erasing a deleted account (accounts calls `EraseUser` until it succeeds): every photo the
/// person owns (its bytes go with the last reference: identical bytes another user uploaded stay
/// theirs), their profile and check-in pointers, their uploads with the parts on disk, and kept
/// replies; one transaction, files unlinked once it committed.
extension MediaService {
    public func eraseUser(_ request: MediaV1.EraseUserRequest, _ context: RequestContext) async throws -> MediaV1.EraseUserResponse {
        try Erasure.check(user: request.userId, traces: request.traces)
        let erased = try await store.erase(request.userId, traces: request.traces)
        try await Erasure.finish(store.database, user: request.userId, erased: erased, logger: context.logger)
        return MediaV1.EraseUserResponse(erased: UInt32(clamping: erased))
    }
}

extension MediaStore {
    /// - Returns: the rows deleted.
    func erase(_ user: UInt64, traces: [String]) async throws -> Int {
        try await writing { db, released -> Int in
            var erased = 0
            for id in try String.fetchAll(db, sql: "SELECT id FROM media WHERE owner = ?", arguments: [user]) {
                try self.deleteItem(db, id, into: &released)
                erased += 1
            }
            let parts = try String.fetchAll(db, sql: "SELECT id FROM uploads WHERE owner = ? AND media_id IS NULL", arguments: [user])
            released += parts.map(self.partPath)
            for sql in ["DELETE FROM uploads WHERE owner = ?1", "DELETE FROM profile_pictures WHERE user = ?1", "DELETE FROM check_in_photos WHERE user = ?1"] {
                try db.execute(sql: sql, arguments: [user])
                erased += db.changesCount
            }
            erased += try SQLiteReplyStore.eraseReplies(db, of: user, mentioning: traces)
            return erased
        }.0
    }
}
