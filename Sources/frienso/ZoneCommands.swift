import ArgumentParser
import Foundation
import FriensoClient
import FriensoProto
import Wire

// Privacy zones (and my places) and place alerts.

/// `frienso zone`: circles of your own; while you are inside a private one, friends see its label or nothing.
struct ZoneCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "zone",
        abstract: "Privacy zones (home, say): inside one, friends see its label or nothing, never coordinates; history there is not kept.",
        discussion: """
            Also your own places for place alerts (--privacy off). During your own watch or helpNow, the circle members it reaches \
            still see you exactly.
            """,
        subcommands: [List.self, Add.self, Edit.self, Delete.self], defaultSubcommand: List.self)

    enum Privacy: String, ExpressibleByArgument, CaseIterable {
        case label, hidden, off
        var proto: GeoV1.ZonePrivacy {
            switch self { case .label: .label; case .hidden: .hidden; case .off: .off }
        }
    }

    static func describe(_ z: GeoV1.Zone) -> String {
        let privacy = z.privacy.protoName.dropFirst("ZONE_PRIVACY_".count).lowercased()
        return "zone \(z.zoneId)  “\(z.label)”  \(String(format: "%.5f, %.5f", z.latitude, z.longitude))  r \(metres(z.radiusM))  "
            + "privacy \(privacy)\(z.keepHistory ? "  keeps history" : "")\(z.inside ? "  (you are inside)" : "")"
    }

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Your zones.")
        @OptionGroup var global: GlobalOptions
        func run() async throws {
            try await performCall(global) { client in
                let reply = try await client.call(GeoAPI.listZones, GeoV1.ListZonesRequest())
                return (reply.zones.isEmpty ? "no zones" : reply.zones.map(ZoneCommand.describe).joined(separator: "\n"), reply.jsonValue)
            }
        }
    }

    struct Add: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "A new zone: frienso zone add Home 33.78 -118.11 --radius 150.")
        @OptionGroup var global: GlobalOptions
        @Argument(help: "What friends read while you are inside (1-40 characters).") var label: String
        // Collected as strings so a negative longitude is not taken for an option.
        @Argument(parsing: .allUnrecognized, help: "Latitude and longitude of its centre.") var centre: [String]
        @Option(help: "Its radius in metres (25 to 5000).") var radius = 150.0
        @Option(help: "label (friends see the label), hidden (nothing) or off (not private: a place for alerts).") var privacy = Privacy.label
        @Flag(help: "Keep location history inside it.") var keepHistory = false

        func validate() throws {
            guard centre.count == 2, Double(centre[0]) != nil, Double(centre[1]) != nil else {
                throw ValidationError("give a label, a latitude and a longitude, e.g. frienso zone add Home 33.78 -118.11")
            }
        }

        func run() async throws {
            let latitude = Double(centre[0])!, longitude = Double(centre[1])!
            try await performCall(global) { client in
                let zone = GeoV1.Zone(label: label, latitude: latitude, longitude: longitude, radiusM: radius, privacy: privacy.proto,
                                      keepHistory: keepHistory)
                let reply = try await client.call(GeoAPI.setZone, GeoV1.SetZoneRequest(zone: zone), mutation: true)
                return (reply.zone.map(ZoneCommand.describe) ?? "", reply.jsonValue)
            }
        }
    }

    struct Edit: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Change a zone (what you do not give stays).")
        @OptionGroup var global: GlobalOptions
        @Argument var zoneId: UInt64
        @Option var label: String?
        @Option(help: "Degrees (a negative one as --latitude=-33.9).") var latitude: Double?
        @Option(help: "Degrees (a negative one as --longitude=-118.1).") var longitude: Double?
        @Option(help: "Metres (25 to 5000).") var radius: Double?
        @Option(help: "label, hidden or off.") var privacy: Privacy?
        @Option(help: "true or false.") var keepHistory: Bool?
        func run() async throws {
            try await performCall(global) { client in
                let zones = try await client.call(GeoAPI.listZones, GeoV1.ListZonesRequest()).zones
                guard var zone = zones.first(where: { $0.zoneId == zoneId }) else {
                    throw CLIError(message: "no zone \(zoneId) of yours (frienso zone list)", exitCode: 15)
                }
                if let label { zone.label = label }
                if let latitude { zone.latitude = latitude }
                if let longitude { zone.longitude = longitude }
                if let radius { zone.radiusM = radius }
                if let privacy { zone.privacy = privacy.proto }
                if let keepHistory { zone.keepHistory = keepHistory }
                let reply = try await client.call(GeoAPI.setZone, GeoV1.SetZoneRequest(zone: zone), mutation: true)
                return (reply.zone.map(ZoneCommand.describe) ?? "", reply.jsonValue)
            }
        }
    }

    struct Delete: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Delete a zone (and the place alerts on it).")
        @OptionGroup var global: GlobalOptions
        @Argument var zoneId: UInt64
        func run() async throws {
            try await performCall(global) { client in
                let reply = try await client.call(GeoAPI.deleteZone, GeoV1.DeleteZoneRequest(zoneId: zoneId), mutation: true)
                return (reply.deleted ? "zone \(zoneId) deleted" : "no zone \(zoneId) of yours", reply.jsonValue)
            }
        }
    }
}

/// `frienso place-alert`: be told when a friend arrives at or leaves a place.
struct PlaceAlertCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "place-alert",
        abstract: "Be told when a friend arrives at or leaves one of their zones or a campus place (live and by push).",
        discussion: "Only friends who allow you (frienso place-alert allow YOU) can be watched; each alert is in their audit.",
        subcommands: [List.self, Targets.self, Add.self, Delete.self, Allow.self, Disallow.self], defaultSubcommand: List.self)

    static func allowedText(_ allowed: [UInt64], _ names: [UInt64: String]) -> String {
        allowed.isEmpty ? "you allow nobody place alerts" : "you allow: " + allowed.map { label($0, names) }.joined(separator: ", ")
    }

    static func describe(_ a: GeoV1.PlaceAlert, _ names: [UInt64: String], mine: Bool) -> String {
        let directions = [a.onArrive ? (mine ? "arrives" : "arrive") : nil, a.onLeave ? (mine ? "leaves" : "leave") : nil]
            .compactMap { $0 }.joined(separator: " or ")
        let whom = mine ? "you are told when \(label(a.subjectId, names))" : "\(label(a.viewerId, names)) is told when you"
        let place = a.zoneId != 0 ? "zone \(a.zoneId)" : "place \(a.placeId)"
        return "alert \(a.alertId)  \(whom) \(directions) “\(a.label)” (\(place))"
    }

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Alerts you set, alerts on you, and whom you allow.")
        @OptionGroup var global: GlobalOptions
        func run() async throws {
            try await performCall(global) { client in
                let reply = try await client.call(GeoAPI.listPlaceAlerts, GeoV1.ListPlaceAlertsRequest())
                let names = reply.mine.isEmpty && reply.aboutMe.isEmpty && reply.allowed.isEmpty ? [:] : try await friendNames(client)
                var lines = reply.mine.map { describe($0, names, mine: true) } + reply.aboutMe.map { describe($0, names, mine: false) }
                lines.append(allowedText(reply.allowed, names))
                return (lines.joined(separator: "\n"), reply.jsonValue)
            }
        }
    }

    struct Targets: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "A friend's zones you may set alerts on (labels only); campus places: frienso places.")
        @OptionGroup var global: GlobalOptions
        @Argument(help: "The friend's username (or id).") var friend: String
        func run() async throws {
            try await performCall(global) { client in
                let (id, _) = try await PrecisionCommand.friend(friend, client)
                let reply = try await client.call(GeoAPI.listPlaceAlertTargets, GeoV1.ListPlaceAlertTargetsRequest(subjectId: id))
                return (reply.zones.isEmpty ? "\(friend) has no zones you may use" : reply.zones.map { "zone \($0.zoneId)  “\($0.label)”" }.joined(separator: "\n"),
                        reply.jsonValue)
            }
        }
    }

    struct Add: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "frienso place-alert add alice --zone 3 (or --place 12) [--arrive] [--leave]; both when neither is given.")
        @OptionGroup var global: GlobalOptions
        @Argument(help: "The friend's username (or id).") var friend: String
        @Option(help: "One of the friend's zones (frienso place-alert targets FRIEND).") var zone: UInt64?
        @Option(help: "A campus place (frienso places).") var place: UInt64?
        @Flag(help: "When they arrive.") var arrive = false
        @Flag(help: "When they leave.") var leave = false
        func run() async throws {
            try await performCall(global) { client in
                let (id, names) = try await PrecisionCommand.friend(friend, client)
                let both = !arrive && !leave
                let reply = try await client.call(GeoAPI.createPlaceAlert, GeoV1.CreatePlaceAlertRequest(
                    subjectId: id, zoneId: zone ?? 0, placeId: place ?? 0, onArrive: arrive || both, onLeave: leave || both), mutation: true)
                return (reply.alert.map { describe($0, names, mine: true) } ?? "", reply.jsonValue)
            }
        }
    }

    struct Delete: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Delete an alert (one you set, or one on you).")
        @OptionGroup var global: GlobalOptions
        @Argument var alertId: UInt64
        func run() async throws {
            try await performCall(global) { client in
                let reply = try await client.call(GeoAPI.deletePlaceAlert, GeoV1.DeletePlaceAlertRequest(alertId: alertId), mutation: true)
                return (reply.deleted ? "alert \(alertId) deleted" : "no alert \(alertId) of yours or on you", reply.jsonValue)
            }
        }
    }

    struct Allow: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Let a friend set place alerts on you.")
        @OptionGroup var global: GlobalOptions
        @Argument(help: "The friend's username (or id).") var friend: String
        func run() async throws { try await PlaceAlertCommand.allow(friend, true, global) }
    }

    struct Disallow: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Stop a friend's place alerts on you (deletes them).")
        @OptionGroup var global: GlobalOptions
        @Argument(help: "The friend's username (or id).") var friend: String
        func run() async throws { try await PlaceAlertCommand.allow(friend, false, global) }
    }

    static func allow(_ friend: String, _ allowed: Bool, _ global: GlobalOptions) async throws {
        try await performCall(global) { client in
            let (id, names) = try await PrecisionCommand.friend(friend, client)
            let reply = try await client.call(GeoAPI.allowPlaceAlerts, GeoV1.AllowPlaceAlertsRequest(userId: id, allowed: allowed), mutation: true)
            return (allowedText(reply.allowed, names), reply.jsonValue)
        }
    }
}
