import ArgumentParser
import Foundation
import FriensoClient
import FriensoProto
import Wire

/// The contact identifiers in an address-book file, one a line (blank lines and `#` comments
/// are skipped): `sha256:<64 hex>` a hash; `name@host` an email; `provider:id` a linked
/// external account (provider of a-z, 0-9, `_.-`); anything else a phone number.
struct ContactsFile {
    var request = SocialV1.RecommendFriendsRequest()

    init(text: String) throws {
        for (number, raw) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            let line = raw.trimmingCharacters(in: .whitespaces)
            if line.isEmpty || line.hasPrefix("#") { continue }
            if line.lowercased().hasPrefix("sha256:") {
                guard let bytes = Hex.decode(line.dropFirst(7)) else {
                    throw ValidationError("line \(number + 1): sha256: must be followed by hexadecimal digits")
                }
                request.contactHashes.append(bytes)
            } else if line.contains("@") {
                request.emails.append(line)
            } else if let colon = line.firstIndex(of: ":"), !line.hasPrefix("+"),
                      line[..<colon].allSatisfy({ $0.isLetter || $0.isNumber || "_.-".contains($0) }) {
                request.externalIds.append(SocialV1.ExternalId(provider: String(line[..<colon]), externalId: String(line[line.index(after: colon)...])))
            } else {
                request.phones.append(line)
            }
        }
    }
}

struct Recommend: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "People you may know, from your address book.",
        discussion: """
            FILE holds one contact a line: a phone number, an email, `sha256:<hex>` (the SHA-256 of a phone in
            E.164 or of a lower-cased email, so the raw contact stays on your device), or `provider:id` for an
            account on another service. Lines starting with # are ignored.
            """)
    @OptionGroup var global: GlobalOptions
    @Option(help: "The address-book file.") var contacts: String

    func run() async throws {
        guard let data = FileManager.default.contents(atPath: contacts), let text = String(data: data, encoding: .utf8) else {
            throw ValidationError("cannot read \(contacts)")
        }
        let file = try ContactsFile(text: text)
        try await performCall(global) { client in
            let reply = try await client.call(SocialAPI.recommendFriends, file.request)
            var lines = reply.recommendations.map { r -> String in
                let how = [r.byPhone ? "phone" : nil, r.byEmail ? "email" : nil, r.byExternalId ? "linked account" : nil].compactMap { $0 }
                return "\(r.user?.label ?? "?")  by \(how.joined(separator: ", "))\(r.requestPending ? "  (request pending)" : "")"
            }
            if lines.isEmpty { lines = ["nobody new from these contacts"] }
            if reply.unusable > 0 { lines.append("(\(reply.unusable) entries were not phone numbers or emails)") }
            return (lines.joined(separator: "\n"), reply.jsonValue)
        }
    }
}

struct Findable: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Whether people nearby can find you and exchange contacts with you (off until you turn it on).",
        subcommands: [Show.self, On.self, Off.self], defaultSubcommand: Show.self)

    struct Show: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Show the setting.")
        @OptionGroup var global: GlobalOptions

        func run() async throws {
            try await performCall(global) { client in
                let reply = try await client.call(SocialAPI.getDiscoverySettings, SocialV1.GetDiscoverySettingsRequest())
                return ("findable: \(reply.settings?.findable == true ? "on" : "off")", reply.jsonValue)
            }
        }
    }

    struct On: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Let people nearby find you.")
        @OptionGroup var global: GlobalOptions
        func run() async throws { try await setFindable(true, global) }
    }

    struct Off: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Stop people nearby from finding you.")
        @OptionGroup var global: GlobalOptions
        func run() async throws { try await setFindable(false, global) }
    }

    static func setFindable(_ on: Bool, _ global: GlobalOptions) async throws {
        try await performCall(global) { client in
            let reply = try await client.call(SocialAPI.setFindable, SocialV1.SetFindableRequest(findable: on), mutation: true)
            return ("findable: \(reply.settings?.findable == true ? "on" : "off")", reply.jsonValue)
        }
    }
}

extension SocialV1.Exchange {
    var line: String {
        var text = "\(user?.label ?? "?")  \(formatTime(exchangedAtMs))"
        if !placeLabel.isEmpty { text += "  at \(placeLabel)" }
        if hasLocation { text += String(format: "  (%.5f, %.5f)", latitude, longitude) }
        return text
    }
}

struct ExchangeCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "exchange", abstract: "Exchange contacts with someone you met (both add each other).",
        subcommands: [Add.self, History.self], defaultSubcommand: History.self)

    struct Add: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Add someone you met; recorded once they add you too.")
        @OptionGroup var global: GlobalOptions
        @Argument var user: UserArgument
        @Option(parsing: .unconditional, help: "Where you are (until geo knows your location).") var lat: Double?
        @Option(parsing: .unconditional, help: "Where you are.") var lon: Double?
        @Option(help: "A label for the place, e.g. \"Library steps\".") var place = ""

        func validate() throws {
            guard (lat == nil) == (lon == nil) else { throw ValidationError("give --lat and --lon together") }
        }

        func run() async throws {
            try await performCall(global) { client in
                let request = SocialV1.AddExchangeRequest(userId: user.id, username: user.username, hasLocation: lat != nil,
                                                          latitude: lat ?? 0, longitude: lon ?? 0, placeLabel: place)
                let reply = try await client.call(SocialAPI.addExchange, request, mutation: true)
                let text = reply.state == .recorded
                    ? "contacts exchanged: \(reply.exchange?.line ?? "")"
                    : "added; the exchange is recorded when \(user.username.isEmpty ? "they add" : "\(user.username) adds") you too"
                return (text, reply.jsonValue)
            }
        }
    }

    struct History: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "People you exchanged contacts with, newest first.")
        @OptionGroup var global: GlobalOptions
        @Option(help: "How many (at most 100).") var limit: UInt32 = 20
        @Option(help: "The page token a previous call printed.") var page: String?

        func run() async throws {
            try await performCall(global) { client in
                let reply = try await client.call(SocialAPI.listExchanges, SocialV1.ListExchangesRequest(pageSize: limit, pageToken: page ?? ""))
                var lines = reply.exchanges.map(\.line)
                if lines.isEmpty { lines = ["no exchanges yet: `frienso exchange add USER`"] }
                if !reply.nextPageToken.isEmpty { lines.append("more: --page \(reply.nextPageToken)") }
                return (lines.joined(separator: "\n"), reply.jsonValue)
            }
        }
    }
}
