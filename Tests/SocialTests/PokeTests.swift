import FriensoClient
import FriensoProto
import FriensoTesting
import Testing
import Wire

@Suite("social: pokes", .serialized, .timeLimit(.minutes(2)))
struct PokeTests {
    @Test(arguments: Engine.allCases) func poke_aFriend_isANoticeForDelivery_andReachesTheirLiveConnection(engine: Engine) async throws {
        try await withSocialOverSockets(engine) { stack in
            let (pia, piaID) = try await stack.user("p_pia")
            let (quo, quoID) = try await stack.user("p_quo")
            _ = try await pia.call(API.sendFriendRequest, SocialV1.SendFriendRequestRequest(username: "p_quo"))
            _ = try await quo.call(API.sendFriendRequest, SocialV1.SendFriendRequestRequest(username: "p_pia"))
            // The alerts service listens on "notices" for a wake-up, then pulls.
            let wakeUps = Subscriber(endpoint: stack.socialEvents, prefixes: ["notices"], logger: stack.logs.logger("alerts"))
            var wake = wakeUps.events.makeAsyncIterator()
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
            let woken = await wake.next()
            let seenLive = await liveEvents.next()
            poking.cancel()
            #expect(woken?.envelope.method == "social.Notice")
            #expect(seenLive?.method == "social.Poke")
            #expect(try SocialV1.Poke(serializedBytes: seenLive?.payload ?? []).from?.username == "p_pia")
            // The notice itself is in social's database, for a reader that missed the wake-up too.
            let internalClient = WireClient(endpoint: stack.socialEndpoint, options: .patient, logger: stack.logs.logger("alerts→social"))
            let notices = try await internalClient.call(API.listNotices, SocialV1.ListNoticesRequest()).notices
            #expect(notices.count == 1, "retries of one poke are one notice")
            #expect(notices.first?.kind == .poke)
            #expect(notices.first?.from?.userId == piaID && notices.first?.from?.username == "p_pia")
            #expect(notices.first?.toUserId == quoID)
            let after = try await internalClient.call(API.listNotices, SocialV1.ListNoticesRequest(afterId: notices[0].noticeId))
            #expect(after.notices.isEmpty)
            await expectError(.invalidArgument) {
                _ = try await internalClient.call(API.listNotices, SocialV1.ListNoticesRequest(limit: 5000))
            }
            await internalClient.close()
            await wakeUps.close()
        }
    }

    @Test(arguments: Engine.allCases) func circleRequests_andInvitations_areNotices(engine: Engine) async throws {
        try await withSocial(engine) { stack in
            let (una, unaID) = try await stack.user("p_una")
            let (vic, vicID) = try await stack.user("p_vic")
            _ = try await una.call(API.sendFriendRequest, SocialV1.SendFriendRequestRequest(username: "p_vic"))
            _ = try await vic.call(API.sendFriendRequest, SocialV1.SendFriendRequestRequest(username: "p_una"))
            _ = try await una.call(API.addToCircle, SocialV1.AddToCircleRequest(username: "p_vic"))
            _ = try await una.call(API.addToCircle, SocialV1.AddToCircleRequest(phone: "+1 562 555 0199"))
            let notices = try await stack.social.call(API.listNotices, SocialV1.ListNoticesRequest()).notices
            #expect(notices.map(\.kind) == [.circleRequest, .circleInvite])
            #expect(notices.allSatisfy { $0.from?.userId == unaID })
            #expect(notices[0].toUserId == vicID)
            #expect(notices[1].toPhone == "+15625550199" && notices[1].toUserId == 0)
        }
    }

    @Test(arguments: Engine.allCases) func pokes_areRateLimitedPerPair_onlyForFriends_andRetriesAreAppliedOnce(engine: Engine) async throws {
        try await withSocial(engine) { stack in
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
