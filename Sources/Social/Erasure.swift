public import FriensoProto
import GRDB
import Storage
public import Wire

/// Erasing a deleted account (accounts calls `EraseUser` until it succeeds): every row that names
/// the person goes in one transaction, and the graph events it implies (friendships, blocks,
/// circle memberships, findable, exchanges) reach the replicas like any other change.
extension SocialService {
    public func eraseUser(_ request: SocialV1.EraseUserRequest, _ context: RequestContext) async throws -> SocialV1.EraseUserResponse {
        try Erasure.check(user: request.userId, traces: request.traces)
        let erased = try await store.erase(request.userId, traces: request.traces)
        try await store.scrubErasedRows()
        if erased > 0 { context.logger.info("erased a deleted account", metadata: ["user-id": "\(request.userId)", "rows": "\(erased)"]) }
        return SocialV1.EraseUserResponse(erased: UInt32(clamping: erased))
    }
}

extension SQLiteSocialStore {
    /// - Returns: the rows deleted.
    func erase(_ user: UInt64, traces: [String]) async throws -> Int {
        try await mutate { db, events in
            events += try Row.fetchAll(db, cached: "SELECT user_a, user_b FROM friendships WHERE user_a = ?1 OR user_b = ?1", binding: user) {
                try Self.event(.friendshipRemoved, $0[0], $0[1])
            }
            events += try Row.fetchAll(db, cached: "SELECT blocker, blocked FROM blocks WHERE blocker = ?1 OR blocked = ?1", binding: user) {
                try Self.event(.blockRemoved, $0[0], $0[1])
            }
            events += try Row.fetchAll(db, cached: "SELECT owner, member FROM circle WHERE state = ?1 AND (owner = ?2 OR member = ?2)",
                                       binding: SocialV1.CircleState.accepted.rawValue, user) { try Self.event(.circleMemberRemoved, $0[0], $0[1]) }
            if try Self.isFindable(db, user) { events.append(Self.event(.findableOff, user, 0)) }
            events += try Row.fetchAll(db, cached: "SELECT user_a, user_b FROM exchanges WHERE user_a = ?1 OR user_b = ?1", binding: user) {
                try Self.event(.exchangeRemoved, $0[0], $0[1])
            }

            var erased = 0
            for sql in [
                "DELETE FROM friendships WHERE user_a = ?1 OR user_b = ?1",
                "DELETE FROM blocks WHERE blocker = ?1 OR blocked = ?1",
                "DELETE FROM friend_requests WHERE from_user = ?1 OR to_user = ?1",
                "DELETE FROM circle WHERE owner = ?1 OR member = ?1",
                "DELETE FROM discovery WHERE user_id = ?1",
                "DELETE FROM exchange_intents WHERE from_user = ?1 OR to_user = ?1",
                "DELETE FROM exchanges WHERE user_a = ?1 OR user_b = ?1",
                "DELETE FROM pokes WHERE from_user = ?1 OR to_user = ?1",
                "DELETE FROM notices WHERE from_user = ?1 OR to_user = ?1",
            ] {
                try db.run(sql: sql, arguments: [user])
                erased += db.changesCount
            }
            erased += try SQLiteReplyStore.eraseReplies(db, of: user, mentioning: traces)
            return erased
        }
    }

    func scrubErasedRows() async throws {
        try await database.truncateWAL()
    }
}
