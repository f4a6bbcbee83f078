import FriensoProto
import Social
import FriensoTesting
import Testing
import Wire

@Suite("social: core circle", .serialized, .timeLimit(.minutes(2)))
struct CircleTests {
    /// Makes `a` and `b` friends.
    func befriend(_ a: Person, _ b: Person, _ bName: String, _ aName: String) async throws {
        _ = try await a.call(API.sendFriendRequest, SocialV1.SendFriendRequestRequest(username: bName))
        _ = try await b.call(API.sendFriendRequest, SocialV1.SendFriendRequestRequest(username: aName))
    }

    func circle(_ client: Person) async throws -> SocialV1.ShowCircleResponse {
        try await client.call(API.showCircle, SocialV1.ShowCircleRequest())
    }

    @Test(arguments: Engine.allCases) func addingAFriend_sendsACoreFriendRequest_theyAccept(engine: Engine) async throws {
        try await withSocial(engine) { stack in
            let (amy, _) = try await stack.user("amy")
            let (bo, _) = try await stack.user("bo_c")
            try await befriend(amy, bo, "bo_c", "amy")
            let added = try await amy.call(API.addToCircle, SocialV1.AddToCircleRequest(username: "bo_c"))
            #expect(added.member?.state == .pending)
            let asks = try await bo.call(API.listCircleRequests, SocialV1.ListCircleRequestsRequest())
            #expect(asks.requests.map { $0.owner?.username } == ["amy"])
            let accepted = try await bo.call(API.respondToCircleRequest, SocialV1.RespondToCircleRequestRequest(ownerUsername: "amy", action: .accept))
            #expect(accepted.member?.state == .accepted)
            let mine = try await circle(amy)
            #expect(mine.members.map { $0.user?.username } == ["bo_c"])
            #expect(mine.members.first?.state == .accepted)
            #expect(mine.limit == 3)
            #expect(try await circle(bo).memberOf.map(\.username) == ["amy"])
        }
    }

    /// Members added within one millisecond (social's clock stands still here) are still listed
    /// in the order they were added, to the owner and to alerts, not by id or number; and the
    /// circles a person was asked into, newest first, likewise.
    @Test(arguments: Engine.allCases) func membersAddedInTheSameMillisecond_keepTheOrderTheyWereAdded(engine: Engine) async throws {
        try await withSocial(engine, now: stillClock) { stack in
            let (owner, ownerID) = try await stack.user("kim_c")
            // Registered so that the later-added member has the smaller id.
            let (zed, zedID) = try await stack.user("zed_c")
            let (abe, abeID) = try await stack.user("abe_c")
            #expect(zedID < abeID)
            try await befriend(owner, abe, "abe_c", "kim_c")
            try await befriend(owner, zed, "zed_c", "kim_c")
            _ = try await owner.call(API.addToCircle, SocialV1.AddToCircleRequest(phone: "+1 (562) 555-0199"))
            _ = try await owner.call(API.addToCircle, SocialV1.AddToCircleRequest(username: "abe_c"))
            _ = try await owner.call(API.addToCircle, SocialV1.AddToCircleRequest(username: "zed_c"))
            let ofKim = try await stack.social.call(API.circleOf, SocialV1.CircleOfRequest(ownerUserId: ownerID))
            #expect(ofKim.members.map { $0.user?.userId ?? 0 } == [0, abeID, zedID])
            #expect(try await circle(owner).members.map { $0.user?.username ?? $0.phone } == ["+15625550199", "abe_c", "zed_c"])

            // Zed asks Abe into his circle after Kim did: Abe's requests, newest first.
            try await befriend(zed, abe, "abe_c", "zed_c")
            _ = try await zed.call(API.addToCircle, SocialV1.AddToCircleRequest(username: "abe_c"))
            let asks = try await abe.call(API.listCircleRequests, SocialV1.ListCircleRequestsRequest())
            #expect(asks.requests.map { $0.owner?.username } == ["zed_c", "kim_c"])
        }
    }

    /// Someone who refused and is asked again is added again: after whoever was added in between,
    /// in the same millisecond too (SQLite's `REPLACE` gives the row a new rowid; PostgreSQL's
    /// upsert a new id).
    @Test(arguments: Engine.allCases) func aMemberAskedAgainAfterRefusing_comesAfterThoseAddedSince(engine: Engine) async throws {
        try await withSocial(engine, now: stillClock) { stack in
            let (owner, ownerID) = try await stack.user("kim_r")
            let (abe, abeID) = try await stack.user("abe_r")
            let (zed, zedID) = try await stack.user("zed_r")
            try await befriend(owner, abe, "abe_r", "kim_r")
            try await befriend(owner, zed, "zed_r", "kim_r")
            _ = try await owner.call(API.addToCircle, SocialV1.AddToCircleRequest(username: "abe_r"))
            _ = try await abe.call(API.respondToCircleRequest, SocialV1.RespondToCircleRequestRequest(ownerUsername: "kim_r", action: .reject))
            _ = try await owner.call(API.addToCircle, SocialV1.AddToCircleRequest(username: "zed_r"))
            _ = try await owner.call(API.addToCircle, SocialV1.AddToCircleRequest(username: "abe_r"))
            let ofKim = try await stack.social.call(API.circleOf, SocialV1.CircleOfRequest(ownerUserId: ownerID))
            #expect(ofKim.members.map { $0.user?.userId ?? 0 } == [zedID, abeID])
            #expect(try await circle(owner).members.map { $0.user?.username } == ["zed_r", "abe_r"])
        }
    }

    /// Alerts' internal `CircleOf` (what a helpNow reaches): the owner's members in order, each by
    /// id or invited number with its state, and nothing else: no names, not the circles the owner
    /// is in.
    @Test(arguments: Engine.allCases) func circleOf_givesAlertsTheMembers_byIdOrNumber_withTheirState(engine: Engine) async throws {
        try await withSocial(engine) { stack in
            let (gus, gusID) = try await stack.user("gus_c")
            let (hal, halID) = try await stack.user("hal_c")
            let (ivy, ivyID) = try await stack.user("ivy_c")
            try await befriend(gus, hal, "hal_c", "gus_c")
            try await befriend(gus, ivy, "ivy_c", "gus_c")
            _ = try await gus.call(API.addToCircle, SocialV1.AddToCircleRequest(username: "hal_c"))
            _ = try await gus.call(API.addToCircle, SocialV1.AddToCircleRequest(username: "ivy_c"))
            _ = try await gus.call(API.addToCircle, SocialV1.AddToCircleRequest(phone: "+1 (562) 555-0177"))
            _ = try await hal.call(API.respondToCircleRequest, SocialV1.RespondToCircleRequestRequest(ownerUsername: "gus_c", action: .accept))
            _ = try await hal.call(API.addToCircle, SocialV1.AddToCircleRequest(username: "gus_c")) // Gus is in Hal's circle too
            _ = try await gus.call(API.respondToCircleRequest, SocialV1.RespondToCircleRequestRequest(ownerUsername: "hal_c", action: .accept))

            let ofGus = try await stack.social.call(API.circleOf, SocialV1.CircleOfRequest(ownerUserId: gusID))
            #expect(ofGus.members.map { $0.user?.userId ?? 0 } == [halID, ivyID, 0])
            #expect(ofGus.members.map(\.state) == [.accepted, .pending, .invited])
            #expect(ofGus.members.map(\.phone) == ["", "", "+15625550177"])
            #expect(ofGus.members.allSatisfy { $0.user.map { $0.username.isEmpty && $0.firstName.isEmpty } ?? true }, "ids only: alerts names people itself")
            #expect(ofGus.memberOf.isEmpty && ofGus.limit == 3)
            // The client method still shows names and the circles the caller is in.
            let shown = try await circle(gus)
            #expect(shown.members.map { $0.user?.username ?? $0.phone } == ["hal_c", "ivy_c", "+15625550177"])
            #expect(shown.memberOf.map(\.username) == ["hal_c"])
            await expectError(.invalidArgument) { _ = try await stack.social.call(API.circleOf, SocialV1.CircleOfRequest()) }
        }
    }

    /// Alerts' copy of every circle: `CircleSnapshot` gives whole circles of accepted members and
    /// invited numbers, a page of owners at a time, each in CircleOf's order (pending requests
    /// left out); and every change to an invited number is on the graph stream as
    /// `circleInvitesChanged` for its owner, without the number, so the copy knows to ask again.
    @Test(arguments: Engine.allCases) func circleSnapshot_givesAlertsEveryCircle_andInviteChangesAreAnnounced(engine: Engine) async throws {
        try await withSocial(engine) { stack in
            let (gus, gusID) = try await stack.user("gus_s")
            let (hal, halID) = try await stack.user("hal_s")
            let (ivy, ivyID) = try await stack.user("ivy_s")
            try await befriend(gus, hal, "hal_s", "gus_s")
            try await befriend(gus, ivy, "ivy_s", "gus_s")
            try await befriend(hal, ivy, "ivy_s", "hal_s")
            _ = try await gus.call(API.addToCircle, SocialV1.AddToCircleRequest(username: "hal_s"))
            _ = try await gus.call(API.addToCircle, SocialV1.AddToCircleRequest(username: "ivy_s")) // stays pending
            _ = try await hal.call(API.respondToCircleRequest, SocialV1.RespondToCircleRequestRequest(ownerUsername: "gus_s", action: .accept))
            try await stack.graphEventsRelayed()
            _ = stack.events.take()
            _ = try await gus.call(API.addToCircle, SocialV1.AddToCircleRequest(phone: "+1 (562) 555-0166"))
            _ = try await hal.call(API.addToCircle, SocialV1.AddToCircleRequest(username: "ivy_s"))
            _ = try await ivy.call(API.respondToCircleRequest, SocialV1.RespondToCircleRequestRequest(ownerUsername: "hal_s", action: .accept))
            _ = try await ivy.call(API.addToCircle, SocialV1.AddToCircleRequest(phone: "+1 (562) 555-0155"))

            var entries: [SocialV1.CircleEntry] = []
            var after: UInt64 = 0, pages = 0
            repeat {
                let page = try await stack.social.call(API.circleSnapshot, SocialV1.CircleSnapshotRequest(afterOwner: after, limit: 1))
                entries += page.entries
                after = page.nextAfterOwner
                pages += 1
            } while after != 0 && pages < 10
            #expect(pages == 4, "an owner a page, then an empty last one: \(pages)")
            #expect(gusID < halID && halID < ivyID)
            #expect(entries.map { [$0.owner, $0.member] } == [[gusID, halID], [gusID, 0], [halID, ivyID], [ivyID, 0]], "\(entries)")
            #expect(entries.filter { $0.member == 0 }.map(\.phone).sorted() == ["+15625550155", "+15625550166"])
            let whole = try await stack.social.call(API.circleSnapshot, SocialV1.CircleSnapshotRequest())
            #expect(whole.entries == entries && whole.nextAfterOwner == 0)
            await expectError(.invalidArgument) { _ = try await stack.social.call(API.circleSnapshot, SocialV1.CircleSnapshotRequest(limit: 1_001)) }

            _ = try await gus.call(API.removeFromCircle, SocialV1.RemoveFromCircleRequest(phone: "+1 (562) 555-0166"))
            try await stack.graphEventsRelayed()
            let graph = try stack.events.take().filter { $0.topic == SocialService.graphStream }.map { try SocialV1.GraphEvent(serializedBytes: $0.payload) }
            let invites = graph.filter { $0.change == .circleInvitesChanged }
            #expect(invites.map(\.userA) == [gusID, ivyID, gusID] && invites.allSatisfy { $0.userB == 0 })
            #expect(graph.contains { $0.change == .circleMemberAdded && $0.userA == halID && $0.userB == ivyID })
            for event in graph { #expect(!String(decoding: try event.serializedBytes() as [UInt8], as: UTF8.self).contains("555"), "no number on the stream") }
        }
    }

    @Test(arguments: Engine.allCases) func circleLimit_isEnforced_withAClearError_andPhoneInvitationsCount(engine: Engine) async throws {
        try await withSocial(engine) { stack in
            let (owner, _) = try await stack.user("owner_c")
            for name in ["c_one", "c_two", "c_three"] {
                let (friend, _) = try await stack.user(name)
                try await befriend(owner, friend, name, "owner_c")
            }
            _ = try await owner.call(API.addToCircle, SocialV1.AddToCircleRequest(username: "c_one"))
            _ = try await owner.call(API.addToCircle, SocialV1.AddToCircleRequest(username: "c_two"))
            let invited = try await owner.call(API.addToCircle, SocialV1.AddToCircleRequest(phone: "+1 (562) 555-0199"))
            #expect(invited.member?.state == .invited)
            #expect(invited.member?.phone == "+15625550199")
            await expectError(.failedPrecondition, containing: "full (3 people)") {
                _ = try await owner.call(API.addToCircle, SocialV1.AddToCircleRequest(username: "c_three"))
            }
            _ = try await owner.call(API.removeFromCircle, SocialV1.RemoveFromCircleRequest(phone: "+15625550199"))
            _ = try await owner.call(API.addToCircle, SocialV1.AddToCircleRequest(username: "c_three"))
            #expect(try await circle(owner).members.count == 3)
        }
    }

    @Test(arguments: Engine.allCases) func onlyFriends_noDuplicates_notYourself_andBadInputs(engine: Engine) async throws {
        try await withSocial(engine) { stack in
            let (dee, _) = try await stack.user("dee")
            let (eli, _) = try await stack.user("eli")
            _ = try await stack.user("fox")
            await expectError(.failedPrecondition, containing: "only friends") {
                _ = try await dee.call(API.addToCircle, SocialV1.AddToCircleRequest(username: "fox"))
            }
            await expectError(.failedPrecondition, containing: "yourself") {
                _ = try await dee.call(API.addToCircle, SocialV1.AddToCircleRequest(username: "dee"))
            }
            try await befriend(dee, eli, "eli", "dee")
            _ = try await dee.call(API.addToCircle, SocialV1.AddToCircleRequest(username: "eli"))
            await expectError(.alreadyExists) { _ = try await dee.call(API.addToCircle, SocialV1.AddToCircleRequest(username: "eli")) }
            await expectError(.invalidArgument, containing: "phone") { _ = try await dee.call(API.addToCircle, SocialV1.AddToCircleRequest(phone: "12345")) }
            await expectError(.invalidArgument) { _ = try await dee.call(API.addToCircle, SocialV1.AddToCircleRequest(username: "eli", phone: "+15625550100")) }
            await expectError(.invalidArgument) { _ = try await dee.call(API.addToCircle, SocialV1.AddToCircleRequest()) }
            await expectError(.notFound) { _ = try await dee.call(API.removeFromCircle, SocialV1.RemoveFromCircleRequest(phone: "+15625550100")) }
            // Nobody answers a circle request addressed to someone else.
            await expectError(.notFound) {
                _ = try await dee.call(API.respondToCircleRequest, SocialV1.RespondToCircleRequestRequest(ownerUsername: "dee", action: .accept))
            }
            await expectError(.invalidArgument, containing: "action") {
                _ = try await eli.call(API.respondToCircleRequest, SocialV1.RespondToCircleRequestRequest(ownerUsername: "dee", action: .dismiss))
            }
        }
    }

    @Test(arguments: Engine.allCases) func bidirectionalCircles_keepOneFriendship_andRemovingTheFriendClearsBoth(engine: Engine) async throws {
        try await withSocial(engine) { stack in
            let (gia, _) = try await stack.user("gia")
            let (hux, _) = try await stack.user("hux")
            try await befriend(gia, hux, "hux", "gia")
            _ = try await gia.call(API.addToCircle, SocialV1.AddToCircleRequest(username: "hux"))
            _ = try await hux.call(API.addToCircle, SocialV1.AddToCircleRequest(username: "gia"))
            _ = try await hux.call(API.respondToCircleRequest, SocialV1.RespondToCircleRequestRequest(ownerUsername: "gia", action: .accept))
            _ = try await gia.call(API.respondToCircleRequest, SocialV1.RespondToCircleRequestRequest(ownerUsername: "hux", action: .accept))
            let giaFriends = try await gia.call(API.listFriends, SocialV1.ListFriendsRequest()).friends
            #expect(giaFriends.map { $0.user?.username } == ["hux"], "each appears once in the other's friends")
            _ = try await gia.call(API.removeFriend, SocialV1.RemoveFriendRequest(username: "hux"))
            #expect(try await circle(gia).members.isEmpty)
            #expect(try await circle(hux).members.isEmpty)
            #expect(try await circle(gia).memberOf.isEmpty)
        }
    }

    @Test(arguments: Engine.allCases) func blocking_clearsCircleMembership(engine: Engine) async throws {
        try await withSocial(engine) { stack in
            let (ike, _) = try await stack.user("ike")
            let (jo, _) = try await stack.user("jo_c")
            try await befriend(ike, jo, "jo_c", "ike")
            _ = try await ike.call(API.addToCircle, SocialV1.AddToCircleRequest(username: "jo_c"))
            _ = try await jo.call(API.block, SocialV1.BlockRequest(username: "ike"))
            #expect(try await circle(ike).members.isEmpty)
            #expect(try await jo.call(API.listCircleRequests, SocialV1.ListCircleRequestsRequest()).requests.isEmpty)
        }
    }

    @Test(arguments: Engine.allCases) func rejected_canBeAskedAgain(engine: Engine) async throws {
        try await withSocial(engine) { stack in
            let (kai, _) = try await stack.user("kai")
            let (lu, _) = try await stack.user("lu_c")
            try await befriend(kai, lu, "lu_c", "kai")
            _ = try await kai.call(API.addToCircle, SocialV1.AddToCircleRequest(username: "lu_c"))
            let no = try await lu.call(API.respondToCircleRequest, SocialV1.RespondToCircleRequestRequest(ownerUsername: "kai", action: .reject))
            #expect(no.member?.state == .rejected)
            let again = try await kai.call(API.addToCircle, SocialV1.AddToCircleRequest(username: "lu_c"))
            #expect(again.member?.state == .pending)
        }
    }
}
