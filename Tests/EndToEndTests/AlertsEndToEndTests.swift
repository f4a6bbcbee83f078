import Foundation
import FriensoTesting
import GRDB
import Testing

@Suite("end to end: alerts through the CLI", .serialized, .timeLimit(.minutes(4)))
struct AlertsEndToEndTests {
    @Test func helpNow_watch_inbox_andNoDeliveryLostOrDoubled_acrossKill9OfAlertsSocialAndGeo() async throws {
        let procs = try ProcessHarness()
        defer { procs.shutdown() }
        let stack = Stack(procs)
        for service in ["accounts", "social", "geo", "alerts", "gateway"] { try await stack.start(service) }
        // Geo started before alerts had an events endpoint: restart it to follow alerts' grants.
        procs.kill9("geo")
        try await stack.start("geo")
        let users = try await stack.register([("ana", "+15625550501"), ("ben", "+15625550502"), ("cyd", "+15625550503")])
        let (ana, ben, cy) = (users["ana"]!, users["ben"]!, users["cyd"]!)
        for (other, name) in [(ben, "ben"), (cy, "cyd")] {
            _ = try await ana.run(["friends", "add", name])
            _ = try await other.run(["friends", "add", "ana"])
        }
        #expect(try await ana.run(["circle", "add", "ben"]).status == 0)
        #expect(try await ana.run(["circle", "add", "cyd"]).status == 0)
        #expect(try await ana.run(["circle", "add", "+15625550599"]).status == 0)
        // The campus's buildings and venues: what names where a helpNow was raised.
        let campus = Repository.root.appendingPathComponent("deploy/data/campus.geojson").path
        #expect(try await ana.run(["places", "import", campus, "--operator-key", "e2e-operator"]).status == 0)
        // Geo announces the import on its "places" stream, and alerts loads its copy again at once
        // (its regular reload is a minute away).
        try await eventually("alerts' copy of geo's places, after the import's announcement", timeout: .seconds(20)) {
            ((try? String(contentsOfFile: "\(procs.workDirectory)/alerts.log", encoding: .utf8)) ?? "").contains("places=6 [Alerts] geo's places are loaded")
        }
        // Ben and Cy answer from their inbox: the coreFriend request comes from social.
        for cli in [ben, cy] {
            let inbox = try await cli.run(["inbox"])
            #expect(inbox.output.contains("core-friend") && inbox.output.contains("from ana"), "\(inbox.output)")
            let anaID = try #require(inbox.output.components(separatedBy: "core-friend ").dropFirst().first?.prefix { $0.isNumber }).description
            let accepted = try await cli.run(["inbox", "accept", "core-friend", anaID])
            #expect(accepted.status == 0, "\(accepted.output)")
        }
        #expect(try await ben.run(["devices", "register", "bens-phone-token-0001", "--platform", "ios"]).status == 0)
        // The invitation SMS to the non-user goes out (social's notice, delivered by alerts).
        try await eventually("the invitation SMS") { try stack.sent().contains { $0.0 == "+15625550599" && $0.1.contains("core circle") } }

        // Ben streams his events; Ana shares where she is and raises helpNow.
        let events = try procs.start("ben-events", executable: "frienso", arguments: ["events"],
                                     environment: ["FRIENSO_GATEWAY": stack.endpoints["gateway"]!, "FRIENSO_CONFIG_DIR": "\(stack.dir)/ben"])
        // Live events are best effort: only those published after the subscription reach him.
        try await eventually("ben's stream is listening") {
            ((try? String(contentsOfFile: events.logPath, encoding: .utf8)) ?? "").contains("listening for live events")
        }
        #expect(try await ana.run(["locate", "33.7838", "-118.1141"]).status == 0)
        let raised = try await ana.run(["help-now", "--message", "car broke down"])
        #expect(raised.status == 0 && raised.output.contains("helpNow sent to 3 people"), "\(raised.output)\n\(procs.logs())")
        #expect(raised.output.contains("call Emergency services: 911"), "\(raised.output)")
        // kill -9 alerts right after the acknowledged raise, deliveries perhaps in flight.
        procs.kill9("alerts")
        try await stack.start("alerts")
        try await eventually("every helpNow delivery, after the restart", timeout: .seconds(20)) {
            try stack.sent().filter { $0.1.contains("car broke down") }.count == 4 // ben's push, 3 SMS
        }
        let helpMessages = try stack.sent().filter { $0.1.contains("car broke down") }.map(\.0).sorted()
        #expect(helpMessages == ["+15625550502", "+15625550503", "+15625550599", "bens-phone-token-0001"], "none twice: \(helpMessages)")
        let streamed = try await eventuallyValue("ben's stream shows the alert") {
            let text = (try? String(contentsOfFile: events.logPath, encoding: .utf8)) ?? ""
            return text.contains("HELP NOW") ? text : nil
        }
        #expect(streamed.contains("car broke down"), "\(streamed)")
        let inbox = try await ben.run(["inbox"])
        #expect(inbox.output.contains("help-now") && inbox.output.contains("33.78380"), "\(inbox.output)")
        let twice = try await ana.run(["help-now"])
        #expect(twice.output.contains("already active"), "\(twice.output)")
        let outbox = try await ana.run(["outbox", "--operator-key", "e2e-operator", "--status", "delivered"])
        #expect(outbox.output.contains("help_now:1") && outbox.output.contains("via outbox-sms") && outbox.output.contains("attempt 1"), "\(outbox.output)")
        let denied = try await cy.run(["help-now", "resolve", "--alert-id", "1"])
        #expect(denied.status == 14, "PERMISSION_DENIED for someone else's alert: \(denied.output)")
        let resolved = try await ana.run(["help-now", "resolve"])
        #expect(resolved.output.contains("resolved"), "\(resolved.output)")

        // Social and geo die: a helpNow still reaches the whole circle, the invited number too,
        // from alerts' copy of the circles, which the restarted alerts loaded once its graph
        // replica had (the replica alone has the accepted members only).
        try await eventually("the restarted alerts' copies of the core circles and of geo's places") {
            let log = (try? String(contentsOfFile: "\(procs.workDirectory)/alerts.log", encoding: .utf8)) ?? ""
            return log.contains("the copy of the core circles is loaded") && log.contains("places=6 [Alerts] geo's places are loaded")
        }
        procs.kill9("social")
        procs.kill9("geo")
        let blind = try await ana.run(["help-now", "--message", "second time"])
        #expect(blind.status == 0 && blind.output.contains("helpNow sent to 3 people"), "\(blind.output)\n\(procs.logs())")
        #expect(blind.output.contains("location unknown"), "\(blind.output)")
        try await eventually("the second alert's SMS") {
            Set(try stack.sent().filter { $0.1.contains("second time") }.map(\.0)).isSuperset(of: ["+15625550502", "+15625550503", "+15625550599"])
        }
        _ = try await ana.run(["help-now", "resolve"])
        // Geo still dead, but her phone knows where she is: the alert carries its fix, named from
        // alerts' copy of geo's places.
        let located = try await ana.run(["help-now", "--message", "third time", "--lat", "33.781", "--lon", "-118.113", "--accuracy", "7"])
        #expect(located.status == 0 && located.output.contains("33.78100, -118.11300 (near Student Union)"), "\(located.output)\n\(procs.logs())")
        try await eventually("the third alert's SMS, with the phone's fix") {
            try stack.sent().contains {
                $0.0 == "+15625550502" && $0.1.contains("third time") && $0.1.contains("Last location near Student Union (33.78100,-118.11300)")
            }
        }
        _ = try await ana.run(["help-now", "resolve"])
        try await stack.start("social")
        try await stack.start("geo")

        // watchMe: Ben accepts, Cy declines; Ana sees both.
        let watch = try await ana.run(["watch", "start", "--minutes", "20", "--note", "walking home"])
        #expect(watch.status == 0, "\(watch.output)\n\(procs.logs())")
        let watchID = try #require(watch.output.components(separatedBy: "watch ").dropFirst().first?.prefix { $0.isNumber }).description
        #expect(try await ben.run(["inbox", "accept", "watch", watchID]).status == 0)
        #expect(try await cy.run(["inbox", "reject", "watch", watchID]).status == 0)
        let status = try await ana.run(["watch"])
        #expect(status.output.contains("ben: accepted") && status.output.contains("cyd: declined"), "\(status.output)")
        let ended = try await ana.run(["watch", "end"])
        #expect(ended.output.contains("ended"), "\(ended.output)")
        let resources = try await ana.run(["resources", "import", Repository.root.appendingPathComponent("deploy/data/resources.json").path,
                                           "--operator-key", "e2e-operator"])
        #expect(resources.output.contains("imported 4 resources"), "\(resources.output)")
        #expect(try await cy.run(["resources"]).output.contains("Safe walk escort"))
    }
}
