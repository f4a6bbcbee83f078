import FriensoProto
import FriensoTesting
import Foundation
import Testing
import Wire

@Suite("social: export and erasure", .serialized, .timeLimit(.minutes(2)))
struct ErasureTests {
    @Test("export shows everything social keeps about you; erasure deletes every row that names you, tells the replicas, and leaves no trace",
          arguments: Engine.allCases)
    func exportThenErase(engine: Engine) async throws {
        let storage = try await TestStorage.fresh(engine, service: "social")
        let secretPhone = "+15625550177", secretPlace = "Rosewood Secret Garden"
        try await withSocial(storage: storage) { stack in
            let (ann, annID) = try await stack.user("e_ann")
            let (ben, benID) = try await stack.user("e_ben")
            let (_, calID) = try await stack.user("e_cal")
            let (dot, _) = try await stack.user("e_dot")
            _ = try await ann.call(API.sendFriendRequest, SocialV1.SendFriendRequestRequest(username: "e_ben"))
            _ = try await ben.call(API.sendFriendRequest, SocialV1.SendFriendRequestRequest(username: "e_ann"))
            _ = try await ann.call(API.sendFriendRequest, SocialV1.SendFriendRequestRequest(username: "e_dot"))
            _ = try await ann.call(API.block, SocialV1.BlockRequest(username: "e_cal"))
            _ = try await ann.call(API.addToCircle, SocialV1.AddToCircleRequest(username: "e_ben"))
            _ = try await ben.call(API.respondToCircleRequest, SocialV1.RespondToCircleRequestRequest(ownerUsername: "e_ann", action: .accept))
            _ = try await ann.call(API.addToCircle, SocialV1.AddToCircleRequest(phone: secretPhone))
            for person in [ann, ben] { _ = try await person.call(API.setFindable, SocialV1.SetFindableRequest(findable: true)) }
            _ = try await ann.call(API.addExchange, SocialV1.AddExchangeRequest(username: "e_ben", hasLocation: true, latitude: 33.78,
                                                                                 longitude: -118.11, placeLabel: secretPlace))
            _ = try await ben.call(API.addExchange, SocialV1.AddExchangeRequest(username: "e_ann"))
            _ = try await ann.call(API.poke, SocialV1.PokeRequest(username: "e_ben"))
            _ = try await ben.call(API.poke, SocialV1.PokeRequest(username: "e_ann"))

            let export = try await ann.call(API.exportMyData, SocialV1.ExportMyDataRequest())
            #expect(export.friends.map { $0.user?.username } == ["e_ben"])
            #expect(export.requests.map { $0.to?.username } == ["e_ben", "e_dot"], "the mutual request collapsed into the first")
            #expect(export.blocked.map(\.username) == ["e_cal"])
            #expect(export.circle?.members.map { $0.user?.username ?? $0.phone } == ["e_ben", secretPhone])
            #expect(export.findable)
            #expect(export.exchanges.map(\.placeLabel) == [secretPlace])
            #expect(export.pokesSent.map(\.toUserId) == [benID] && export.pokesReceived.map { $0.from?.userId } == [benID])

            // On PostgreSQL graph events are relayed from the database's log just after their
            // commit: the set-up's are all out before the erasure's are counted.
            try await stack.graphEventsRelayed()
            _ = stack.events.take()
            let erased = try await stack.social.call(API.eraseUser, SocialV1.EraseUserRequest(userId: annID, traces: ["e_ann", secretPhone]))
            // A friendship, a block, 2 requests, 2 circle rows, the findable setting, an exchange, 2 pokes, 4 notices.
            #expect(erased.erased == 14)
            let events = try await eventuallyValue("the erasure's graph events") { () -> [SocialV1.GraphEvent]? in
                let events = stack.events.all.filter { $0.topic == "graph" }.compactMap { try? SocialV1.GraphEvent(serializedBytes: $0.payload) }
                return Set(events.map(\.change)).count >= 5 ? events : nil
            }
            #expect(Set(events.map(\.change)) == [.friendshipRemoved, .blockRemoved, .circleMemberRemoved, .findableOff, .exchangeRemoved])
            #expect(events.allSatisfy { $0.userA == annID || $0.userB == annID })
            #expect(events.contains { $0.change == .blockRemoved && $0.userA == annID && $0.userB == calID })

            let bens = try await ben.call(API.exportMyData, SocialV1.ExportMyDataRequest())
            #expect(bens.friends.isEmpty && bens.requests.isEmpty && bens.exchanges.isEmpty && (bens.circle?.memberOf.isEmpty ?? true))
            #expect(bens.pokesSent.isEmpty && bens.pokesReceived.isEmpty)
            #expect(try await dot.call(API.listFriendRequests, SocialV1.ListFriendRequestsRequest()).incoming.isEmpty)
            let notices = try await stack.social.call(API.listNotices, SocialV1.ListNoticesRequest()).notices
            #expect(notices.allSatisfy { $0.from?.userId != annID && $0.toUserId != annID }, "notices naming her are gone")
            // Erasing again finds nothing left (accounts repeats the call until it succeeds).
            #expect(try await stack.social.call(API.eraseUser, SocialV1.EraseUserRequest(userId: annID)).erased == 0)
        }
        #expect(try await storage.residue([secretPhone, secretPlace]) == [])
        await storage.remove()
    }
}
