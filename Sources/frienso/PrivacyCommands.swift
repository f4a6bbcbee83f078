import ArgumentParser
import Foundation
import FriensoClient
import FriensoProto
import Wire

// Your data and who sees it: share links, who saw your location, precision per friend.

/// `frienso share`: links for someone without an account.
struct ShareCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "share",
        abstract: "Share your live location with someone who has no account: a link, valid for a time, revocable at once.",
        subcommands: [Create.self, List.self, Revoke.self, View.self], defaultSubcommand: List.self)

    /// Where the web app is (`--edge`, FRIENSO_EDGE, or the default deployment's).
    static func edge(_ option: String?) -> String {
        option ?? ProcessInfo.processInfo.environment["FRIENSO_EDGE"] ?? "http://127.0.0.1:8080"
    }

    static func describe(_ l: GeoV1.ShareLink, now: Int64) -> String {
        let state = l.revokedAtMs != 0 ? "revoked \(formatTime(l.revokedAtMs))"
            : l.expiresAtMs <= now ? "expired \(formatTime(l.expiresAtMs))" : "live until \(formatTime(l.expiresAtMs))"
        return "link \(l.linkId)  \(state)  \(l.views) views" + (l.label.isEmpty ? "" : "  “\(l.label)”")
    }

    struct Create: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Make a link (prints its address once: keep it, send it).")
        @OptionGroup var global: GlobalOptions
        @Option(help: "How long it works, in minutes (5 to 10080).") var minutes: UInt32 = 60
        @Option(help: "What the viewer reads (at most 80 characters).") var label = ""
        @Option(help: "The web app's address (or FRIENSO_EDGE).") var edge: String?
        func run() async throws {
            try await performCall(global) { client in
                let reply = try await client.call(GeoAPI.createShareLink, GeoV1.CreateShareLinkRequest(minutes: minutes, label: label), mutation: true)
                let link = reply.link ?? GeoV1.ShareLink()
                return ("\(ShareCommand.describe(link, now: WallClock.milliseconds()))\nshare: \(ShareCommand.edge(edge))\(reply.path)\n"
                        + "revoke it any time: frienso share revoke \(link.linkId)", reply.jsonValue)
            }
        }
    }

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Your links (their addresses are not kept: only who viewed how often).")
        @OptionGroup var global: GlobalOptions
        func run() async throws {
            try await performCall(global) { client in
                let reply = try await client.call(GeoAPI.listShareLinks, GeoV1.ListShareLinksRequest())
                let now = WallClock.milliseconds()
                return (reply.links.isEmpty ? "no share links" : reply.links.map { ShareCommand.describe($0, now: now) }.joined(separator: "\n"),
                        reply.jsonValue)
            }
        }
    }

    struct Revoke: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Stop a link now.")
        @OptionGroup var global: GlobalOptions
        @Argument var linkId: UInt64
        func run() async throws {
            try await performCall(global) { client in
                let reply = try await client.call(GeoAPI.revokeShareLink, GeoV1.RevokeShareLinkRequest(linkId: linkId), mutation: true)
                return (reply.link.map { ShareCommand.describe($0, now: WallClock.milliseconds()) } ?? "", reply.jsonValue)
            }
        }
    }

    struct View: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "What a link shows (no account needed): its address, or the token at its end.")
        @OptionGroup var global: GlobalOptions
        @Argument var link: String
        func run() async throws {
            try await performCall(global, requireSession: false) { client in
                let token = link.split(separator: "/").last.map(String.init) ?? link
                let reply = try await client.call(GeoAPI.viewShareLink, GeoV1.ViewShareLinkRequest(token: token))
                var text = reply.label.isEmpty ? "a shared location" : reply.label
                if let fix = reply.fix {
                    text += ": \(String(format: "%.5f, %.5f", fix.latitude, fix.longitude))  ±\(metres(fix.accuracyM))  \(age(reply.ageMs))"
                    if !reply.around.isEmpty { text += "  \(reply.around)" }
                } else {
                    text += ": no location shared yet"
                }
                return (text + "\n(the link works until \(formatTime(reply.expiresAtMs)))", reply.jsonValue)
            }
        }
    }
}

/// `frienso audit`: who saw my location, and when.
struct AuditCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "audit", abstract: "Who saw your location, and when: counted per person and per hour, kept 30 days.")
    @OptionGroup var global: GlobalOptions
    @Option(help: "Only the last N hours.") var hours: Int?
    @Option(help: "At most this many rows (newest hours first).") var limit: UInt32 = 200

    func run() async throws {
        try await performCall(global) { client in
            let since = hours.map { WallClock.milliseconds() - Int64($0) * 3_600_000 } ?? 0
            let reply = try await client.call(GeoAPI.listAudit, GeoV1.ListAuditRequest(sinceMs: since, limit: limit))
            let names = reply.entries.isEmpty ? [:] : try await friendNames(client)
            let kinds: [GeoV1.AuditKind: String] = [.friendsLocations: "friends' locations", .navigate: "navigate", .live: "live updates",
                                                    .shareLink: "share link", .placeAlert: "place alerts"]
            var lines: [String] = []
            for e in reply.entries {
                let who = e.kind == .shareLink && e.viewerId == 0 ? "someone with link \(e.linkId)" : label(e.viewerId, names)
                lines.append("\(formatTime(e.hourStartMs))  \(who)  \(kinds[e.kind] ?? "other") ×\(e.count)")
            }
            let header = "who saw your location (per hour, the last \(reply.retentionDays) days at most):"
            return (lines.isEmpty ? "nobody saw your location in that time" : ([header] + lines).joined(separator: "\n"), reply.jsonValue)
        }
    }
}

/// `frienso precision`: how precisely each friend sees you.
struct PrecisionCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "precision",
        abstract: "How precisely friends see your location: exact, approximate (~1 km), place (\"Around <place>\" only) or hidden.",
        discussion: "During your own watch or helpNow, the circle members it reaches see you exactly, whatever is set here.",
        subcommands: [Show.self, Set_.self, Default.self, Clear.self], defaultSubcommand: Show.self)

    enum Level: String, ExpressibleByArgument, CaseIterable {
        case exact, approximate, place, hidden
        var proto: GeoV1.LocationPrecision {
            switch self { case .exact: .exact; case .approximate: .approximate; case .place: .place; case .hidden: .hidden }
        }
    }

    static func text(_ reply: GeoV1.GetPrecisionResponse, _ names: [UInt64: String]) -> String {
        let level = { (p: GeoV1.LocationPrecision) in p.protoName.dropFirst("LOCATION_PRECISION_".count).lowercased() }
        return (["friends see you: \(level(reply.defaultPrecision)) (the default)"]
                + reply.settings.map { "  \(label($0.userId, names)): \(level($0.precision))" }).joined(separator: "\n")
    }

    /// A friend by username (or id).
    static func friend(_ name: String, _ client: FriensoClient) async throws -> (UInt64, [UInt64: String]) {
        let names = try await friendNames(client)
        if let id = UInt64(name), names[id] != nil { return (id, names) }
        guard let id = names.first(where: { $0.value == name.lowercased() })?.key else {
            throw CLIError(message: "\(name) is not one of your friends", exitCode: 64)
        }
        return (id, names)
    }

    struct Show: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "show", abstract: "The default and every friend's setting.")
        @OptionGroup var global: GlobalOptions
        func run() async throws {
            try await performCall(global) { client in
                let reply = try await client.call(GeoAPI.getPrecision, GeoV1.GetPrecisionRequest())
                return (PrecisionCommand.text(reply, reply.settings.isEmpty ? [:] : try await friendNames(client)), reply.jsonValue)
            }
        }
    }

    struct Set_: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "set", abstract: "How one friend sees you: frienso precision set bob approximate.")
        @OptionGroup var global: GlobalOptions
        @Argument(help: "The friend's username (or id).") var friend: String
        @Argument(help: "exact, approximate, place or hidden.") var level: Level
        func run() async throws {
            try await performCall(global) { client in
                let (id, names) = try await PrecisionCommand.friend(friend, client)
                let reply = try await client.call(GeoAPI.setPrecision, GeoV1.SetPrecisionRequest(userId: id, precision: level.proto), mutation: true)
                return (PrecisionCommand.text(reply, names), reply.jsonValue)
            }
        }
    }

    struct Default: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "default", abstract: "How friends without a setting of their own see you.")
        @OptionGroup var global: GlobalOptions
        @Argument(help: "exact, approximate, place or hidden.") var level: Level
        func run() async throws {
            try await performCall(global) { client in
                let reply = try await client.call(GeoAPI.setPrecision, GeoV1.SetPrecisionRequest(userId: 0, precision: level.proto), mutation: true)
                return (PrecisionCommand.text(reply, reply.settings.isEmpty ? [:] : try await friendNames(client)), reply.jsonValue)
            }
        }
    }

    struct Clear: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "clear", abstract: "Remove a friend's own setting (the default applies again).")
        @OptionGroup var global: GlobalOptions
        @Argument(help: "The friend's username (or id).") var friend: String
        func run() async throws {
            try await performCall(global) { client in
                let (id, names) = try await PrecisionCommand.friend(friend, client)
                let reply = try await client.call(GeoAPI.setPrecision, GeoV1.SetPrecisionRequest(userId: id, precision: .unspecified), mutation: true)
                return (PrecisionCommand.text(reply, names), reply.jsonValue)
            }
        }
    }
}
