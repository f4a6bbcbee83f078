import ArgumentParser
import Foundation
import FriensoClient
import FriensoProto
import Wire

typealias GeoAPI = GeoV1.GeoService

func metres(_ m: Double) -> String { m >= 1_000 ? String(format: "%.2f km", m / 1_000) : "\(Int(m.rounded())) m" }

func age(_ ms: Int64) -> String {
    let s = ms / 1_000
    return s < 60 ? "\(s) s ago" : s < 3_600 ? "\(s / 60) min ago" : "\(s / 3_600) h ago"
}

struct Locate: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Share where you are now (negative numbers are fine: frienso locate 40.75 -73.99).")
    @OptionGroup var global: GlobalOptions
    // Collected as strings so a negative longitude is not taken for an option.
    @Argument(parsing: .allUnrecognized, help: "Latitude (-90..90) and longitude (-180..180).") var coordinates: [String]
    @Option(help: "Accuracy in metres.") var accuracy = 10.0
    @Option(help: "A status line shown to friends with this location (≤ 140 characters; \"\" clears it).") var status: String?

    func validate() throws {
        guard coordinates.count == 2, Double(coordinates[0]) != nil, Double(coordinates[1]) != nil else {
            throw ValidationError("give a latitude and a longitude, e.g. frienso locate 40.7506 -73.9935")
        }
    }

    func run() async throws {
        let lat = Double(coordinates[0])!, lon = Double(coordinates[1])!
        try await performCall(global) { client in
            let request = GeoV1.UpdateLocationRequest(latitude: lat, longitude: lon, accuracyM: accuracy,
                                                      deviceTimeMs: Int64(Date().timeIntervalSince1970 * 1000),
                                                      setStatus: status != nil, status: status ?? "")
            let reply = try await client.call(GeoAPI.updateLocation, request, mutation: true)
            return (reply.becameLatest ? "location shared" : "stored in history (a newer fix is already your latest)", reply.jsonValue)
        }
    }
}

struct Nearby: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "People near you who want to be found, nearest first.")
    @OptionGroup var global: GlobalOptions
    @Option(help: "Radius in metres (default 1500).") var radius: Double = 0
    @Option(help: "How many (default 20, at most 100).") var limit: UInt32 = 0
    @Flag(help: "Leave out people you already exchanged contacts with.") var new = false

    func run() async throws {
        try await performCall(global) { client in
            let reply = try await client.call(GeoAPI.nearby, GeoV1.NearbyRequest(radiusM: radius, limit: limit, excludeExchanged: new))
            let lines = reply.users.map { "user \($0.userId)  \(metres($0.distanceM))" }
            return (lines.isEmpty ? "nobody findable nearby" : lines.joined(separator: "\n"), reply.jsonValue)
        }
    }
}

struct Navigate: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Distance and direction to a friend whose location you can see.")
    @OptionGroup var global: GlobalOptions
    @Argument(help: "The friend's user id.") var user: UInt64

    func run() async throws {
        try await performCall(global) { client in
            let reply = try await client.call(GeoAPI.navigate, GeoV1.NavigateRequest(userId: user))
            let compass = ["N", "NE", "E", "SE", "S", "SW", "W", "NW"][Int(((reply.bearingDeg + 22.5) / 45).rounded(.down)) % 8]
            return ("\(metres(reply.distanceM)) \(compass) (bearing \(Int(reply.bearingDeg.rounded()))°)", reply.jsonValue)
        }
    }
}

struct Sharing: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Who sees your location.", subcommands: [Show.self, Friends.self], defaultSubcommand: Show.self)

    struct Show: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Your sharing settings.")
        @OptionGroup var global: GlobalOptions
        func run() async throws {
            try await performCall(global) { client in
                let reply = try await client.call(GeoAPI.getSharing, GeoV1.GetSharingRequest())
                return (sharingText(reply.settings ?? GeoV1.SharingSettings()), reply.jsonValue)
            }
        }
    }

    struct Friends: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Share your location with friends: on or off.")
        @OptionGroup var global: GlobalOptions
        @Argument var onOff: OnOff
        func run() async throws { try await updateSharing(global, fields: ["share_with_friends"], GeoV1.SharingSettings(shareWithFriends: onOff.on)) }
    }
}

enum OnOff: String, ExpressibleByArgument, CaseIterable {
    case on, off
    var on: Bool { self == .on }
}

func sharingText(_ s: GeoV1.SharingSettings) -> String {
    """
    share with friends: \(s.shareWithFriends ? "on" : "off")
    ghost mode: \(s.ghost ? "on (hidden from everyone but watchMe/helpNow)" : "off")
    proximity alerts: \(s.proximityAlerts ? "on, within \(metres(s.proximityM))" : "off")
    """
}

func updateSharing(_ global: GlobalOptions, fields: [String], _ settings: GeoV1.SharingSettings) async throws {
    try await performCall(global) { client in
        let reply = try await client.call(GeoAPI.updateSharing, GeoV1.UpdateSharingRequest(settings: settings, fields: fields), mutation: true)
        return (sharingText(reply.settings ?? GeoV1.SharingSettings()), reply.jsonValue)
    }
}

struct Ghost: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Privacy mode: hide your location from everyone (watchMe/helpNow still reach your circle).")
    @OptionGroup var global: GlobalOptions
    @Argument var onOff: OnOff
    func run() async throws { try await updateSharing(global, fields: ["ghost"], GeoV1.SharingSettings(ghost: onOff.on)) }
}

struct Proximity: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Tell me when a friend (who also turned it on) comes within a distance.")
    @OptionGroup var global: GlobalOptions
    @Argument var onOff: OnOff
    @Option(help: "Distance in metres (10-10000).") var distance: Double?
    func run() async throws {
        var fields = ["proximity_alerts"]
        if distance != nil { fields.append("proximity_m") }
        try await updateSharing(global, fields: fields, GeoV1.SharingSettings(proximityAlerts: onOff.on, proximityM: distance ?? 0))
    }
}

struct History: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Your location history.", subcommands: [Delete.self])
    struct Delete: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Delete your whole location history (your latest fix stays).")
        @OptionGroup var global: GlobalOptions
        func run() async throws {
            try await performCall(global) { client in
                let reply = try await client.call(GeoAPI.deleteHistory, GeoV1.DeleteHistoryRequest(), mutation: true)
                return ("deleted \(reply.deleted) history points", reply.jsonValue)
            }
        }
    }
}

struct Where: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "where", abstract: "Where your friends are (those who share with you).")
    @OptionGroup var global: GlobalOptions

    func run() async throws {
        try await performCall(global) { client in
            let reply = try await client.call(GeoAPI.friendsLocations, GeoV1.FriendsLocationsRequest())
            let lines = reply.friends.map { f -> String in
                var line = "user \(f.userId)  \(String(format: "%.5f, %.5f", f.fix?.latitude ?? 0, f.fix?.longitude ?? 0))  ±\(metres(f.fix?.accuracyM ?? 0))  \(age(f.ageMs))"
                if f.distanceM > 0 { line += "  \(metres(f.distanceM)) away" }
                if !f.around.isEmpty { line += "  \(f.around)" }
                if !f.status.isEmpty { line += "  “\(f.status)”" }
                return line
            }
            return (lines.isEmpty ? "no friend shares a location with you right now" : lines.joined(separator: "\n"), reply.jsonValue)
        }
    }
}

struct Events: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Stream live events (pokes, friends' locations, friends nearby) until interrupted.")
    @OptionGroup var global: GlobalOptions
    @Option(help: "Stop after this many events (default: run until interrupted).") var count: Int?

    func run() async throws {
        try await perform(global) {
            let client = try global.client(requireSession: true)
            let stream = try await client.events()
            var seen = 0
            for await envelope in stream {
                FileHandle.standardOutput.write(Data((Self.describe(envelope, json: global.json) + "\n").utf8))
                seen += 1
                if let count, seen >= count { break }
            }
            await client.close()
            return ("", .null)
        }
    }

    static func describe(_ e: Envelope, json: Bool) -> String {
        switch e.method {
        case "geo.Location":
            guard let m = try? GeoV1.LocationEvent(serializedBytes: e.payload) else { break }
            return json ? m.jsonValue.rendered(indent: 0) : "location  user \(m.userId) at \(String(format: "%.5f, %.5f", m.fix?.latitude ?? 0, m.fix?.longitude ?? 0))\(m.status.isEmpty ? "" : "  “\(m.status)”")"
        case "geo.FriendNearby":
            guard let m = try? GeoV1.FriendNearbyEvent(serializedBytes: e.payload) else { break }
            return json ? m.jsonValue.rendered(indent: 0) : "nearby    user \(m.userId) is \(metres(m.distanceM)) away"
        case "social.Poke":
            guard let m = try? SocialV1.Poke(serializedBytes: e.payload) else { break }
            return json ? m.jsonValue.rendered(indent: 0) : "poke      from \(m.from?.username ?? "?")"
        default: break
        }
        return "event     \(e.method) (\(e.payload.count) bytes)"
    }
}
