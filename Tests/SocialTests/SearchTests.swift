import FriensoProto
import FriensoTesting
import Testing
import Wire

@Suite("social: search", .serialized, .timeLimit(.minutes(2)))
struct SearchTests {
    @Test(arguments: Engine.allCases) func search_byPrefix_leavesOutYouFriendsAndBlocked_andPages(engine: Engine) async throws {
        try await withSocial(engine) { stack in
            let (me, _) = try await stack.user("zed_me")
            let (friend, _) = try await stack.user("zed_friend")
            let (blocker, _) = try await stack.user("zed_blocker")
            _ = try await stack.user("zed_blocked")
            for i in 0..<5 { _ = try await stack.user("zed_\(i)") }
            _ = try await stack.user("other_zed_name") // not a prefix match on the username…
            _ = try await me.call(API.sendFriendRequest, SocialV1.SendFriendRequestRequest(username: "zed_friend"))
            _ = try await friend.call(API.sendFriendRequest, SocialV1.SendFriendRequestRequest(username: "zed_me"))
            _ = try await me.call(API.block, SocialV1.BlockRequest(username: "zed_blocked"))
            _ = try await blocker.call(API.block, SocialV1.BlockRequest(username: "zed_me"))

            var seen: [String] = []
            var token = ""
            repeat {
                let page = try await me.call(API.searchUsers, SocialV1.SearchUsersRequest(query: "ZED_", pageSize: 2, pageToken: token))
                #expect(page.users.count <= 2)
                seen += page.users.map(\.username)
                token = page.nextPageToken
            } while !token.isEmpty
            #expect(seen == ["zed_0", "zed_1", "zed_2", "zed_3", "zed_4"], "sorted, each once, without me, my friend and blocks either way")

            // Names match too: every stack user's first name is their capitalised username.
            let byName = try await me.call(API.searchUsers, SocialV1.SearchUsersRequest(query: "Other"))
            #expect(byName.users.map(\.username) == ["other_zed_name"])
            #expect(byName.nextPageToken.isEmpty)
        }
    }

    @Test(arguments: Engine.allCases) func search_badInputs_areInvalidArgument_andWildcardsAreLiteral(engine: Engine) async throws {
        try await withSocial(engine) { stack in
            let (me, _) = try await stack.user("wild_me")
            _ = try await stack.user("wild_card")
            for bad in [SocialV1.SearchUsersRequest(query: ""), SocialV1.SearchUsersRequest(query: String(repeating: "a", count: 51)),
                        SocialV1.SearchUsersRequest(query: "wild", pageSize: 51), SocialV1.SearchUsersRequest(query: "wild", pageToken: "garbage")] {
                await expectError(.invalidArgument) { _ = try await me.call(API.searchUsers, bad) }
            }
            #expect(try await me.call(API.searchUsers, SocialV1.SearchUsersRequest(query: "%")).users.isEmpty, "% is not a wildcard")
            #expect(try await me.call(API.searchUsers, SocialV1.SearchUsersRequest(query: "wild_")).users.map(\.username) == ["wild_card"])
        }
    }
}
