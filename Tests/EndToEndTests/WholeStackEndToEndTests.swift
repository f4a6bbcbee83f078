import Foundation
import FriensoClient
import FriensoProto
import FriensoTesting
import Synchronization
import Testing
import Wire

@Suite("end to end: the whole stack under the launcher", .serialized, .timeLimit(.minutes(4)))
struct WholeStackEndToEndTests {
    @Test func demo_seedsAWorldEveryFeatureCanBeTriedOn_behindACurveProtectedGateway() async throws {
        let procs = try ProcessHarness()
        defer { procs.shutdown() }
        let stack = try await LaunchedStack(procs, curve: true, environment: ["FRIENSO_OPERATOR_KEY": "demo-operator-key"])
        defer { stack.shutdown() }
        let key = try #require(stack.serverKey)

        // Without the server's key, or with another one, the gateway does not answer at all.
        let stranger = try CurveKeys.generate()
        for (label, environment) in [("plain", [String: String]()), ("wrong key", ["FRIENSO_GATEWAY_PUBLIC_KEY": stranger.publicKey])] {
            let refused = try await CLI(gateway: stack.gateway, configDir: "\(procs.workDirectory)/\(label)", environment: environment)
                .run(["ping", "gateway", "--timeout", "1"])
            #expect(refused.status == StatusCode.unavailable.exitCode, "\(label): \(refused.output)")
        }

        let sessions = "\(procs.workDirectory)/demo"
        let seeded = try await ProcessHarness.run("/bin/bash", [Repository.root.appendingPathComponent("deploy/demo").path, "--once"], environment: [
            "FRIENSO_BIN_DIR": Repository.binaries.path, "FRIENSO_GATEWAY": stack.gateway, "FRIENSO_GATEWAY_PUBLIC_KEY": key,
            "FRIENSO_OPERATOR_KEY": "demo-operator-key", "FRIENSO_DEMO_DIR": sessions])
        #expect(seeded.status == 0, "\(seeded.output)\n\(stack.logs())")

        func demoUser(_ name: String) -> CLI {
            CLI(gateway: stack.gateway, configDir: "\(sessions)/\(name)", environment: ["FRIENSO_GATEWAY_PUBLIC_KEY": key])
        }
        let alice = demoUser("alice")
        let whereabouts = try await alice.run(["friends", "where"]).output
        for friend in ["bob", "carol", "dave"] { #expect(whereabouts.contains("\(friend) (id"), "\(whereabouts)") }
        #expect(whereabouts.contains("Around University Library"), "\(whereabouts)")
        let venues = try await alice.run(["venues"]).output
        #expect(venues.contains("Pyramid Arena  fewer than 3 people, 1 friend\n"), "\(venues)")
        #expect(venues.contains("Harbor Coffee  fewer than 3 people, 1 friend\n"), "\(venues)")
        let circle = try await alice.run(["circle"]).output
        #expect(circle.contains("bob (Bob Builder, id 2)  accepted") && circle.contains("carol (Carol Danvers, id 3)  accepted"), "\(circle)")
        let inbox = try await alice.run(["inbox"]).output
        #expect(inbox.contains("from bob") && inbox.contains("walking home from the library"), "\(inbox)")
        let checkIns = try await alice.run(["checkins"]).output
        #expect(checkIns.contains("carol (id 3) at Pyramid Arena") && checkIns.contains("photo "), "\(checkIns)")
        let nearby = try await demoUser("erin").run(["nearby"]).output
        #expect(nearby.split(separator: "\n").count == 2, "alice and frank are findable near erin: \(nearby)")

        let map = "\(procs.workDirectory)/map.svg"
        let drawn = try await alice.run(["map", "-o", map])
        #expect(drawn.status == 0, "\(drawn.output)")
        let svg = try String(contentsOfFile: map, encoding: .utf8)
        for label in ["bob", "carol", "dave", "Pyramid Arena", "Harbor Coffee"] { #expect(svg.contains(label), "\(label) on the map") }
    }

    @Test func slowService_gatewayRestart_andRestartsOfSocialAndGeo_replicasResync() async throws {
        let procs = try ProcessHarness()
        defer { procs.shutdown() }
        let stack = try await LaunchedStack(procs)
        defer { stack.shutdown() }
        try await stack.showingLogsOnFailure {
            let ana = try await makeActor(stack, "ana", number: 1)
            let ben = try await makeActor(stack, "ben", number: 2)
            try await befriend(ana, ben)

            // Every replica loads its snapshot through the plane's policy: one its member may not
            // feed would retry for ever behind a fallback that keeps everything else working.
            @Sendable func log(_ service: String) -> String {
                (try? String(contentsOfFile: "\(stack.run)/logs/\(service).log", encoding: .utf8)) ?? ""
            }
            try await eventually("every replica loaded its snapshot over the plane", timeout: .seconds(20)) {
                ["social", "alerts"].allSatisfy { log($0).contains("profiles snapshot loaded") }
                    && ["accounts", "geo", "alerts", "media"].allSatisfy { log($0).contains("graph snapshot loaded") }
            }
            for service in ["accounts", "social", "geo", "alerts", "media", "gateway"] {
                #expect(!log(service).contains("may not call"), "\(service) was refused a call by the plane's policy")
            }

            // A stopped (slow) geo: its calls end at their deadline; accounts and social go on meanwhile.
            let geoPID = try #require(stack.pid(of: "geo"))
            kill(geoPID, SIGSTOP)
            // The stop takes effect when every thread of geo has been stopped: wait for the
            // kernel to say so (a call sent before that could still be answered).
            try await eventually("geo (PID \(geoPID)) is stopped", timeout: .seconds(10)) { ProcessState.of(geoPID) == "T" }
            let stuck = Task { () -> RPCError? in
                do {
                    _ = try await ana.client.call(GeoV1.GeoService.friendsLocations, GeoV1.FriendsLocationsRequest(), deadline: .seconds(2))
                    return nil
                } catch let error as RPCError {
                    return error
                } catch {
                    return RPCError(.internal, "\(error)")
                }
            }
            for _ in 0..<20 {
                #expect(try await ana.client.call(SocialV1.SocialService.listFriends, SocialV1.ListFriendsRequest()).friends.count == 1)
                #expect(try await ana.client.call(AccountsV1.AccountsService.whoAmI, AccountsV1.WhoAmIRequest()).account?.profile?.username == "ana")
            }
            let outcome = await stuck.value
            #expect(outcome.map(isTransient) == true, "a stopped geo: \(String(describing: outcome))")
            kill(geoPID, SIGCONT)
            try await eventually("geo answers again once it runs", timeout: .seconds(30)) {
                (try? await ana.client.call(GeoV1.GeoService.friendsLocations, GeoV1.FriendsLocationsRequest())) != nil
            }

            // Gateway restart: ana's live events come back without her doing anything.
            let events = try await ana.client.events()
            let seen = Latitudes()
            let reading = Task {
                for await event in events where event.method == "geo.Location" {
                    if let latitude = (try? GeoV1.LocationEvent(serializedBytes: event.payload))?.fix?.latitude {
                        seen.insert(latitude)
                    }
                }
            }
            defer { reading.cancel() }
            func awaitLiveLocation(_ latitude: Double) async throws {
                // Subscriptions join asynchronously: ben moves until ana is told.
                try await eventually("ana is told ben is at \(latitude)", timeout: .seconds(30)) {
                    _ = try? await ben.client.call(GeoV1.GeoService.updateLocation, GeoV1.UpdateLocationRequest(
                        latitude: latitude, longitude: -118.11, accuracyM: 10, deviceTimeMs: Int64(Date().timeIntervalSince1970 * 1000)))
                    return seen.contains(latitude)
                }
            }
            try await awaitLiveLocation(33.7001)
            try await stack.kill9AndAwaitRestart("gateway")
            try await awaitLiveLocation(33.7002)

            // Social restarts: a friendship made afterwards reaches geo's replica.
            try await stack.kill9AndAwaitRestart("social")
            let cyd = try await makeActor(stack, "cyd", number: 3)
            try await befriend(cyd, ana)
            try await awaitFriend(cyd, seenBy: ana, at: 33.7003)

            // Geo misses a change (stopped, then killed): the restarted geo has it from social.
            let dan = try await makeActor(stack, "dan", number: 4)
            let stopped = try #require(stack.pid(of: "geo"))
            kill(stopped, SIGSTOP)
            try await befriend(dan, ana)
            try await stack.kill9AndAwaitRestart("geo")
            try await awaitFriend(dan, seenBy: ana, at: 33.7004)
            try await awaitFriend(cyd, seenBy: ana, at: 33.7005)
        }
    }

    /// Latitudes seen in live events.
    final class Latitudes: Sendable {
        private let seen = Mutex<Set<Double>>([])
        func insert(_ latitude: Double) { _ = seen.withLock { $0.insert(latitude) } }
        func contains(_ latitude: Double) -> Bool { seen.withLock { $0.contains(latitude) } }
    }

    /// `friend` moves to `latitude`; `viewer`'s friends' locations show it (geo knows they are friends).
    func awaitFriend(_ friend: Actor, seenBy viewer: Actor, at latitude: Double) async throws {
        _ = try await friend.client.call(GeoV1.GeoService.updateLocation, GeoV1.UpdateLocationRequest(
            latitude: latitude, longitude: -118.11, accuracyM: 10, deviceTimeMs: Int64(Date().timeIntervalSince1970 * 1000)))
        try await eventually("\(viewer.name) sees \(friend.name)", timeout: .seconds(30)) {
            let friends = try await viewer.client.call(GeoV1.GeoService.friendsLocations, GeoV1.FriendsLocationsRequest()).friends
            return friends.contains { $0.userId == friend.id && $0.fix?.latitude == latitude }
        }
    }
}
