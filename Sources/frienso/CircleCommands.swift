import ArgumentParser
import FriensoClient
import FriensoProto
import Wire

/// A circle member on the command line: a phone number (starts with + or 00), an id, or a username.
struct CircleTarget: ExpressibleByArgument {
    var user = UserArgument(argument: "x")!
    var phone = ""

    init?(argument: String) {
        if argument.hasPrefix("+") || argument.hasPrefix("00") {
            phone = argument
        } else if let user = UserArgument(argument: argument) {
            self.user = user
        } else {
            return nil
        }
    }
}

extension SocialV1.CircleMember {
    var line: String {
        let who = user?.label ?? "\(phone) (not on Frienso: SMS invitation)"
        return "\(who)  \(state.protoName.dropFirst("CIRCLE_STATE_".count).lowercased())"
    }
}

struct Circle: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Your core circle: the trusted friends who receive your alerts.",
        subcommands: [Show.self, Add.self, Remove.self, Requests.self, Accept.self, Reject.self],
        defaultSubcommand: Show.self)

    struct Show: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Who is in your circle, and whose circles you are in.")
        @OptionGroup var global: GlobalOptions

        func run() async throws {
            try await performCall(global) { client in
                let reply = try await client.call(SocialAPI.showCircle, SocialV1.ShowCircleRequest())
                var lines = ["your circle (\(reply.members.count) of \(reply.limit)):"]
                lines += reply.members.isEmpty ? ["  nobody yet: `frienso circle add FRIEND`"] : reply.members.map { "  " + $0.line }
                lines += ["you are in the circle of:"] + (reply.memberOf.isEmpty ? ["  nobody"] : reply.memberOf.map { "  " + $0.label })
                return (lines.joined(separator: "\n"), reply.jsonValue)
            }
        }
    }

    struct Add: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Ask a friend (username or id) to join your circle, or invite a phone number.")
        @OptionGroup var global: GlobalOptions
        @Argument var member: CircleTarget

        func run() async throws {
            try await performCall(global) { client in
                let request = SocialV1.AddToCircleRequest(userId: member.user.id, username: member.phone.isEmpty ? member.user.username : "",
                                                          phone: member.phone)
                let reply = try await client.call(SocialAPI.addToCircle, request, mutation: true)
                let text = reply.member?.state == .invited
                    ? "invited \(reply.member?.phone ?? member.phone) by SMS to join Frienso and your circle"
                    : "asked \(reply.member?.user?.username ?? member.user.username) to join your core circle"
                return (text, reply.jsonValue)
            }
        }
    }

    struct Remove: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Take someone out of your circle.")
        @OptionGroup var global: GlobalOptions
        @Argument var member: CircleTarget

        func run() async throws {
            try await performCall(global) { client in
                let request = SocialV1.RemoveFromCircleRequest(userId: member.user.id, username: member.phone.isEmpty ? member.user.username : "",
                                                               phone: member.phone)
                let reply = try await client.call(SocialAPI.removeFromCircle, request, mutation: true)
                return ("removed from your core circle", reply.jsonValue)
            }
        }
    }

    struct Requests: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "People who asked you to join their circle.")
        @OptionGroup var global: GlobalOptions

        func run() async throws {
            try await performCall(global) { client in
                let reply = try await client.call(SocialAPI.listCircleRequests, SocialV1.ListCircleRequestsRequest())
                let lines = reply.requests.map { "\($0.owner?.label ?? "?")  asked \(formatTime($0.addedAtMs))" }
                return (lines.isEmpty ? "no circle requests" : lines.joined(separator: "\n"), reply.jsonValue)
            }
        }
    }

    struct Accept: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Join someone's circle (they asked you).")
        @OptionGroup var global: GlobalOptions
        @Argument var owner: UserArgument
        func run() async throws { try await answer(global, owner, .accept) }
    }

    struct Reject: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Decline to join someone's circle.")
        @OptionGroup var global: GlobalOptions
        @Argument var owner: UserArgument
        func run() async throws { try await answer(global, owner, .reject) }
    }
}

private func answer(_ global: GlobalOptions, _ owner: UserArgument, _ action: SocialV1.RequestAction) async throws {
    try await performCall(global) { client in
        let reply = try await client.call(SocialAPI.respondToCircleRequest, SocialV1.RespondToCircleRequestRequest(
            ownerUserId: owner.id, ownerUsername: owner.username, action: action), mutation: true)
        return (action == .accept ? "you are now in \(owner.username.isEmpty ? "their" : owner.username + "'s") core circle" : "declined", reply.jsonValue)
    }
}
