import CZeroMQ
import FriensoProto
import FriensoTesting
import Logging
import Synchronization
import Testing
@testable import Wire

/// One deployment's keyring in memory: a key pair per member.
struct TestDeployment {
    let pairs: [String: CurveKeys.KeyPair]

    init(_ members: [String] = ["accounts", "social", "geo", "alerts", "media", "gateway", "launcher"]) throws {
        pairs = Dictionary(uniqueKeysWithValues: try members.map { ($0, try CurveKeys.generate()) })
    }

    func keyring(_ member: String) throws -> Keyring {
        try Keyring(member: member, keys: pairs[member]!, members: pairs.mapValues(\.publicKey))
    }
}

/// Records what a handler saw of the request's origin.
final class Origins: Sendable {
    let addresses = Mutex<[String]>([])
    let members = Mutex<[String]>([])
}

struct RecordingHandler: RequestHandler {
    let inner: MethodRouter
    let origins: Origins

    func handle(_ request: IncomingRequest, logger: Logger) async -> Envelope {
        origins.addresses.withLock { $0.append(request.peerAddress) }
        origins.members.withLock { $0.append(request.peerMember) }
        return await inner.handle(request, logger: logger)
    }
}

@Suite("internal plane: CurveZMQ, ZAP and the per-member policy", .timeLimit(.minutes(1)))
struct PlaneTests {
    /// A geo-shaped host: one internal method (LatestLocation: social and alerts may call it) and
    /// one client method (FriendsLocations: only the gateway may stamp a caller).
    func geoRouter() -> MethodRouter {
        var router = MethodRouter()
        router.register(GeoV1.GeoService.latestLocation) { request, _ in GeoV1.LatestLocationResponse(found: request.userId == 7) }
        router.register(GeoV1.GeoService.friendsLocations) { _, context in
            GeoV1.FriendsLocationsResponse(friends: [GeoV1.FriendLocation(userId: context.callerUserID)])
        }
        return router
    }

    func withGeo<T: Sendable>(_ deployment: TestDeployment, origins: Origins = Origins(), logs: CapturedLogs = CapturedLogs(),
                              keepsPeerAddress: Bool = true,
                              _ body: @Sendable (ServiceHost, String) async throws -> T) async throws -> T {
        var options = HostOptions(name: "geo", endpoint: "tcp://127.0.0.1:*")
        options.security = try deployment.keyring("geo").server()
        options.keepsPeerAddress = keepsPeerAddress
        let host = ServiceHost(options: options, handler: RecordingHandler(inner: geoRouter(), origins: origins), logger: logs.logger("geo"))
        return try await withRunningServices([host], logger: logs.logger("group")) {
            try await body(host, try await host.boundEndpoint())
        }
    }

    func client(_ endpoint: String, _ security: ClientSecurity, deadline: Duration = TestDeadline.patient) -> WireClient {
        var options = ClientOptions(security: security)
        options.defaultDeadline = deadline
        return WireClient(endpoint: endpoint, options: options, logger: Logger(label: "client"))
    }

    @Test func internalMethod_onlyFromTheMembersItsContractNames() async throws {
        let deployment = try TestDeployment()
        try await withGeo(deployment) { _, endpoint in
            let alerts = client(endpoint, try deployment.keyring("alerts").client(of: "geo"))
            let media = client(endpoint, try deployment.keyring("media").client(of: "geo"))
            let launcher = client(endpoint, try deployment.keyring("launcher").client(of: "geo"))
            defer { Task { await alerts.close(); await media.close(); await launcher.close() } }

            let found = try await alerts.call(GeoV1.GeoService.latestLocation, GeoV1.LatestLocationRequest(userId: 7))
            #expect(found.found)
            await expectError(.permissionDenied) {
                _ = try await media.call(GeoV1.GeoService.latestLocation, GeoV1.LatestLocationRequest(userId: 7))
            }
            await expectError(.permissionDenied) {
                _ = try await launcher.call(GeoV1.GeoService.latestLocation, GeoV1.LatestLocationRequest(userId: 7))
            }
            // Every member may ping (the launcher's readiness probe).
            #expect(try await launcher.ping(service: "geo").service == "geo")
        }
    }

    @Test func clientMethod_withAForgedCaller_isRefusedFromAnyMemberButTheGateway() async throws {
        let deployment = try TestDeployment()
        let origins = Origins()
        try await withGeo(deployment, origins: origins) { host, endpoint in
            let gateway = client(endpoint, try deployment.keyring("gateway").client(of: "geo"))
            let media = client(endpoint, try deployment.keyring("media").client(of: "geo"))
            defer { Task { await gateway.close(); await media.close() } }
            let forged = CallOptions(callerUserID: 1)
            await expectError(.permissionDenied) {
                _ = try await media.call(GeoV1.GeoService.friendsLocations, GeoV1.FriendsLocationsRequest(), options: forged)
            }
            let reply = try await gateway.call(GeoV1.GeoService.friendsLocations, GeoV1.FriendsLocationsRequest(), options: forged)
            #expect(reply.friends.map(\.userId) == [1])
            #expect(host.counters.refused.load(ordering: .relaxed) == 1)
            // The handler saw the gateway by name and the TCP peer's address (the per-client
            // throttle needs it; it used to be read from the routing-id frame, which has none).
            #expect(origins.members.withLock { $0 } == ["gateway"])
            #expect(origins.addresses.withLock { $0 } == ["127.0.0.1"])
        }
    }

    /// A host that does not keep peer addresses (every service but the gateway) hands its
    /// handlers none, and still names the member that sent each request.
    @Test func aHostThatKeepsNoAddresses_stillNamesTheMember() async throws {
        let deployment = try TestDeployment()
        let origins = Origins()
        try await withGeo(deployment, origins: origins, keepsPeerAddress: false) { _, endpoint in
            let social = client(endpoint, try deployment.keyring("social").client(of: "geo"))
            defer { Task { await social.close() } }
            let reply = try await social.call(GeoV1.GeoService.latestLocation, GeoV1.LatestLocationRequest(userId: 7))
            #expect(reply.found)
            #expect(origins.members.withLock { $0 } == ["social"])
            #expect(origins.addresses.withLock { $0 } == [""])
        }
    }

    @Test func noKey_wrongServerKey_andAnotherDeploymentsKey_getNothing_andTheHostServesItsOwn() async throws {
        let deployment = try TestDeployment()
        let other = try TestDeployment()
        let origins = Origins()
        try await withGeo(deployment, origins: origins) { _, endpoint in
            let context = ZMQContext.shared
            let zap = try context.authenticator()
            let refusedBefore = zap.refused.load(ordering: .relaxed)
            let strangers = [
                client(endpoint, .plaintext, deadline: .milliseconds(800)),
                // Knows geo's public key, but its own key is another deployment's alerts.
                client(endpoint, .curve(serverPublicKey: try deployment.keyring("geo").keys.publicKey, keys: other.pairs["alerts"]),
                       deadline: .milliseconds(800)),
                // Another deployment's whole keyring.
                client(endpoint, try other.keyring("alerts").client(of: "geo"), deadline: .milliseconds(800)),
                // A fresh anonymous key that trusts geo.
                client(endpoint, .curve(serverPublicKey: try deployment.keyring("geo").keys.publicKey, keys: nil), deadline: .milliseconds(800)),
            ]
            for stranger in strangers {
                let outcome = await stranger.send(Envelope(method: GeoV1.GeoService.latestLocation.fullName,
                                                           payload: GeoV1.LatestLocationRequest(userId: 7).serializedBytes()))
                #expect(outcome.status == .unavailable, "a refused peer hears nothing: \(outcome.status) \(outcome.statusMessage)")
                await stranger.close()
            }
            #expect(origins.members.withLock { $0 }.isEmpty, "no stranger's request reached a handler")
            #expect(zap.refused.load(ordering: .relaxed) > refusedBefore, "the ZAP handler refused the unknown keys")
            let alerts = client(endpoint, try deployment.keyring("alerts").client(of: "geo"))
            defer { Task { await alerts.close() } }
            #expect(try await alerts.call(GeoV1.GeoService.latestLocation, GeoV1.LatestLocationRequest(userId: 7)).found)
        }
    }

    @Test func publisher_admitsOnlyItsSubscribers() async throws {
        let deployment = try TestDeployment()
        let other = try TestDeployment()
        let logs = CapturedLogs()
        let publisher = Publisher(name: "alerts", endpoint: "tcp://127.0.0.1:*", logger: logs.logger("pub"),
                                  security: try deployment.keyring("alerts").server(admitting: ["geo", "gateway"]))
        try await withRunningServices([publisher], logger: logs.logger("group")) {
            let endpoint = try await publisher.boundEndpoint()
            let alertsKey = try deployment.keyring("alerts").keys.publicKey
            let geo = Subscriber(endpoint: endpoint, prefixes: [""], logger: logs.logger("geo"), security: try deployment.keyring("geo").client(of: "alerts"))
            let media = Subscriber(endpoint: endpoint, prefixes: [""], logger: logs.logger("media"), security: try deployment.keyring("media").client(of: "alerts"))
            let foreign = Subscriber(endpoint: endpoint, prefixes: [""], logger: logs.logger("foreign"),
                                     security: .curve(serverPublicKey: alertsKey, keys: other.pairs["geo"]))
            let plain = Subscriber(endpoint: endpoint, prefixes: [""], logger: logs.logger("plain"))
            let strangers = EventRecorderBox()
            let watchers = [media, foreign, plain].map { subscriber in
                Task { for await _ in subscriber.events { strangers.count.add(1, ordering: .relaxed) } }
            }
            let geoHeard = EventRecorderBox()
            let listener = Task { for await _ in geo.events { geoHeard.count.add(1, ordering: .relaxed) } }
            // Publish until geo hears one (a subscription takes a moment to reach the PUB socket).
            try await eventually("the admitted subscriber hears an event", timeout: .seconds(10)) {
                publisher.publish(topic: "grants", method: "alerts.Grant", payload: [1])
                try? await Task.sleep(for: .milliseconds(50))
                return geoHeard.count.load(ordering: .relaxed) > 0
            }
            let heard = geoHeard.count.load(ordering: .relaxed) > 0
            #expect(heard, "the admitted subscriber gets events")
            for _ in 0..<20 { publisher.publish(topic: "grants", method: "alerts.Grant", payload: [2]) }
            try await Task.sleep(for: .milliseconds(300)) // a negative check: give strays time to arrive
            #expect(strangers.count.load(ordering: .relaxed) == 0, "a member that does not subscribe, a foreign key and no key get no event")
            for subscriber in [geo, media, foreign, plain] { await subscriber.close() }
            for watcher in watchers { watcher.cancel() }
            listener.cancel()
        }
    }

    @Test func anEnvelopeThatIsNotARequest_getsInvalidArgument() async throws {
        try await withHost(MethodRouter(), logs: CapturedLogs()) { _, client in
            let endpoint = client.endpoint
            let raw = try RawPeer(.dealer, connect: endpoint)
            for kind in [CommonV1.Kind.unspecified, .reply, .event, .unrecognized(9)] {
                try raw.send([Envelope(version: WireProtocol.version, kind: kind, requestId: 5, method: "test.Echo").serializedBytes()])
                let reply = try #require(try raw.receiveEnvelope(), "kind \(kind) got no answer")
                #expect(reply.status == .invalidArgument)
                #expect(reply.requestId == 5)
            }
        }
    }

    @Test func keyring_refusesAMismatchedSecret_andAMemberItDoesNotKnow() throws {
        let deployment = try TestDeployment(["geo", "alerts"])
        let stranger = try CurveKeys.generate()
        #expect(throws: KeyringError.self) {
            try Keyring(member: "geo", keys: CurveKeys.KeyPair(publicKey: stranger.publicKey, secretKey: deployment.pairs["geo"]!.secretKey),
                        members: deployment.pairs.mapValues(\.publicKey))
        }
        #expect(throws: KeyringError.self) { try deployment.keyring("geo").client(of: "media") }
        // A key copied for two members would make them indistinguishable.
        #expect(throws: KeyringError.self) {
            try Keyring(member: "geo", keys: deployment.pairs["geo"]!, members: ["alerts": deployment.pairs["geo"]!.publicKey])
        }
    }
}

final class EventRecorderBox: Sendable {
    let count = Atomic<Int>(0)
}
