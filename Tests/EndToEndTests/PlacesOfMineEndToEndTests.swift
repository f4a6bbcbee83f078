import Foundation
import FriensoClient
import FriensoProto
import FriensoTesting
import GRDB
import Testing
import Wire

/// Privacy zones and place alerts on the launched deployment (CurveZMQ between the members):
/// through the CLI, geo's place event reaching alerts over geo's event socket, and a push out.
@Suite("end to end: privacy zones and place alerts", .serialized, .timeLimit(.minutes(4)))
struct PlacesOfMineEndToEndTests {
    @Test func aZoneHidesCoordinates_andAPlaceAlertReachesTheFriendLiveAndByPush() async throws {
        let procs = try ProcessHarness()
        defer { procs.shutdown() }
        let stack = try await LaunchedStack(procs)
        defer { stack.shutdown() }
        try await stack.showingLogsOnFailure {
            let alice = try await makeActor(stack, "alice", number: 800)
            let bob = try await makeActor(stack, "bob", number: 801)
            try await befriend(alice, bob)
            _ = try await bob.client.call(AlertsV1.AlertsService.registerDevice, AlertsV1.RegisterDeviceRequest(
                token: "bobs-phone", platform: .android, appVersion: "e2e"), mutation: true)
            let home = (lat: 33.7700, lon: -118.1000)
            func locate(_ lat: Double) async throws {
                _ = try await alice.client.call(GeoV1.GeoService.updateLocation, GeoV1.UpdateLocationRequest(
                    latitude: lat, longitude: home.lon, accuracyM: 5, deviceTimeMs: WallClock.milliseconds()), mutation: true)
            }
            try await locate(home.lat + 0.01)

            let aliceCLI = stack.cli("alice"), bobCLI = stack.cli("bob")
            #expect(try await aliceCLI.run(["login", "alice", "--password-stdin"], stdin: "password alice 1\n").status == 0)
            #expect(try await bobCLI.run(["login", "bob", "--password-stdin"], stdin: "password bob 1\n").status == 0)
            let added = try await aliceCLI.run(["zone", "add", "Home", "\(home.lat)", "\(home.lon)", "--radius", "100"])
            #expect(added.status == 0 && added.output.contains("“Home”") && added.output.contains("privacy label"), "\(added.output)")
            let zoneID = try #require(added.output.split(separator: " ").dropFirst().first.flatMap { UInt64($0) }, "\(added.output)")
            let refused = try await bobCLI.run(["place-alert", "add", "alice", "--zone", "\(zoneID)"])
            #expect(refused.status == 14, "PERMISSION_DENIED until alice allows: \(refused.output)")
            let allowed = try await aliceCLI.run(["place-alert", "allow", "bob"])
            #expect(allowed.output.contains("you allow: bob"), "\(allowed.output)")
            let targets = try await bobCLI.run(["place-alert", "targets", "alice"])
            #expect(targets.output.contains("zone \(zoneID)  “Home”"), "\(targets.output)")
            let alert = try await bobCLI.run(["place-alert", "add", "alice", "--zone", "\(zoneID)"])
            #expect(alert.status == 0 && alert.output.contains("arrives or leaves “Home”"), "\(alert.output)")

            // Alice comes home: bob reads "Home", never coordinates, and his phone is told.
            try await locate(home.lat + 0.0003)
            let seen = try await bob.client.call(GeoV1.GeoService.friendsLocations, GeoV1.FriendsLocationsRequest()).friends.first { $0.userId == alice.id }
            #expect(seen?.fix == nil && seen?.around == "Home", "\(String(describing: seen))")
            try await eventually("bob's phone was told alice arrived", timeout: .seconds(20)) {
                let sent = try? stack.database("alerts").read { db in
                    try String.fetchAll(db, sql: "SELECT body FROM sent_messages WHERE address = 'bobs-phone'")
                }
                return sent?.contains("Alice Load (@alice) arrived at Home") == true
            }
            let audit = try await aliceCLI.run(["audit"])
            #expect(audit.output.contains("place alerts"), "\(audit.output)")
            let listed = try await aliceCLI.run(["place-alert"])
            #expect(listed.output.contains("bob (id \(bob.id)) is told when you arrive or leave “Home”"), "\(listed.output)")
            let zones = try await aliceCLI.run(["zone"])
            #expect(zones.output.contains("(you are inside)"), "\(zones.output)")
        }
    }
}
