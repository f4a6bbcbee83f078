import ArgumentParser
import FriensoClient
import FriensoProto
import Wire

typealias SocialAPI = SocialV1.SocialService

/// A user named on the command line: a number is an id, anything else a username.
struct UserArgument: ExpressibleByArgument {
    var id: UInt64 = 0
    var username = ""

    init?(argument: String) {
        if let id = UInt64(argument), id > 0 { self.id = id } else if !argument.isEmpty { username = argument } else { return nil }
    }
}

extension SocialV1.UserRef {
    var label: String { "\(username) (\(firstName) \(lastName), id \(userId))" }
}

extension SocialV1.FriendRequest {
    var line: String {
        "#\(requestId)  \(from?.username ?? "?") → \(to?.username ?? "?")  \(state.protoName.dropFirst("REQUEST_STATE_".count).lowercased())\(dismissed ? " (dismissed)" : "")  \(formatTime(createdAtMs))"
    }
}

struct Friends: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Friends and friend requests.",
        subcommands: [List.self, Add.self, Requests.self, Accept.self, Reject.self, Dismiss.self, Cancel.self, Remove.self, Where.self],
        defaultSubcommand: List.self)

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Your friends.")
        @OptionGroup var global: GlobalOptions

        func run() async throws {
            try await performCall(global) { client in
                let reply = try await client.call(SocialAPI.listFriends, SocialV1.ListFriendsRequest())
                let lines = reply.friends.map { "\($0.user?.label ?? "?")  since \(formatTime($0.sinceMs))" }
                return (lines.isEmpty ? "no friends yet: `frienso friends add USERNAME`" : lines.joined(separator: "\n"), reply.jsonValue)
            }
        }
    }

    struct Add: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Send a friend request (by username or id).")
        @OptionGroup var global: GlobalOptions
        @Argument var user: UserArgument

        func run() async throws {
            try await performCall(global) { client in
                let reply = try await client.call(SocialAPI.sendFriendRequest,
                                                  SocialV1.SendFriendRequestRequest(userId: user.id, username: user.username), mutation: true)
                let who = reply.request?.to?.username ?? user.username
                let other = reply.becameFriends ? (reply.request?.from?.username ?? who) : who
                return (reply.becameFriends ? "you and \(other) are now friends (they had asked you too)"
                                            : "friend request #\(reply.request?.requestId ?? 0) sent to \(who)", reply.jsonValue)
            }
        }
    }

    struct Requests: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Pending friend requests, to you and from you.")
        @OptionGroup var global: GlobalOptions
        @Flag(help: "Also show requests you dismissed.") var all = false

        func run() async throws {
            try await performCall(global) { client in
                let reply = try await client.call(SocialAPI.listFriendRequests, SocialV1.ListFriendRequestsRequest(includeDismissed: all))
                let text = ["incoming:"] + (reply.incoming.isEmpty ? ["  none"] : reply.incoming.map { "  " + $0.line })
                    + ["outgoing:"] + (reply.outgoing.isEmpty ? ["  none"] : reply.outgoing.map { "  " + $0.line })
                return (text.joined(separator: "\n"), reply.jsonValue)
            }
        }
    }

    struct Accept: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Accept a friend request by its number.")
        @OptionGroup var global: GlobalOptions
        @Argument var requestID: UInt64
        func run() async throws { try await respond(global, requestID, .accept, "accepted") }
    }

    struct Reject: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Reject a friend request by its number.")
        @OptionGroup var global: GlobalOptions
        @Argument var requestID: UInt64
        func run() async throws { try await respond(global, requestID, .reject, "rejected") }
    }

    struct Dismiss: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Hide a friend request without answering it.")
        @OptionGroup var global: GlobalOptions
        @Argument var requestID: UInt64
        func run() async throws { try await respond(global, requestID, .dismiss, "dismissed") }
    }

    struct Cancel: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Withdraw a friend request you sent.")
        @OptionGroup var global: GlobalOptions
        @Argument var requestID: UInt64

        func run() async throws {
            try await performCall(global) { client in
                let reply = try await client.call(SocialAPI.cancelFriendRequest, SocialV1.CancelFriendRequestRequest(requestId: requestID), mutation: true)
                return ("friend request #\(requestID) cancelled", reply.jsonValue)
            }
        }
    }

    struct Remove: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Remove a friend (both of you lose the friendship).")
        @OptionGroup var global: GlobalOptions
        @Argument var user: UserArgument

        func run() async throws {
            try await performCall(global) { client in
                let reply = try await client.call(SocialAPI.removeFriend, SocialV1.RemoveFriendRequest(userId: user.id, username: user.username), mutation: true)
                return ("removed", reply.jsonValue)
            }
        }
    }
}

private func respond(_ global: GlobalOptions, _ id: UInt64, _ action: SocialV1.RequestAction, _ done: String) async throws {
    try await performCall(global) { client in
        let reply = try await client.call(SocialAPI.respondToFriendRequest,
                                          SocialV1.RespondToFriendRequestRequest(requestId: id, action: action), mutation: true)
        return ("friend request #\(id) \(done)", reply.jsonValue)
    }
}

struct Search: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Find people to add by username or name (friends and blocked users are left out).")
    @OptionGroup var global: GlobalOptions
    @Argument(help: "The start of a username, first or last name.") var query: String
    @Option(help: "Results per page (at most 50).") var limit: UInt32 = 20
    @Option(help: "The next-page token printed by the previous page.") var page: String?

    func run() async throws {
        try await performCall(global) { client in
            let reply = try await client.call(SocialAPI.searchUsers, SocialV1.SearchUsersRequest(query: query, pageSize: limit, pageToken: page ?? ""))
            var lines = reply.users.isEmpty ? ["nobody found"] : reply.users.map(\.label)
            if !reply.nextPageToken.isEmpty { lines.append("more: frienso search \(query) --page \(reply.nextPageToken)") }
            return (lines.joined(separator: "\n"), reply.jsonValue)
        }
    }
}

struct PokeCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "poke", abstract: "Poke a friend (once a minute at most).")
    @OptionGroup var global: GlobalOptions
    @Argument var user: UserArgument

    func run() async throws {
        try await performCall(global) { client in
            let reply = try await client.call(SocialAPI.poke, SocialV1.PokeRequest(userId: user.id, username: user.username), mutation: true)
            return ("poked \(user.username.isEmpty ? "user \(user.id)" : user.username)", reply.jsonValue)
        }
    }
}

struct Block: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Block a user: ends a friendship and pending requests, and hides you from each other.")
    @OptionGroup var global: GlobalOptions
    @Argument var user: UserArgument

    func run() async throws {
        try await performCall(global) { client in
            let reply = try await client.call(SocialAPI.block, SocialV1.BlockRequest(userId: user.id, username: user.username), mutation: true)
            return ("blocked\(reply.removedFriendship ? "; friendship ended" : "")\(reply.removedRequests > 0 ? "; \(reply.removedRequests) request(s) cancelled" : "")", reply.jsonValue)
        }
    }
}

struct Unblock: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Unblock a user.")
    @OptionGroup var global: GlobalOptions
    @Argument var user: UserArgument

    func run() async throws {
        try await performCall(global) { client in
            let reply = try await client.call(SocialAPI.unblock, SocialV1.UnblockRequest(userId: user.id, username: user.username), mutation: true)
            return ("unblocked", reply.jsonValue)
        }
    }
}

struct Blocked: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Users you blocked.")
    @OptionGroup var global: GlobalOptions

    func run() async throws {
        try await performCall(global) { client in
            let reply = try await client.call(SocialAPI.listBlocked, SocialV1.ListBlockedRequest())
            return (reply.users.isEmpty ? "nobody" : reply.users.map(\.label).joined(separator: "\n"), reply.jsonValue)
        }
    }
}
