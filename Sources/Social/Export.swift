public import FriensoProto
import GRDB
import Storage
public import Wire

/// Export my data: everything social stores about the caller.
extension SocialService {
    public func exportMyData(_ request: SocialV1.ExportMyDataRequest, _ context: RequestContext) async throws -> SocialV1.ExportMyDataResponse {
        let caller = try context.requireCaller()
        var out = SocialV1.ExportMyDataResponse()
        out.friends = try await listFriends(SocialV1.ListFriendsRequest(), context).friends
        let (requests, pokes) = try await store.exportRows(of: caller)
        let users = try await profiles(Set(requests.flatMap { [$0.from, $0.to] } + pokes.map(\.from)), context)
        out.requests = requests.map { Self.view($0, users) }
        out.blocked = try await listBlocked(SocialV1.ListBlockedRequest(), context).users
        out.circle = try await showCircle(SocialV1.ShowCircleRequest(), context)
        out.circleRequests = try await listCircleRequests(SocialV1.ListCircleRequestsRequest(), context).requests
        out.findable = try await store.findable(caller)
        var token = ""
        repeat {
            let page = try await listExchanges(SocialV1.ListExchangesRequest(pageSize: 100, pageToken: token), context)
            out.exchanges += page.exchanges
            token = page.nextPageToken
        } while !token.isEmpty
        for p in pokes {
            let poke = SocialV1.Poke(pokeId: p.id, from: users[p.from] ?? SocialV1.UserRef(userId: p.from), toUserId: p.to, createdAtMs: p.at)
            if p.from == caller { out.pokesSent.append(poke) } else { out.pokesReceived.append(poke) }
        }
        return out
    }
}

extension SQLiteSocialStore {
    /// Every friend request and poke `user` sent or received, oldest first.
    func exportRows(of user: UInt64) async throws -> ([RequestRecord], [PokeRecord]) {
        try await database.read { db in
            let requests = try Row.fetchAll(db, cached: "SELECT * FROM friend_requests WHERE from_user = ?1 OR to_user = ?1 ORDER BY id",
                                            binding: user, as: RequestRecord.init(row:))
            let pokes = try Row.fetchAll(db, sql: "SELECT id, from_user, to_user, created_at_ms FROM pokes WHERE from_user = ?1 OR to_user = ?1 ORDER BY id",
                                         arguments: [user]) { try PokeRecord(id: $0[0], from: $0[1], to: $0[2], at: $0[3]) }
            return (requests, pokes)
        }
    }
}
