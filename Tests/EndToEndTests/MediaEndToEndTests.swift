import Foundation
import FriensoTesting
import Testing

@Suite("end to end: photos through the CLI", .serialized, .timeLimit(.minutes(4)))
struct MediaEndToEndTests {
    func write(_ bytes: [UInt8], _ path: String) throws -> String {
        try Data(bytes).write(to: URL(fileURLWithPath: path))
        return path
    }

    /// The id after `label` in CLI output ("uploaded <id> ...", "photo <id>").
    func mediaID(after label: String, in output: String) throws -> String {
        let rest = try #require(output.components(separatedBy: label).dropFirst().first, "\(output)")
        return String(rest.prefix { $0.isHexDigit })
    }

    @Test func profilePicture_checkInPhoto_venuePhoto_privacy_bigFiles_andAKill9OfMedia() async throws {
        let procs = try ProcessHarness()
        defer { procs.shutdown() }
        let stack = Stack(procs)
        for service in ["accounts", "social", "geo", "media", "gateway"] { try await stack.start(service) }
        // Geo started before media had an endpoint: restart it so its check-ins reach media.
        procs.kill9("geo")
        try await stack.start("geo")
        let users = try await stack.register([("ana", "+15625550601"), ("ben", "+15625550602"), ("cyd", "+15625550603")])
        let (ana, ben, cyd) = (users["ana"]!, users["ben"]!, users["cyd"]!)
        _ = try await ana.run(["friends", "add", "ben"])
        _ = try await ben.run(["friends", "add", "ana"])
        let anaID = try #require(try await ana.run(["whoami"]).output.components(separatedBy: "(id ").dropFirst().first?.prefix { $0.isNumber })

        // Profile picture: GPS removed and said so; a friend reads it, a stranger does not.
        let picture = try write(Fixture.jpeg(width: 1024, height: 768, gps: true, filler: 50_000), "\(stack.dir)/me.jpg")
        let uploaded = try await ana.run(["profile", "picture", picture])
        #expect(uploaded.status == 0 && uploaded.output.contains("GPS) was removed"), "\(uploaded.output)\n\(procs.logs())")
        #expect(uploaded.output.contains("JPEG 1024×768"), "\(uploaded.output)")
        let pictureID = try mediaID(after: "uploaded ", in: uploaded.output)
        #expect(try await ana.run(["profile", "show"]).output.contains(pictureID), "accounts knows the picture")
        let listed = try await ben.run(["photo", "list", "--profile-of", String(anaID)])
        #expect(listed.output.contains(pictureID), "\(listed.output)")
        let got = try await ben.run(["photo", "get", pictureID, "-o", "\(stack.dir)/got.jpg"])
        #expect(got.status == 0, "\(got.output)")
        let downloaded = try [UInt8](Data(contentsOf: URL(fileURLWithPath: "\(stack.dir)/got.jpg")))
        #expect(downloaded.count > 50_000 && !Fixture.contains(downloaded, Fixture.gpsLatitude))
        let stranger = try await cyd.run(["photo", "get", pictureID, "-o", "\(stack.dir)/no.jpg"])
        #expect(stranger.status != 0 && stranger.output.contains("NOT_FOUND"), "\(stranger.output)")

        // A check-in with a photo: the friend sees it on the check-in and reads it.
        #expect(try await ana.run(["locate", "33.7838", "-118.1141"]).status == 0)
        #expect(try await ben.run(["locate", "33.7840", "-118.1140"]).status == 0)
        let checkin = try await ana.run(["checkin", "Library", "--photo", try write(Fixture.png(width: 64, height: 48), "\(stack.dir)/lib.png")])
        #expect(checkin.status == 0 && checkin.output.contains("checked in at Library"), "\(checkin.output)\n\(procs.logs())")
        let checkInPhoto = try mediaID(after: "photo ", in: checkin.output)
        let seen = try await ben.run(["checkins"])
        #expect(seen.output.contains("photo \(checkInPhoto)"), "\(seen.output)")
        #expect(try await ben.run(["photo", "list", "--check-in-of", String(anaID)]).output.contains("PNG 64×48"))
        #expect(try await cyd.run(["photo", "get", checkInPhoto, "-o", "\(stack.dir)/no.png"]).status != 0)
        // A new check-in without a photo releases the old one.
        _ = try await ana.run(["checkin", "Union"])
        #expect(try await ana.run(["photo", "get", checkInPhoto, "-o", "\(stack.dir)/gone.png"]).output.contains("NOT_FOUND"))

        // A venue photo: any signed-in user sees it.
        let places = try write(Array("name,kind,lat,lon,radius_m\nThe Pyramid,venue,33.7873,-118.1143,60\n".utf8), "\(stack.dir)/places.csv")
        #expect(try await ana.run(["places", "import", places, "--operator-key", "e2e-operator"]).status == 0)
        let placeID = try #require(try await ana.run(["places", "--lat", "33.7873", "--lon", "-118.1143", "--json"]).output.components(separatedBy: "\"placeId\": \"").dropFirst().first?.prefix { $0.isNumber })
        let venue = try await ana.run(["photo", "upload", try write(Fixture.webp(), "\(stack.dir)/v.webp"), "--purpose", "venue", "--venue", String(placeID)])
        #expect(venue.status == 0, "\(venue.output)")
        let venueID = try mediaID(after: "uploaded ", in: venue.output)
        #expect(try await cyd.run(["photo", "list", "--venue", String(placeID)]).output.contains(venueID))

        // Bad input: a text file named .jpg, an oversize file; only the owner deletes.
        let fake = try await ana.run(["photo", "upload", try write(Array("just some text\n".utf8), "\(stack.dir)/fake.jpg"), "--purpose", "venue", "--venue", String(placeID)])
        #expect(fake.status != 0 && fake.output.contains("INVALID_ARGUMENT") && fake.output.contains("not a JPEG"), "\(fake.output)")
        let huge = try await ana.run(["photo", "upload", try write([UInt8](repeating: 0xFF, count: (8 << 20) + 1), "\(stack.dir)/huge.jpg"), "--purpose", "check-in"])
        #expect(huge.status != 0 && huge.output.contains("limit"), "\(huge.output)")
        #expect(try await cyd.run(["photo", "delete", venueID]).output.contains("NOT_FOUND"))

        // Nearly 8 MiB through the gateway and back, byte for byte.
        let big = Fixture.jpeg(width: 4000, height: 3000, gps: false, filler: (8 << 20) - 4_096)
        let bigUpload = try await ana.run(["photo", "upload", try write(big, "\(stack.dir)/big.jpg"), "--venue", String(placeID)])
        #expect(bigUpload.status == 0, "\(bigUpload.output)")
        let bigID = try mediaID(after: "uploaded ", in: bigUpload.output)

        // kill -9 media: the photos are still there after the restart.
        procs.kill9("media")
        try await stack.start("media")
        #expect(try await ben.run(["photo", "get", bigID, "-o", "\(stack.dir)/big-back.jpg"]).status == 0)
        #expect(try Data(contentsOf: URL(fileURLWithPath: "\(stack.dir)/big-back.jpg")) == Data(big))
        let deleted = try await ana.run(["photo", "delete", venueID])
        #expect(deleted.output.contains("storage released"), "\(deleted.output)")
        // The map of what this test set up: Ana, her friend Ben, her check-in, the venue.
        let map = try await ana.run(["map", "-o", "\(stack.dir)/map.svg"])
        #expect(map.status == 0 && map.output.contains("1 friends, 1 check-ins, 1 venues"), "\(map.output)")
        let svg = try String(contentsOfFile: "\(stack.dir)/map.svg", encoding: .utf8)
        #expect(svg.hasPrefix("<svg") && svg.contains(">ben<") && svg.contains(">you at Union<") && svg.contains(">The Pyramid<"), "\(svg)")
        if !FileManager.default.isExecutableFile(atPath: "/usr/bin/rsvg-convert") {
            let png = try await ana.run(["map", "-o", "\(stack.dir)/map.png"])
            #expect(png.status != 0 && png.output.contains("librsvg2-bin"), "\(png.output)")
        }
        let usage = try await ana.run(["photo", "usage"])
        #expect(usage.output.contains("uploads   4 in the last hour"), "\(usage.output)")
    }
}
