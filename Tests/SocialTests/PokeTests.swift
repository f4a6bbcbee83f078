import FriensoClient
import FriensoProto
import FriensoTesting
import Testing
import Wire

@Suite("social: pokes", .serialized, .timeLimit(.minutes(2)))
struct PokeTests {
    @Test func poke_aFriend_isPublishedForDelivery_andReachesTheirLiveConnection() async throws {
        try await withSocial { stack in
            let (pia, piaID) = try await stack.user("p_pia")
            let (quo, quoID) = try await stack.user("p_quo")
            _ = try await pia.call(API.sendFriendRequest, SocialV1.SendFriendRequestRequest(username: "p_quo"))
            _ = try await quo.call(API.sendFriendRequest, SocialV1.SendFriendRequestRequest(username: "p_pia"))
            // The alerts service will listen on "pokes".
            let delivery = Subscriber(endpoint: stack.socialEvents, prefixes: ["pokes"], logger: stack.logs.logger("alerts"))
            var pokes = delivery.events.makeAsyncIterator()
            let live = try await quo.events()
            var liveEvents = live.makeAsyncIterator()
            // Subscriptions join asynchronously: poke until the first one is seen (the rate limit is per pair,
            // so the retries go through the idempotency key of the first).
            let poking = Task {
                while !Task.isCancelled {
                    _ = try? await pia.call(API.poke, SocialV1.PokeRequest(username: "p_quo"), idempotencyKey: "first-poke")
                    try? await Task.sleep(for: .milliseconds(50))
                }
            }
            let forDelivery = await pokes.next()
            let seenLive = await liveEvents.next()
            poking.cancel()
            let decoded = try SocialV1.Poke(serializedBytes: forDelivery?.envelope.payload ?? [])
            #expect(decoded.from?.userId == piaID)
            #expect(decoded.toUserId == quoID)
            #expect(seenLive?.method == "social.Poke")
            #expect(try SocialV1.Poke(serializedBytes: seenLive?.payload ?? []).from?.username == "p_pia")
            await delivery.close()
        }
    }

    @Test func pokes_areRateLimitedPerPair_onlyForFriends_andRetriesAreAppliedOnce() async throws {
        try await withSocial { stack in
            let (rex, _) = try await stack.user("p_rex")
            let (sue, _) = try await stack.user("p_sue")
            _ = try await stack.user("p_tom")
            _ = try await rex.call(API.sendFriendRequest, SocialV1.SendFriendRequestRequest(username: "p_sue"))
            _ = try await sue.call(API.sendFriendRequest, SocialV1.SendFriendRequestRequest(username: "p_rex"))
            let first = try await rex.call(API.poke, SocialV1.PokeRequest(username: "p_sue"), idempotencyKey: "k1")
            let retried = try await rex.call(API.poke, SocialV1.PokeRequest(username: "p_sue"), idempotencyKey: "k1")
            #expect(retried == first, "a retry is answered from the reply cache, not rate-limited")
            await expectError(.resourceExhausted, containing: "wait") {
                _ = try await rex.call(API.poke, SocialV1.PokeRequest(username: "p_sue"), idempotencyKey: "k2")
            }
            _ = try await sue.call(API.poke, SocialV1.PokeRequest(username: "p_rex")) // the other direction is its own pair
            await expectError(.failedPrecondition, containing: "only poke friends") {
                _ = try await rex.call(API.poke, SocialV1.PokeRequest(username: "p_tom"))
            }
            await expectError(.failedPrecondition) { _ = try await rex.call(API.poke, SocialV1.PokeRequest(username: "p_rex")) }
            await expectError(.notFound) { _ = try await rex.call(API.poke, SocialV1.PokeRequest(username: "p_nobody")) }
            await expectError(.invalidArgument) { _ = try await rex.call(API.poke, SocialV1.PokeRequest()) }
        }
    }
}
