import Foundation
public import FriensoProto
import GRDB
public import Wire

/// Searching people by username prefix: never friends, nor anyone blocked either way.
extension SocialService {
    // MARK: Search

    public func searchUsers(_ request: SocialV1.SearchUsersRequest, _ context: RequestContext) async throws -> SocialV1.SearchUsersResponse {
        let caller = try context.requireCaller()
        let query = request.query.trimmingCharacters(in: .whitespaces)
        guard (1...50).contains(query.count) else { throw RPCError.invalidArgument("query: 1-50 characters") }
        let pageSize = request.pageSize == 0 ? 20 : Int(request.pageSize)
        guard pageSize <= 50 else { throw RPCError.invalidArgument("page_size: at most 50") }
        guard request.pageToken.isEmpty || (request.pageToken.hasPrefix("u:") && request.pageToken.count <= 66) else {
            throw RPCError.invalidArgument("page_token: not a token from a previous page")
        }
        var after = String(request.pageToken.dropFirst(2))
        var excluded = try await store.excludedFromDiscovery(for: caller)
        excluded.insert(caller)
        var users: [SocialV1.UserRef] = []
        var exhausted = false
        // Filtering can empty a batch; a few rounds fill the page (bounded, so a pathological
        // prefix cannot keep the handler busy).
        for _ in 0..<10 where users.count < pageSize && !exhausted {
            let batch = try await accounts.call(AccountsAPI.searchUsers,
                                                AccountsV1.SearchUsersRequest(prefix: query, afterUsername: after, limit: 100),
                                                options: CallOptions(deadline: context.downstreamBudget))
            for profile in batch.profiles {
                after = profile.username
                if excluded.contains(profile.userId) { continue }
                users.append(SocialV1.UserRef(userId: profile.userId, username: profile.username, firstName: profile.firstName,
                                              lastName: profile.lastName, profilePictureMediaId: profile.profilePictureMediaId))
                if users.count == pageSize { break }
            }
            exhausted = !batch.more && (users.count < pageSize || after == batch.profiles.last?.username)
        }
        let next = exhausted ? "" : "u:\(after)"
        return SocialV1.SearchUsersResponse(users: users, nextPageToken: next)
    }
}

extension SQLiteSocialStore {
    /// Users `user` must not be offered: friends, and anyone blocked either way.
    func excludedFromDiscovery(for user: UInt64) async throws -> Set<UInt64> {
        try await database.read { db in
            let ids = try UInt64.fetchAll(db, cached: """
                SELECT user_b FROM friendships WHERE user_a = ?1
                UNION SELECT user_a FROM friendships WHERE user_b = ?1
                UNION SELECT blocked FROM blocks WHERE blocker = ?1
                UNION SELECT blocker FROM blocks WHERE blocked = ?1
                """, arguments: [user])
            return Set(ids)
        }
    }
}
