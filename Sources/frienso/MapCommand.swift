import ArgumentParser
import Foundation
import FriensoClient
import FriensoProto
import Wire

struct MapCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "map",
        abstract: "Draw you, your friends, check-ins and venues (with how many people are there) as an SVG picture.",
        discussion: "Writes map.svg by default; a .png name is converted with rsvg-convert when it is installed (Debian: librsvg2-bin).")
    @OptionGroup var global: GlobalOptions
    @Option(name: .shortAndLong, help: "The picture to write (.svg, or .png with rsvg-convert).") var output = "map.svg"

    func run() async throws {
        try await performCall(global) { client in
            async let located = client.call(GeoAPI.friendsLocations, GeoV1.FriendsLocationsRequest())
            async let checkIns = client.call(GeoAPI.listCheckIns, GeoV1.ListCheckInsRequest(limit: 50))
            async let venues = client.call(GeoAPI.listVenues, GeoV1.ListVenuesRequest())
            async let me = client.call(AccountsV1.AccountsService.whoAmI, AccountsV1.WhoAmIRequest())
            let (where_, nearby, busy, myID) = try await (located, checkIns, venues, me.account?.profile?.userId ?? 0)
            guard let you = where_.you else {
                throw CLIError(message: "you have no location yet: run `frienso locate LAT LON` first", exitCode: 2)
            }
            let names = try await friendNames(client)
            var marks = [MapMark(.you, latitude: you.latitude, longitude: you.longitude, label: "you")]
            for f in where_.friends { if let fix = f.fix { marks.append(MapMark(.friend, latitude: fix.latitude, longitude: fix.longitude, label: names[f.userId] ?? "user \(f.userId)")) } }
            for c in nearby.checkIns {
                let who = c.userId == myID ? "you" : (names[c.userId] ?? "user \(c.userId)")
                marks.append(MapMark(.checkIn, latitude: c.latitude, longitude: c.longitude, label: "\(who) at \(c.placeName)"))
            }
            // Venues within 5 km: the map is of around you, not the whole campus list.
            for v in busy.venues {
                guard let place = v.venue else { continue }
                let d = hypot((place.latitude - you.latitude) * 110_540, (place.longitude - you.longitude) * 111_320 * cos(you.latitude * .pi / 180))
                guard d <= 5_000 else { continue }
                marks.append(MapMark(.venue(people: Int(v.people), friends: Int(v.friends), radiusMetres: place.radiusM,
                                            fewerThan: v.few ? Int(busy.minPeople) : 0),
                                     latitude: place.latitude, longitude: place.longitude, label: place.name))
            }
            let svg = MapPicture.svg(marks, title: "Frienso map, \(formatTime(WallClock.milliseconds()))")
            try writePicture(svg, to: output)
            let counts = "\(where_.friends.count) friends, \(nearby.checkIns.count) check-ins, \(marks.count - 1 - where_.friends.count - nearby.checkIns.count) venues"
            return ("wrote \(output): you, \(counts)", .object([("file", .string(output)), ("marks", .number(Double(marks.count)))]))
        }
    }

    /// SVG as is; PNG through rsvg-convert.
    func writePicture(_ svg: String, to path: String) throws {
        guard path.lowercased().hasSuffix(".png") else {
            do { try Data(svg.utf8).write(to: URL(fileURLWithPath: path), options: .atomic) } catch {
                throw CLIError(message: "cannot write \(path): \(error.localizedDescription)", exitCode: 2)
            }
            return
        }
        let converter = ["/usr/bin/rsvg-convert", "/usr/local/bin/rsvg-convert"].first { FileManager.default.isExecutableFile(atPath: $0) }
        guard let converter else {
            throw CLIError(message: "no SVG converter for \(path): install librsvg2-bin, or write .svg", exitCode: 2)
        }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: converter)
        process.arguments = ["-f", "png", "-o", path]
        let input = Pipe()
        process.standardInput = input
        try process.run()
        input.fileHandleForWriting.write(Data(svg.utf8))
        try input.fileHandleForWriting.close()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else { throw CLIError(message: "rsvg-convert failed for \(path)", exitCode: 2) }
    }
}
