import Foundation
import FriensoClient
import FriensoProto
import FriensoTesting
import Testing
import Wire

/// A share link end to end: made with the CLI, opened through the edge by someone without an
/// account (the page and its JSON), viewed with the CLI, listed in the owner's audit, revoked.
@Suite("end to end: share links", .serialized, .timeLimit(.minutes(3)))
struct ShareLinkEndToEndTests {
    @Test func someoneWithoutAnAccount_seesTheLiveLocation_untilTheLinkIsRevoked() async throws {
        let procs = try ProcessHarness()
        defer { procs.shutdown() }
        let stack = try await LaunchedStack(procs)
        defer { stack.shutdown() }
        try await stack.showingLogsOnFailure {
            let owner = try await makeActor(stack, "sharer", number: 850)
            _ = try await owner.client.call(GeoV1.GeoService.updateLocation, GeoV1.UpdateLocationRequest(
                latitude: 33.77731, longitude: -118.11452, accuracyM: 6, deviceTimeMs: WallClock.milliseconds()), mutation: true)
            let cli = stack.cli("sharer")
            #expect(try await cli.run(["login", "sharer", "--password-stdin"], stdin: "password sharer 1\n").status == 0)
            var made = cli
            made.environment["FRIENSO_EDGE"] = stack.edge
            let created = try await made.run(["share", "create", "--minutes", "30", "--label", "Sharer, walking home"])
            let url = try #require(created.output.split(separator: "\n").first { $0.hasPrefix("share: ") }.map { String($0.dropFirst(7)) },
                                   "\(created.output)")
            #expect(url.hasPrefix("\(stack.edge)/s/"))
            let token = String(url.split(separator: "/").last ?? "")
            let linkID = try #require(created.output.split(separator: " ").dropFirst().first.flatMap { UInt64($0) }, "\(created.output)")

            // The page, with no referrer leaving it; then its JSON, without any session.
            let page = try await HTTP.get(url)
            #expect(page.status == 200 && page.text.contains("/js/share.js") && page.header("Referrer-Policy") == "no-referrer", "\(page.status)")
            let json = try await HTTP.post("\(stack.edge)/v1/geo/ViewShareLink", json: #"{"token": "\#(token)"}"#)
            #expect(json.status == 200 && json.text.contains("33.77731") && json.text.contains("Sharer, walking home"), "\(json.text)")
            let viewed = try await stack.cli("nobody").run(["share", "view", url])
            #expect(viewed.status == 0 && viewed.output.contains("33.77731"), "\(viewed.output)")
            #expect(!stack.logs().contains(token), "the token never reaches a log")

            let audit = try await cli.run(["audit"])
            #expect(audit.output.contains("someone with link \(linkID)  share link ×"), "\(audit.output)")
            let revoked = try await cli.run(["share", "revoke", "\(linkID)"])
            #expect(revoked.status == 0 && revoked.output.contains("revoked"), "\(revoked.output)")
            let after = try await HTTP.post("\(stack.edge)/v1/geo/ViewShareLink", json: #"{"token": "\#(token)"}"#)
            #expect(after.status == 404, "\(after.text)")
        }
    }
}
