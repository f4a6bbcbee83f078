import FriensoProto
import FriensoTesting
import Foundation
import Testing
import Wire

@Suite("social: friend requests, friendships, blocks", .serialized, .timeLimit(.minutes(2)))
struct FriendsTests {
    func friends(_ client: Person) async throws -> [String] {
        try await client.call(API.listFriends, SocialV1.ListFriendsRequest()).friends.compactMap { $0.user?.username }
    }

    @Test(arguments: Engine.allCases) func request_thenAccept_makesFriendsOnBothSides_withProfiles(engine: Engine) async throws {
        try await withSocial(engine) { stack in
            let (ann, _) = try await stack.user("ann")
            let (ben, _) = try await stack.user("ben")
            let sent = try await ann.call(API.sendFriendRequest, SocialV1.SendFriendRequestRequest(username: "BEN"))
            #expect(sent.request?.state == .pending)
            #expect(sent.request?.to?.firstName == "Ben")
            #expect(!sent.becameFriends)
            let pending = try await ben.call(API.listFriendRequests, SocialV1.ListFriendRequestsRequest())
            #expect(pending.incoming.map(\.requestId) == [sent.request?.requestId ?? 0])
            #expect(try await ann.call(API.listFriendRequests, SocialV1.ListFriendRequestsRequest()).outgoing.count == 1)
            let accepted = try await ben.call(API.respondToFriendRequest,
                                              SocialV1.RespondToFriendRequestRequest(requestId: sent.request?.requestId ?? 0, action: .accept))
            #expect(accepted.request?.state == .accepted)
            #expect(try await friends(ann) == ["ben"])
            #expect(try await friends(ben) == ["ann"])
            #expect(try await ben.call(API.listFriendRequests, SocialV1.ListFriendRequestsRequest()).incoming.isEmpty)
        }
    }

    @Test(arguments: Engine.allCases) func mutualRequests_collapseIntoOneFriendship(engine: Engine) async throws {
        try await withSocial(engine) { stack in
            let (cat, catID) = try await stack.user("cat")
            let (dan, _) = try await stack.user("dan")
            _ = try await cat.call(API.sendFriendRequest, SocialV1.SendFriendRequestRequest(username: "dan"))
            let back = try await dan.call(API.sendFriendRequest, SocialV1.SendFriendRequestRequest(userId: catID))
            #expect(back.becameFriends)
            #expect(try await friends(cat) == ["dan"])
            #expect(try await friends(dan) == ["cat"])
            #expect(try await cat.call(API.listFriendRequests, SocialV1.ListFriendRequestsRequest()).outgoing.isEmpty)
        }
    }

    @Test(arguments: Engine.allCases) func simultaneousMutualRequests_stillMakeExactlyOneFriendship(engine: Engine) async throws {
        try await withSocial(engine) { stack in
            let (eve, _) = try await stack.user("eve")
            let (fay, _) = try await stack.user("fay")
            async let a = eve.call(API.sendFriendRequest, SocialV1.SendFriendRequestRequest(username: "fay"))
            async let b = fay.call(API.sendFriendRequest, SocialV1.SendFriendRequestRequest(username: "eve"))
            let (ra, rb) = try await (a, b)
            #expect(ra.becameFriends != rb.becameFriends, "exactly one of the two collapses")
            #expect(try await friends(eve) == ["fay"])
            #expect(try await friends(fay) == ["eve"])
        }
    }

    @Test(arguments: Engine.allCases) func refusedRequests_selfFriendOrBlocked_areFailedPrecondition(engine: Engine) async throws {
        try await withSocial(engine) { stack in
            let (gus, _) = try await stack.user("gus")
            let (hal, _) = try await stack.user("hal")
            let (ivy, _) = try await stack.user("ivy")
            await expectError(.failedPrecondition, containing: "yourself") {
                _ = try await gus.call(API.sendFriendRequest, SocialV1.SendFriendRequestRequest(username: "gus"))
            }
            _ = try await gus.call(API.sendFriendRequest, SocialV1.SendFriendRequestRequest(username: "hal"))
            _ = try await hal.call(API.sendFriendRequest, SocialV1.SendFriendRequestRequest(username: "gus"))
            await expectError(.failedPrecondition, containing: "already friends") {
                _ = try await gus.call(API.sendFriendRequest, SocialV1.SendFriendRequestRequest(username: "hal"))
            }
            _ = try await ivy.call(API.block, SocialV1.BlockRequest(username: "gus"))
            await expectError(.failedPrecondition) { _ = try await gus.call(API.sendFriendRequest, SocialV1.SendFriendRequestRequest(username: "ivy")) }
            await expectError(.failedPrecondition) { _ = try await ivy.call(API.sendFriendRequest, SocialV1.SendFriendRequestRequest(username: "gus")) }
        }
    }

    @Test(arguments: Engine.allCases) func badInputs_areInvalidArgumentOrNotFound(engine: Engine) async throws {
        try await withSocial(engine) { stack in
            let (jon, _) = try await stack.user("jon")
            await expectError(.notFound, containing: "nobody_here") {
                _ = try await jon.call(API.sendFriendRequest, SocialV1.SendFriendRequestRequest(username: "nobody_here"))
            }
            await expectError(.notFound) { _ = try await jon.call(API.sendFriendRequest, SocialV1.SendFriendRequestRequest(userId: 987_654)) }
            await expectError(.invalidArgument) { _ = try await jon.call(API.sendFriendRequest, SocialV1.SendFriendRequestRequest()) }
            await expectError(.invalidArgument) {
                _ = try await jon.call(API.sendFriendRequest, SocialV1.SendFriendRequestRequest(userId: 1, username: "jon"))
            }
            await expectError(.invalidArgument) {
                _ = try await jon.call(API.sendFriendRequest, SocialV1.SendFriendRequestRequest(username: String(repeating: "x", count: 5_000)))
            }
            await expectError(.notFound) {
                _ = try await jon.call(API.respondToFriendRequest, SocialV1.RespondToFriendRequestRequest(requestId: 424_242, action: .accept))
            }
            await expectError(.invalidArgument, containing: "request_id") {
                _ = try await jon.call(API.respondToFriendRequest, SocialV1.RespondToFriendRequestRequest(action: .accept))
            }
            await expectError(.invalidArgument, containing: "action") {
                _ = try await jon.call(API.respondToFriendRequest, SocialV1.RespondToFriendRequestRequest(requestId: 1, action: .init(rawValue: 77)))
            }
            await expectError(.notFound) { _ = try await jon.call(API.removeFriend, SocialV1.RemoveFriendRequest(username: "jon")) }
            await expectError(.unauthenticated) { _ = try await stack.anonymous.call(API.listFriends, SocialV1.ListFriendsRequest()) }
        }
    }

    @Test(arguments: Engine.allCases) func onlyTheRecipientAnswers_andOnlyTheSenderCancels(engine: Engine) async throws {
        try await withSocial(engine) { stack in
            let (kim, _) = try await stack.user("kim")
            let (leo, _) = try await stack.user("leo")
            let (mia, _) = try await stack.user("mia")
            let id = try await kim.call(API.sendFriendRequest, SocialV1.SendFriendRequestRequest(username: "leo")).request?.requestId ?? 0
            for action in [SocialV1.RequestAction.accept, .reject, .dismiss] {
                await expectError(.permissionDenied, containing: "not addressed to you") {
                    _ = try await mia.call(API.respondToFriendRequest, SocialV1.RespondToFriendRequestRequest(requestId: id, action: action))
                }
                await expectError(.permissionDenied) {
                    _ = try await kim.call(API.respondToFriendRequest, SocialV1.RespondToFriendRequestRequest(requestId: id, action: action))
                }
            }
            await expectError(.permissionDenied, containing: "only the sender") {
                _ = try await leo.call(API.cancelFriendRequest, SocialV1.CancelFriendRequestRequest(requestId: id))
            }
            let cancelled = try await kim.call(API.cancelFriendRequest, SocialV1.CancelFriendRequestRequest(requestId: id))
            #expect(cancelled.request?.state == .cancelled)
            await expectError(.failedPrecondition) {
                _ = try await leo.call(API.respondToFriendRequest, SocialV1.RespondToFriendRequestRequest(requestId: id, action: .accept))
            }
            #expect(try await leo.call(API.listFriendRequests, SocialV1.ListFriendRequestsRequest()).incoming.isEmpty)
        }
    }

    /// A resend whose reply cache entry did not survive a crash runs again: the same answer, or a
    /// second cancel, gets the request as it is; a different answer is still refused.
    @Test(arguments: Engine.allCases) func answersAndCancels_sentAgain_returnTheRequestAsItIs(engine: Engine) async throws {
        try await withSocial(engine) { stack in
            let (ned, _) = try await stack.user("ned")
            let (ola, _) = try await stack.user("ola")
            let (pam, _) = try await stack.user("pam")
            let first = try await ned.call(API.sendFriendRequest, SocialV1.SendFriendRequestRequest(username: "ola")).request?.requestId ?? 0
            for _ in 0..<2 {
                let cancelled = try await ned.call(API.cancelFriendRequest, SocialV1.CancelFriendRequestRequest(requestId: first))
                #expect(cancelled.request?.state == .cancelled && cancelled.request?.requestId == first)
            }
            let second = try await ned.call(API.sendFriendRequest, SocialV1.SendFriendRequestRequest(username: "ola")).request?.requestId ?? 0
            #expect(second != first, "a cancelled request is not revived")
            for _ in 0..<2 {
                let accepted = try await ola.call(API.respondToFriendRequest, SocialV1.RespondToFriendRequestRequest(requestId: second, action: .accept))
                #expect(accepted.request?.state == .accepted)
            }
            #expect(try await ola.call(API.listFriends, SocialV1.ListFriendsRequest()).friends.count == 1)
            await expectError(.failedPrecondition, containing: "accepted already") {
                _ = try await ola.call(API.respondToFriendRequest, SocialV1.RespondToFriendRequestRequest(requestId: second, action: .reject))
            }
            await expectError(.failedPrecondition) {
                _ = try await ned.call(API.cancelFriendRequest, SocialV1.CancelFriendRequestRequest(requestId: second))
            }
            let third = try await pam.call(API.sendFriendRequest, SocialV1.SendFriendRequestRequest(username: "ned")).request?.requestId ?? 0
            for _ in 0..<2 {
                #expect(try await ned.call(API.respondToFriendRequest, SocialV1.RespondToFriendRequestRequest(requestId: third, action: .reject)).request?.state == .rejected)
            }
        }
    }

    @Test(arguments: Engine.allCases) func reject_andDismiss(engine: Engine) async throws {
        try await withSocial(engine) { stack in
            let (ned, _) = try await stack.user("ned")
            let (oli, _) = try await stack.user("oli")
            let (pam, _) = try await stack.user("pam")
            let fromNed = try await ned.call(API.sendFriendRequest, SocialV1.SendFriendRequestRequest(username: "pam")).request?.requestId ?? 0
            let fromOli = try await oli.call(API.sendFriendRequest, SocialV1.SendFriendRequestRequest(username: "pam")).request?.requestId ?? 0
            let rejected = try await pam.call(API.respondToFriendRequest, SocialV1.RespondToFriendRequestRequest(requestId: fromNed, action: .reject))
            #expect(rejected.request?.state == .rejected)
            _ = try await pam.call(API.respondToFriendRequest, SocialV1.RespondToFriendRequestRequest(requestId: fromOli, action: .dismiss))
            #expect(try await pam.call(API.listFriendRequests, SocialV1.ListFriendRequestsRequest()).incoming.isEmpty, "dismissed is hidden")
            let all = try await pam.call(API.listFriendRequests, SocialV1.ListFriendRequestsRequest(includeDismissed: true))
            #expect(all.incoming.map(\.requestId) == [fromOli])
            #expect(all.incoming.first?.dismissed == true)
            // A dismissed request can still be accepted later.
            _ = try await pam.call(API.respondToFriendRequest, SocialV1.RespondToFriendRequestRequest(requestId: fromOli, action: .accept))
            #expect(try await friends(pam) == ["oli"])
            // After a rejection the sender may ask again.
            let again = try await ned.call(API.sendFriendRequest, SocialV1.SendFriendRequestRequest(username: "pam"))
            #expect(again.request?.state == .pending)
        }
    }

    @Test(arguments: Engine.allCases) func removeFriend_removesItForBoth(engine: Engine) async throws {
        try await withSocial(engine) { stack in
            let (quin, _) = try await stack.user("quin")
            let (rae, raeID) = try await stack.user("rae")
            _ = try await quin.call(API.sendFriendRequest, SocialV1.SendFriendRequestRequest(username: "rae"))
            _ = try await rae.call(API.sendFriendRequest, SocialV1.SendFriendRequestRequest(username: "quin"))
            _ = try await quin.call(API.removeFriend, SocialV1.RemoveFriendRequest(userId: raeID))
            #expect(try await friends(quin).isEmpty)
            #expect(try await friends(rae).isEmpty)
            await expectError(.notFound) { _ = try await rae.call(API.removeFriend, SocialV1.RemoveFriendRequest(username: "quin")) }
        }
    }

    /// The people one blocked are listed in the order they were blocked, even within one
    /// millisecond (social's clock stands still here), not by id: on both engines alike.
    @Test(arguments: Engine.allCases) func blockedPeople_areListedInTheOrderTheyWereBlocked(engine: Engine) async throws {
        try await withSocial(engine, now: stillClock) { stack in
            let (vic, _) = try await stack.user("vic")
            let (_, yanID) = try await stack.user("yan")
            let (_, xiaID) = try await stack.user("xia")
            #expect(yanID < xiaID)
            _ = try await vic.call(API.block, SocialV1.BlockRequest(username: "xia"))
            _ = try await vic.call(API.block, SocialV1.BlockRequest(username: "yan"))
            #expect(try await vic.call(API.listBlocked, SocialV1.ListBlockedRequest()).users.map(\.username) == ["xia", "yan"])
        }
    }

    @Test(arguments: Engine.allCases) func block_endsFriendshipAndRequests_unblockAllowsAgain(engine: Engine) async throws {
        try await withSocial(engine) { stack in
            let (sam, _) = try await stack.user("sam")
            let (tia, _) = try await stack.user("tia")
            let (uma, _) = try await stack.user("uma")
            _ = try await sam.call(API.sendFriendRequest, SocialV1.SendFriendRequestRequest(username: "tia"))
            _ = try await tia.call(API.sendFriendRequest, SocialV1.SendFriendRequestRequest(username: "sam"))
            _ = try await uma.call(API.sendFriendRequest, SocialV1.SendFriendRequestRequest(username: "sam"))
            let blockTia = try await sam.call(API.block, SocialV1.BlockRequest(username: "tia"))
            #expect(blockTia.removedFriendship)
            let blockUma = try await sam.call(API.block, SocialV1.BlockRequest(username: "uma"))
            #expect(blockUma.removedRequests == 1)
            #expect(try await friends(sam).isEmpty)
            #expect(try await friends(tia).isEmpty)
            #expect(try await uma.call(API.listFriendRequests, SocialV1.ListFriendRequestsRequest()).outgoing.isEmpty)
            #expect(try await sam.call(API.listBlocked, SocialV1.ListBlockedRequest()).users.map(\.username) == ["tia", "uma"])
            await expectError(.failedPrecondition, containing: "yourself") { _ = try await sam.call(API.block, SocialV1.BlockRequest(username: "sam")) }
            _ = try await sam.call(API.unblock, SocialV1.UnblockRequest(username: "tia"))
            await expectError(.notFound) { _ = try await sam.call(API.unblock, SocialV1.UnblockRequest(username: "tia")) }
            _ = try await tia.call(API.sendFriendRequest, SocialV1.SendFriendRequestRequest(username: "sam"))
        }
    }

    @Test(arguments: Engine.allCases) func retriedSendRequest_withSameKey_isAppliedOnce(engine: Engine) async throws {
        try await withSocial(engine) { stack in
            let (vic, _) = try await stack.user("vic")
            let (wes, _) = try await stack.user("wes")
            let request = SocialV1.SendFriendRequestRequest(username: "wes")
            let first = try await vic.call(API.sendFriendRequest, request, idempotencyKey: "add-wes")
            _ = try await wes.call(API.respondToFriendRequest, SocialV1.RespondToFriendRequestRequest(requestId: first.request?.requestId ?? 0, action: .reject))
            // A retry of the first send replays its reply instead of sending a second request.
            let retry = try await vic.call(API.sendFriendRequest, request, idempotencyKey: "add-wes")
            #expect(retry == first)
            #expect(try await wes.call(API.listFriendRequests, SocialV1.ListFriendRequestsRequest()).incoming.isEmpty)
        }
    }

    /// Friend requests claim first (issue 16, item 54): no read of the reply store before the
    /// handler; a retry after a restart meets its claim and is answered from the store, never
    /// sent again (here after the first was rejected, when a second run would send a new one).
    @Test(arguments: Engine.allCases) func aFriendRequestRetriedAfterARestart_isAnsweredAsItWas_neverSentTwice(engine: Engine) async throws {
        let dir = try TemporaryDirectory("frienso-social-data")
        defer { dir.remove() }
        let storage = try await TestStorage.fresh(engine, service: "social")
        let accountsDir = "\(dir.path)/accounts"
        let request = SocialV1.SendFriendRequestRequest(username: "wes")
        let first = try await withSocial(storage: storage, accountsDirectory: accountsDir) { stack in
            let (vic, _) = try await stack.user("vic")
            let (wes, _) = try await stack.user("wes")
            let first = try await vic.call(API.sendFriendRequest, request, idempotencyKey: "add-wes")
            _ = try await wes.call(API.respondToFriendRequest, SocialV1.RespondToFriendRequestRequest(requestId: first.request?.requestId ?? 0, action: .reject),
                                   idempotencyKey: "reject-vic")
            return first
        }
        try await withSocial(storage: storage, accountsDirectory: accountsDir) { stack in
            let vic = try await stack.login("vic", password: "password vic")
            let wes = try await stack.login("wes", password: "password wes")
            let retry = try await vic.call(API.sendFriendRequest, request, idempotencyKey: "add-wes")
            #expect(retry == first)
            #expect(try await wes.call(API.listFriendRequests, SocialV1.ListFriendRequestsRequest()).incoming.isEmpty, "not sent twice")
            let answer = try await wes.call(API.respondToFriendRequest, SocialV1.RespondToFriendRequestRequest(requestId: first.request?.requestId ?? 0,
                                                                                                              action: .reject), idempotencyKey: "reject-vic")
            #expect(answer.request?.state == .rejected)
            // A new request under a new key is sent as usual.
            _ = try await vic.call(API.sendFriendRequest, request, idempotencyKey: "add-wes-again")
            #expect(try await wes.call(API.listFriendRequests, SocialV1.ListFriendRequestsRequest()).incoming.count == 1)
        }
        await storage.remove()
    }

    @Test(arguments: Engine.allCases) func friendships_surviveARestartOfSocial(engine: Engine) async throws {
        let dir = try TemporaryDirectory("frienso-social-data")
        defer { dir.remove() }
        let storage = try await TestStorage.fresh(engine, service: "social")
        let accountsDir = "\(dir.path)/accounts"
        try await withSocial(storage: storage, accountsDirectory: accountsDir) { stack in
            let (xan, _) = try await stack.user("xan")
            _ = try await stack.user("yul")
            let id = try await xan.call(API.sendFriendRequest, SocialV1.SendFriendRequestRequest(username: "yul")).request?.requestId ?? 0
            #expect(id > 0)
        }
        try await withSocial(storage: storage, accountsDirectory: accountsDir) { stack in
            let yul = try await stack.login("yul", password: "password yul")
            let incoming = try await yul.call(API.listFriendRequests, SocialV1.ListFriendRequestsRequest()).incoming
            #expect(incoming.map { $0.from?.username } == ["xan"])
            _ = try await yul.call(API.respondToFriendRequest, SocialV1.RespondToFriendRequestRequest(requestId: incoming[0].requestId, action: .accept))
            #expect(try await friends(yul) == ["xan"])
        }
        await storage.remove()
    }
}
