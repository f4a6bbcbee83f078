import Foundation
import FriensoClient
import FriensoProto
import FriensoTesting
import Testing
import Wire

/// Precision per friend through the CLI and the edge, on the launched deployment.
@Suite("end to end: precision per friend", .serialized, .timeLimit(.minutes(3)))
struct PrivacyEndToEndTests {
    @Test func aFriendSeesWhatTheyAreAllowed_throughTheCLIAndTheEdge() async throws {
        let procs = try ProcessHarness()
        defer { procs.shutdown() }
        let stack = try await LaunchedStack(procs)
        defer { stack.shutdown() }
        try await stack.showingLogsOnFailure {
            let ava = try await makeActor(stack, "ava", number: 800)
            let bo = try await makeActor(stack, "boz", number: 801)
            try await befriend(ava, bo)
            _ = try await ava.client.call(GeoV1.GeoService.updateLocation, GeoV1.UpdateLocationRequest(
                latitude: 33.78123, longitude: -118.11456, accuracyM: 5, deviceTimeMs: WallClock.milliseconds()), mutation: true)
            let avaCLI = stack.cli("ava"), boCLI = stack.cli("boz")
            #expect(try await avaCLI.run(["login", "ava", "--password-stdin"], stdin: "password ava 1\n").status == 0)
            #expect(try await boCLI.run(["login", "boz", "--password-stdin"], stdin: "password boz 1\n").status == 0)

            let exact = try await boCLI.run(["friends", "where"])
            #expect(exact.output.contains("33.78123, -118.11456"), "\(exact.output)")
            let set = try await avaCLI.run(["precision", "set", "boz", "approximate"])
            #expect(set.status == 0 && set.output.contains("boz (id \(bo.id)): approximate"), "\(set.output)")
            let approximate = try await boCLI.run(["friends", "where"])
            #expect(approximate.output.contains("(approximate)") && !approximate.output.contains("33.78123"), "\(approximate.output)")
            let notFriend = try await avaCLI.run(["precision", "set", "nobody", "hidden"])
            #expect(notFriend.status == 64, "\(notFriend.output)")
            _ = try await avaCLI.run(["precision", "set", "boz", "hidden"])
            let hidden = try await boCLI.run(["friends", "where"])
            #expect(hidden.output.contains("no friend shares a location with you"), "\(hidden.output)")

            // The edge answers the same, in JSON.
            let login = try await HTTP.post("\(stack.edge)/v1/accounts/Login", json: #"{"login": "boz", "password": "password boz 1"}"#)
            let token = try #require({ if case .string(let t)? = try login.json()["sessionToken"] { t } else { nil } }())
            _ = try await avaCLI.run(["precision", "set", "boz", "approximate"])
            let seen = try await HTTP.post("\(stack.edge)/v1/geo/FriendsLocations", json: "{}", token: token)
            #expect(seen.status == 200 && seen.text.contains("LOCATION_PRECISION_APPROXIMATE") && !seen.text.contains("33.78123"), "\(seen.text)")
            let shown = try await avaCLI.run(["precision"])
            #expect(shown.output.contains("friends see you: exact (the default)") && shown.output.contains("boz (id \(bo.id)): approximate"), "\(shown.output)")
        }
    }
}
