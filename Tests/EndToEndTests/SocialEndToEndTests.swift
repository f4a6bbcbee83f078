import Foundation
import FriensoTesting
import Testing

@Suite("end to end: friends through the CLI", .serialized, .timeLimit(.minutes(3)))
struct SocialEndToEndTests {
    @Test func friends_add_requests_accept_list_block_throughTheRealProcesses() async throws {
        let procs = try ProcessHarness()
        defer { procs.shutdown() }
        let dir = procs.workDirectory
        try procs.start("accounts", executable: "frienso-accounts", arguments: [
            "--data-dir", "\(dir)/data", "--endpoint", "tcp://127.0.0.1:*", "--endpoint-file", "\(dir)/accounts.endpoint"])
        let accounts = try await endpoint(in: "\(dir)/accounts.endpoint")
        try procs.start("social", executable: "frienso-social", arguments: [
            "--data-dir", "\(dir)/data", "--endpoint", "tcp://127.0.0.1:*", "--endpoint-file", "\(dir)/social.endpoint"],
            environment: ["FRIENSO_ACCOUNTS_ENDPOINT": accounts])
        let social = try await endpoint(in: "\(dir)/social.endpoint")
        try procs.start("gateway", executable: "frienso-gateway", arguments: [
            "--endpoint", "tcp://127.0.0.1:*", "--endpoint-file", "\(dir)/gateway.endpoint"],
            environment: ["FRIENSO_ACCOUNTS_ENDPOINT": accounts, "FRIENSO_SOCIAL_ENDPOINT": social])
        let gateway = try await endpoint(in: "\(dir)/gateway.endpoint")
        let alice = CLI(gateway: gateway, configDir: "\(dir)/alice"), bob = CLI(gateway: gateway, configDir: "\(dir)/bob")
        for (cli, name, phone) in [(alice, "alice", "+15625550201"), (bob, "bob", "+15625550202")] {
            let r = try await cli.run(["register", "--username", name, "--email", "\(name)@example.org", "--phone", phone,
                                 "--first-name", name.capitalized, "--last-name", "E2E", "--password-stdin"], stdin: "password \(name)\n")
            #expect(r.status == 0, "\(r.output)\n\(procs.logs())")
            let l = try await cli.run(["login", name, "--password-stdin"], stdin: "password \(name)\n")
            #expect(l.status == 0, "\(l.output)")
        }
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
}
