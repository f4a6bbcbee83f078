import Foundation
import FriensoTesting
import Testing

@Suite("end to end: friends through the CLI", .serialized, .timeLimit(.minutes(3)))
struct SocialEndToEndTests {
    /// Accounts, social, geo and a gateway as real processes, every port ephemeral; returns the
    /// gateway's endpoint.
    func startStack(_ procs: ProcessHarness) async throws -> String {
        let dir = procs.workDirectory
        let any = "tcp://127.0.0.1:*"
        try procs.start("accounts", executable: "frienso-accounts", arguments: [
            "--data-dir", "\(dir)/data", "--endpoint", any, "--endpoint-file", "\(dir)/accounts.endpoint"])
        let accounts = try await endpoint(in: "\(dir)/accounts.endpoint")
        try procs.start("social", executable: "frienso-social", arguments: [
            "--data-dir", "\(dir)/data", "--endpoint", any, "--endpoint-file", "\(dir)/social.endpoint"],
            environment: ["FRIENSO_ACCOUNTS_ENDPOINT": accounts, "FRIENSO_SOCIAL_EVENTS": any])
        let social = try await endpoint(in: "\(dir)/social.endpoint")
        let socialEvents = try await endpoint(in: "\(dir)/social.endpoint.events")
        let geo = try await startGeo(procs, social: social, socialEvents: socialEvents)
        try procs.start("gateway", executable: "frienso-gateway", arguments: [
            "--endpoint", any, "--endpoint-file", "\(dir)/gateway.endpoint"],
            environment: ["FRIENSO_ACCOUNTS_ENDPOINT": accounts, "FRIENSO_SOCIAL_ENDPOINT": social, "FRIENSO_SOCIAL_EVENTS": socialEvents,
                          "FRIENSO_GEO_ENDPOINT": geo.requests, "FRIENSO_GEO_EVENTS": geo.events,
                          "FRIENSO_ALERTS_EVENTS": alertsEvents.endpoint])
        return try await endpoint(in: "\(dir)/gateway.endpoint")
    }

    /// Nothing listens there: the alerts service is not part of these tests.
    let alertsEvents = try! DeadPort()

    /// Starts geo (again, after a crash, on the same endpoints when given).
    @discardableResult
    func startGeo(_ procs: ProcessHarness, social: String, socialEvents: String,
                  at fixed: (requests: String, events: String)? = nil) async throws -> (requests: String, events: String) {
        let dir = procs.workDirectory
        try? FileManager.default.removeItem(atPath: "\(dir)/geo.endpoint")
        try procs.start("geo", executable: "frienso-geo", arguments: [
            "--data-dir", "\(dir)/data", "--endpoint", fixed?.requests ?? "tcp://127.0.0.1:*", "--endpoint-file", "\(dir)/geo.endpoint"],
            environment: ["FRIENSO_SOCIAL_ENDPOINT": social, "FRIENSO_SOCIAL_EVENTS": socialEvents, "FRIENSO_OPERATOR_KEY": "e2e-operator",
                          "FRIENSO_GEO_EVENTS": fixed?.events ?? "tcp://127.0.0.1:*", "FRIENSO_ALERTS_EVENTS": alertsEvents.endpoint])
        return (try await endpoint(in: "\(dir)/geo.endpoint"), try await endpoint(in: "\(dir)/geo.endpoint.events"))
    }

    /// Registers and logs in each of `users` (name, phone) through the CLI.
    func register(_ users: [(CLI, String, String)], _ procs: ProcessHarness) async throws {
        for (cli, name, phone) in users {
            let r = try await cli.run(["register", "--username", name, "--email", "\(name)@example.org", "--phone", phone,
                                 "--first-name", name.capitalized, "--last-name", "E2E", "--password-stdin"], stdin: "password \(name)\n")
            #expect(r.status == 0, "\(r.output)\n\(procs.logs())")
            let l = try await cli.run(["login", name, "--password-stdin"], stdin: "password \(name)\n")
            #expect(l.status == 0, "\(l.output)")
        }
    }

    @Test func friends_add_requests_accept_list_block_throughTheRealProcesses() async throws {
        let procs = try ProcessHarness()
        defer { procs.shutdown() }
        let dir = procs.workDirectory
        let gateway = try await startStack(procs)
        let alice = CLI(gateway: gateway, configDir: "\(dir)/alice"), bob = CLI(gateway: gateway, configDir: "\(dir)/bob")
        try await register([(alice, "alice", "+15625550201"), (bob, "bob", "+15625550202")], procs)
        let found = try await alice.run(["search", "bo"])
        #expect(found.status == 0 && found.output.contains("bob (Bob E2E"), "\(found.output)")
        let add = try await alice.run(["friends", "add", "bob"])
        #expect(add.status == 0 && add.output.contains("sent to bob"), "\(add.output)\n\(procs.logs())")
        let requests = try await bob.run(["friends", "requests"])
        #expect(requests.output.contains("alice → bob"), "\(requests.output)")
        let id = try #require(requests.output.split(separator: "#").dropFirst().first?.prefix { $0.isNumber })
        let stranger = try await alice.run(["friends", "accept", String(id)])
        #expect(stranger.status == 14, "PERMISSION_DENIED for the sender: \(stranger.output)")
        let accept = try await bob.run(["friends", "accept", String(id)])
        #expect(accept.status == 0, "\(accept.output)")
        let notAgain = try await alice.run(["search", "bo"])
        #expect(notAgain.output.contains("nobody found"), "friends are not offered: \(notAgain.output)")
        let list = try await alice.run(["friends"])
        #expect(list.output.contains("bob (Bob E2E"), "\(list.output)")
        let json = try await bob.run(["friends", "list", "--json"])
        #expect(json.output.contains("\"username\": \"alice\""), "\(json.output)")
        let missing = try await alice.run(["friends", "add", "nobody_at_all"])
        #expect(missing.status == 15, "NOT_FOUND: \(missing.output)")
        let poke = try await alice.run(["poke", "bob"])
        #expect(poke.status == 0 && poke.output.contains("poked bob"), "\(poke.output)")
        let tooSoon = try await alice.run(["poke", "bob"])
        #expect(tooSoon.status == 18, "RESOURCE_EXHAUSTED within the minute: \(tooSoon.output)")

        // Core circle through the CLI.
        let circleAdd = try await alice.run(["circle", "add", "bob"])
        #expect(circleAdd.status == 0 && circleAdd.output.contains("asked bob"), "\(circleAdd.output)")
        let invite = try await alice.run(["circle", "add", "+1 562 555 0299"])
        #expect(invite.status == 0 && invite.output.contains("+15625550299"), "\(invite.output)")
        let circleAsk = try await bob.run(["circle", "requests"])
        #expect(circleAsk.output.contains("alice"), "\(circleAsk.output)")
        let join = try await bob.run(["circle", "accept", "alice"])
        #expect(join.status == 0, "\(join.output)")
        let show = try await alice.run(["circle"])
        #expect(show.output.contains("bob (Bob E2E") && show.output.contains("accepted") && show.output.contains("(2 of 3)"), "\(show.output)")
        let nobody = try await alice.run(["circle", "add", "nobody_at_all"])
        #expect(nobody.status == 15, "\(nobody.output)")

        let block = try await bob.run(["block", "alice"])
        #expect(block.status == 0 && block.output.contains("friendship ended"), "\(block.output)")
        let after = try await alice.run(["friends", "add", "bob"])
        #expect(after.status == 17, "FAILED_PRECONDITION once blocked: \(after.output)")
        let blocked = try await bob.run(["blocked"])
        #expect(blocked.output.contains("alice"), "\(blocked.output)")
        let ping = try await alice.run(["ping", "social"])
        #expect(ping.status == 0, "\(ping.output)")
    }

    @Test func recommend_link_findable_exchange_throughTheRealProcesses() async throws {
        let procs = try ProcessHarness()
        defer { procs.shutdown() }
        let dir = procs.workDirectory
        let gateway = try await startStack(procs)
        let cat = CLI(gateway: gateway, configDir: "\(dir)/cat"), dan = CLI(gateway: gateway, configDir: "\(dir)/dan")
        try await register([(cat, "cat", "+15625550301"), (dan, "dan", "+15625550302")], procs)
        let link = try await dan.run(["profile", "link", "campus", "0123"])
        #expect(link.status == 0 && link.output.contains("campus:0123"), "\(link.output)")
        let contacts = "\(dir)/contacts.txt"
        try "# my phone's contacts\n+1 (562) 555-0302\ncampus:0123\nsha256:\(String(repeating: "ab", count: 32))\nHome\n"
            .write(toFile: contacts, atomically: true, encoding: .utf8)
        let rec = try await cat.run(["recommend", "--contacts", contacts])
        #expect(rec.status == 0 && rec.output.contains("dan (Dan E2E") && rec.output.contains("by phone, linked account"), "\(rec.output)")
        #expect(rec.output.contains("1 entries were not"), "\(rec.output)")
        try "sha256:nothex\n".write(toFile: contacts, atomically: true, encoding: .utf8)
        #expect(try await cat.run(["recommend", "--contacts", contacts]).status == 64, "a malformed hash is a usage error")
        try "sha256:abcd\n".write(toFile: contacts, atomically: true, encoding: .utf8)
        #expect(try await cat.run(["recommend", "--contacts", contacts]).status == 12, "a 2-byte hash is INVALID_ARGUMENT")

        let refused = try await cat.run(["exchange", "add", "dan"])
        #expect(refused.status == 17 && refused.output.contains("findable"), "\(refused.output)")
        for cli in [cat, dan] { #expect(try await cli.run(["findable", "on"]).output.contains("findable: on")) }
        let first = try await cat.run(["exchange", "add", "dan", "--lat", "33.7838", "--lon", "-118.1141", "--place", "Library steps"])
        #expect(first.status == 0 && first.output.contains("recorded when dan adds you"), "\(first.output)")
        let second = try await dan.run(["exchange", "add", "cat"])
        #expect(second.status == 0 && second.output.contains("contacts exchanged") && second.output.contains("Library steps"), "\(second.output)")
        let history = try await cat.run(["exchange", "history"])
        #expect(history.output.contains("dan (Dan E2E") && history.output.contains("33.78380"), "\(history.output)")
    }

    @Test func locate_where_nearby_navigate_andLocationsSurviveKill9OfGeo() async throws {
        let procs = try ProcessHarness()
        defer { procs.shutdown() }
        let dir = procs.workDirectory
        let gateway = try await startStack(procs)
        let eve = CLI(gateway: gateway, configDir: "\(dir)/eve"), fin = CLI(gateway: gateway, configDir: "\(dir)/fin")
        try await register([(eve, "eve", "+15625550401"), (fin, "fin", "+15625550402")], procs)
        _ = try await eve.run(["friends", "add", "fin"])
        _ = try await fin.run(["friends", "add", "eve"])
        for cli in [eve, fin] { _ = try await cli.run(["findable", "on"]) }
        let bad = try await eve.run(["locate", "91", "0"])
        #expect(bad.status == 12, "INVALID_ARGUMENT: \(bad.output)")
        let here = try await eve.run(["locate", "40.7506", "-73.9935", "--status", "at the Garden"])
        #expect(here.status == 0 && here.output.contains("location shared"), "\(here.output)\n\(procs.logs())")
        #expect(try await fin.run(["locate", "40.7520", "-73.9935"]).status == 0)
        // The friendship reaches geo through its social replica: wait for it, bounded.
        let finID = try await eventuallyValue("eve sees fin") {
            let r = try await eve.run(["friends", "where"])
            return r.output.contains("fin (id ") ? r.output : nil
        }
        #expect(finID.contains("40.75200") && finID.contains("“") == false, "\(finID)")
        let near = try await eventuallyValue("fin is nearby") {
            let r = try await eve.run(["nearby"])
            return r.output.contains("156 m") ? r.output : nil
        }
        #expect(near.contains("fin (id "), "\(near)")
        let id = try #require(near.components(separatedBy: "(id ").dropFirst().first?.prefix { $0.isNumber }).description
        let nav = try await eve.run(["navigate", "fin"])
        #expect(nav.status == 0 && nav.output.contains("156 m N"), "\(nav.output)")
        let ghost = try await fin.run(["ghost", "on"])
        #expect(ghost.output.contains("ghost mode: on"), "\(ghost.output)")
        #expect(try await eve.run(["navigate", id]).status == 15, "NOT_FOUND while fin is a ghost (by id too)")
        _ = try await fin.run(["ghost", "off"])

        // Live events: eve streams; fin's moves reach her through geo → gateway.
        let events = try procs.start("eve-events", executable: "frienso", arguments: ["events", "--count", "1"],
                                     environment: ["FRIENSO_GATEWAY": gateway, "FRIENSO_CONFIG_DIR": "\(dir)/eve"])
        let streamed = try await eventuallyValue("eve's stream shows fin's location") {
            // The subscription joins asynchronously: keep moving until one event has come through.
            _ = try await fin.run(["locate", "40.7521", "-73.9935"])
            let text = (try? String(contentsOfFile: events.logPath, encoding: .utf8)) ?? ""
            return text.contains("location  user") ? text : nil
        }
        #expect(streamed.contains("40.75210"), "\(streamed)")

        // Places, venues and check-ins through the CLI, with the demo data.
        let sample = Repository.root.appendingPathComponent("deploy/data/campus.geojson").path
        let refused = try await eve.run(["places", "import", sample, "--operator-key", "guess"])
        #expect(refused.status == 14, "PERMISSION_DENIED: \(refused.output)")
        let imported = try await eve.run(["places", "import", sample, "--operator-key", "e2e-operator"])
        #expect(imported.output.contains("imported 6 places"), "\(imported.output)")
        let closest = try await eve.run(["places", "closest", "--lat", "33.7774", "--lon", "-118.1145"])
        #expect(closest.output.contains("University Library") && closest.output.contains("on campus"), "\(closest.output)")
        _ = try await fin.run(["locate", "33.7810", "-118.1130"])
        let venues = try await eve.run(["venues"])
        #expect(venues.output.contains("Student Union  fewer than 3 people, 1 friend"), "\(venues.output)")
        let checkin = try await fin.run(["checkin", "Student Union"])
        #expect(checkin.status == 0 && checkin.output.contains("checked in at Student Union"), "\(checkin.output)")
        _ = try await eve.run(["locate", "33.7800", "-118.1130"])
        let checkins = try await eve.run(["checkins", "nearby"])
        #expect(checkins.output.contains("at Student Union"), "\(checkins.output)")

        // kill -9 geo right after an acknowledged update: it is there after the restart.
        #expect(try await eve.run(["locate", "40.7600", "-73.9800"]).status == 0)
        let endpoints = (requests: try await endpoint(in: "\(dir)/geo.endpoint"), events: try await endpoint(in: "\(dir)/geo.endpoint.events"))
        procs.kill9("geo")
        try await startGeo(procs, social: try await endpoint(in: "\(dir)/social.endpoint"),
                           socialEvents: try await endpoint(in: "\(dir)/social.endpoint.events"), at: endpoints)
        let after = try await eventuallyValue("geo answers again with eve's last fix", timeout: .seconds(20)) {
            let r = try await fin.run(["friends", "where"])
            return r.output.contains("40.76000") ? r.output : nil
        }
        #expect(after.contains("-73.98000"), "\(after)\n\(procs.logs())")
    }
}
