import ArgumentParser
import Foundation
import FriensoClient
import FriensoProto
import Wire

typealias GeoAPI = GeoV1.GeoService

/// Your friends' usernames by id (one ListFriends call), to show names instead of ids.
func friendNames(_ client: FriensoClient) async throws -> [UInt64: String] {
    let reply = try await client.call(SocialAPI.listFriends, SocialV1.ListFriendsRequest())
    return Dictionary(reply.friends.compactMap { f in f.user.map { ($0.userId, $0.username) } }, uniquingKeysWith: { a, _ in a })
}

func label(_ id: UInt64, _ names: [UInt64: String]) -> String { names[id].map { "\($0) (id \(id))" } ?? "user \(id)" }

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
                                                      deviceTimeMs: WallClock.milliseconds(),
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
            let names = reply.users.isEmpty ? [:] : try await friendNames(client)
            let lines = reply.users.map { "\(label($0.userId, names))  \(metres($0.distanceM))" }
            return (lines.isEmpty ? "nobody findable nearby" : lines.joined(separator: "\n"), reply.jsonValue)
        }
    }
}

struct Navigate: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Distance and direction to a friend whose location you can see.")
    @OptionGroup var global: GlobalOptions
    @Argument(help: "The friend: username or user id.") var user: UserArgument

    func run() async throws {
        try await performCall(global) { client in
            var id = user.id
            if id == 0 {
                guard let match = try await friendNames(client).first(where: { $0.value == user.username.lowercased() }) else {
                    throw CLIError(message: "\(user.username) is not one of your friends", exitCode: StatusCode.notFound.exitCode)
                }
                id = match.key
            }
            let reply = try await client.call(GeoAPI.navigate, GeoV1.NavigateRequest(userId: id))
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
            let names = reply.friends.isEmpty ? [:] : try await friendNames(client)
            let lines = reply.friends.map { f -> String in
                var line = label(f.userId, names)
                if let fix = f.fix {
                    line += "  \(String(format: "%.5f, %.5f", fix.latitude, fix.longitude))  ±\(metres(fix.accuracyM))"
                } else {
                    line += "  (place only)"
                }
                if f.precision == .approximate { line += " (approximate)" }
                line += "  \(age(f.ageMs))"
                if f.distanceM > 0 { line += "  \(metres(f.distanceM)) away" }
                if !f.around.isEmpty { line += "  \(f.around)" }
                if !f.status.isEmpty { line += "  “\(f.status)”" }
                return line
            }
            return (lines.isEmpty ? "no friend shares a location with you right now" : lines.joined(separator: "\n"), reply.jsonValue)
        }
    }
}

extension GeoV1.PlaceKind {
    var label: String { protoName.dropFirst("PLACE_KIND_".count).lowercased() }
}

struct Places: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Campus buildings, venues and outlines.", subcommands: [Closest.self, List.self, Import.self], defaultSubcommand: Closest.self)

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "The places around you (or --lat/--lon), nearest first.")
        @OptionGroup var global: GlobalOptions
        @Option(parsing: .unconditional) var lat: Double?
        @Option(parsing: .unconditional) var lon: Double?
        @Option(help: "Metres (default 3,000; at most 20,000).") var radius: Double?

        func validate() throws {
            guard (lat == nil) == (lon == nil) else { throw ValidationError("give --lat and --lon together") }
        }

        func run() async throws {
            try await performCall(global) { client in
                let reply = try await client.call(GeoAPI.listPlaces, GeoV1.ListPlacesRequest(
                    hasPoint: lat != nil, latitude: lat ?? 0, longitude: lon ?? 0, radiusM: radius ?? 0))
                let lines = reply.places.map { place in
                    "\(place.name) (\(place.kind.label))  \(String(format: "%.5f, %.5f", place.latitude, place.longitude))\(place.polygonLat.isEmpty ? "" : "  outline of \(place.polygonLat.count) points")"
                }
                return (lines.isEmpty ? "no places within the radius" : lines.joined(separator: "\n"), reply.jsonValue)
            }
        }
    }

    struct Closest: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "The place nearest to you (or to --lat/--lon), and whether you are on campus.")
        @OptionGroup var global: GlobalOptions
        @Option(parsing: .unconditional) var lat: Double?
        @Option(parsing: .unconditional) var lon: Double?
        @Option(help: "building, venue or campus.") var kind: String?

        func validate() throws {
            guard (lat == nil) == (lon == nil) else { throw ValidationError("give --lat and --lon together") }
            if let kind, !["building", "venue", "campus"].contains(kind) { throw ValidationError("--kind is building, venue or campus") }
        }

        func run() async throws {
            let kinds: [String: GeoV1.PlaceKind] = ["building": .building, "venue": .venue, "campus": .campus]
            try await performCall(global) { client in
                let reply = try await client.call(GeoAPI.closestPlace, GeoV1.ClosestPlaceRequest(
                    hasPoint: lat != nil, latitude: lat ?? 0, longitude: lon ?? 0, kind: kind.flatMap { kinds[$0] } ?? .unspecified))
                var text = reply.found ? "\(reply.place?.name ?? "?") (\(reply.place?.kind.label ?? "")), \(reply.distanceM == 0 ? "you are in it" : metres(reply.distanceM) + " away")"
                                       : "no places known: an operator imports them (frienso places import)"
                text += reply.onCampus ? "\non campus" : "\nnot on campus"
                return (text, reply.jsonValue)
            }
        }
    }

    struct Import: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Operator: import places from GeoJSON or CSV (name,kind,lat,lon,radius_m).",
            discussion: "Authorised by the deployment's operator key (FRIENSO_OPERATOR_KEY or --operator-key), not by a login.")
        @OptionGroup var global: GlobalOptions
        @Argument(help: "A .geojson or .csv file.") var file: String
        @Option(help: "geojson or csv (default: from the file name).") var format: String?
        @Flag(help: "Replace every place instead of adding.") var replace = false
        @Option(help: "The operator key (default: $FRIENSO_OPERATOR_KEY).") var operatorKey: String?

        func run() async throws {
            guard let data = FileManager.default.contents(atPath: file) else { throw ValidationError("cannot read \(file)") }
            let key = operatorKey ?? ProcessInfo.processInfo.environment["FRIENSO_OPERATOR_KEY"] ?? ""
            let kind = format ?? (file.lowercased().hasSuffix(".csv") ? "csv" : "geojson")
            try await performCall(global, requireSession: false) { client in
                let reply = try await client.call(GeoAPI.importPlaces, GeoV1.ImportPlacesRequest(
                    operatorKey: key, format: kind, data: Array(data), replace: replace), mutation: true)
                let lines = ["imported \(reply.imported) places"] + reply.problems.map { "skipped: \($0)" }
                return (lines.joined(separator: "\n"), reply.jsonValue)
            }
        }
    }
}

struct Venues: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "How many people, and how many of your friends, are at each venue now.")
    @OptionGroup var global: GlobalOptions

    func run() async throws {
        try await performCall(global) { client in
            let reply = try await client.call(GeoAPI.listVenues, GeoV1.ListVenuesRequest())
            let lines = reply.venues.map {
                "\($0.venue?.name ?? "?")  \($0.few ? "fewer than \(reply.minPeople) people" : "\($0.people) \($0.people == 1 ? "person" : "people")"), \($0.friends) \($0.friends == 1 ? "friend" : "friends")"
            }
            return (lines.isEmpty ? "no venues known" : (lines + ["(fixes from the last \(reply.freshMinutes) minutes)"]).joined(separator: "\n"), reply.jsonValue)
        }
    }
}

struct CheckInCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "checkin", abstract: "Check in at a place (replaces your previous check-in).")
    @OptionGroup var global: GlobalOptions
    @Argument(help: "The place's name, up to 80 characters.") var place: String
    @Option(help: "A photo file to attach (uploaded first; GPS location is removed from it).") var photo: String?
    @Option(help: "A check-in photo already uploaded (`frienso photo upload --purpose check-in`).") var mediaId = ""
    @Option(parsing: .unconditional, help: "Where (default: your latest location).") var lat: Double?
    @Option(parsing: .unconditional) var lon: Double?

    func validate() throws {
        guard (lat == nil) == (lon == nil) else { throw ValidationError("give --lat and --lon together") }
        guard photo == nil || mediaId.isEmpty else { throw ValidationError("give --photo or --media-id, not both") }
    }

    func run() async throws {
        let bytes = try photo.map(readPhoto)
        try await performCall(global) { client in
            var media = mediaId
            var notes: [String] = []
            if let bytes {
                let uploaded = try await client.uploadPhoto(bytes, purpose: .checkIn)
                media = uploaded.item?.mediaId ?? ""
                notes.append("  photo \(media)" + (uploaded.locationRemoved ? " (GPS location removed)" : ""))
            }
            let reply = try await client.call(GeoAPI.checkIn, GeoV1.CheckInRequest(
                placeName: place, hasPoint: lat != nil, latitude: lat ?? 0, longitude: lon ?? 0, mediaId: media), mutation: true)
            let text = "checked in at \(reply.checkIn?.placeName ?? place) until \(formatTime(reply.checkIn?.expiresAtMs ?? 0))\(reply.replaced ? " (replaced your previous check-in)" : "")"
            return (([text] + notes).joined(separator: "\n"), reply.jsonValue)
        }
    }
}

struct CheckIns: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "checkins", abstract: "Check-ins around you.", subcommands: [NearbyList.self, Feed.self], defaultSubcommand: NearbyList.self)

    struct NearbyList: AsyncParsableCommand {
        static let configuration = CommandConfiguration(commandName: "nearby", abstract: "Check-ins within 1.5 km, nearest first.")
        @OptionGroup var global: GlobalOptions
        @Option var limit: UInt32 = 0
        func run() async throws { try await CheckIns.list(global, feed: false, limit: limit) }
    }

    struct Feed: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "The posts feed: check-ins within 10 km, newest first.")
        @OptionGroup var global: GlobalOptions
        @Option var limit: UInt32 = 0
        func run() async throws { try await CheckIns.list(global, feed: true, limit: limit) }
    }

    static func list(_ global: GlobalOptions, feed: Bool, limit: UInt32) async throws {
        try await performCall(global) { client in
            let reply = try await client.call(GeoAPI.listCheckIns, GeoV1.ListCheckInsRequest(feed: feed, limit: limit))
            let names = reply.checkIns.isEmpty ? [:] : try await friendNames(client)
            let lines = reply.checkIns.map { "\(label($0.userId, names)) at \($0.placeName)  \(metres($0.distanceM))  \(formatTime($0.createdAtMs))\($0.mediaId.isEmpty ? "" : "  photo \($0.mediaId)")" }
            return (lines.isEmpty ? "no check-ins around you" : lines.joined(separator: "\n"), reply.jsonValue)
        }
    }
}
