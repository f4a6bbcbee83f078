import CZeroMQ
import Foundation
import FriensoClient
import FriensoProto
import FriensoTesting
import Launcher
import Logging
import ServiceKit
import Synchronization
import Testing
import Wire

/// A raw socket that a stranger would open: no Frienso client logic, just libzmq with whatever
/// keys it has.
final class Stranger {
    let socket: ZMQSocket
    let what: String

    init(_ kind: ZMQSocket.Kind, _ endpoint: String, _ security: ClientSecurity, what: String) throws {
        socket = try ZMQSocket(.shared, kind)
        self.what = what
        try socket.secure(security)
        if kind == .sub { try socket.subscribe("") }
        try socket.connect(endpoint)
    }

    /// Anything that came back within `timeout` (one message is enough to fail).
    func received(within timeout: Duration) throws -> Bool {
        try socket.set(ZMQ_RCVTIMEO, Int32(timeout.wholeMilliseconds))
        return try socket.receive(dontWait: false) != nil
    }
}

@Suite("end to end: the trusted internal plane", .serialized, .timeLimit(.minutes(4)))
struct PlaneEndToEndTests {
    /// Every member behind the gateway, and those with a PUB socket.
    static let services = LaunchPlan.zeroMQMembers.filter { $0 != "gateway" }
    static let publishers = LaunchPlan.publishers

    /// The four strangers of the threat model, for a server `member` of the deployment in `keyring`:
    /// no key, a fresh key, another deployment's member key (knowing the real server key), and
    /// another deployment's keys altogether.
    static func strangers(for member: String, keyring: String, other: String) throws -> [(String, ClientSecurity)] {
        let serverKey = try KeyringFiles.publicKeys(at: keyring)[member]!
        let foreign = try KeyringFiles.load(at: other, member: "gateway")
        return [
            ("no key", .plaintext),
            ("a fresh key", .curve(serverPublicKey: serverKey, keys: nil)),
            ("another deployment's gateway key", .curve(serverPublicKey: serverKey, keys: foreign.keys)),
            ("another deployment's keyring", try foreign.client(of: member)),
        ]
    }

    @Test func strangersGetNothing_membersOnlyWhatTheirKeyAllows_andTheDeploymentKeepsServing() async throws {
        let procs = try ProcessHarness()
        defer { procs.shutdown() }
        let stack = try await LaunchedStack(procs)
        defer { stack.shutdown() }
        try await stack.showingLogsOnFailure {
            let other = "\(procs.workDirectory)/other-keys"
            try KeyringFiles.ensure(at: other)

            // Every service's request port: every contract method, with a forged caller, from each stranger.
            var requestStrangers: [Stranger] = []
            for service in Self.services {
                let methods = ProtoIndex.methods.filter { $0.service == service }.map(\.fullName) + ["\(service).Ping"]
                for (what, security) in try Self.strangers(for: service, keyring: stack.keyring, other: other) {
                    let stranger = try Stranger(.dealer, stack.endpoints[service]!, security, what: "\(what) → \(service)")
                    for (i, method) in methods.enumerated() {
                        let forged = Envelope(version: WireProtocol.version, kind: .request, requestId: UInt64(i + 1), method: method,
                                              callerUserId: 1, payload: [], clientAddress: "10.0.0.1")
                        // Whether the stranger's own socket takes the frames does not matter (a refused
                        // handshake can tear its pipe down between two frames: EAGAIN): what is
                        // checked is that nothing comes back and the deployment keeps serving.
                        _ = try? stranger.socket.send([[], forged.serializedBytes()], dontWait: true)
                    }
                    requestStrangers.append(stranger)
                }
            }
            // Every event port: each stranger subscribes to everything.
            var eventStrangers: [Stranger] = []
            for publisher in Self.publishers {
                for (what, security) in try Self.strangers(for: publisher, keyring: stack.keyring, other: other) {
                    eventStrangers.append(try Stranger(.sub, stack.events[publisher]!, security, what: "\(what) ⇢ \(publisher) events"))
                }
                // A member of the deployment that does not consume this stream (media, for all but social).
                if publisher != "social" {
                    let media = try KeyringFiles.load(at: stack.keyring, member: "media")
                    eventStrangers.append(try Stranger(.sub, stack.events[publisher]!, try media.client(of: publisher),
                                                       what: "media's key ⇢ \(publisher) events"))
                }
            }
            // A legitimate subscriber (the gateway's key) on every stream: the positive control.
            let gatewayKeys = try KeyringFiles.load(at: stack.keyring, member: "gateway")
            let heard = HeardStreams()
            let logs = CapturedLogs()
            let members = try Self.publishers.map { publisher in
                (publisher, Subscriber(endpoint: stack.events[publisher]!, prefixes: [""], logger: logs.logger(publisher),
                                       security: try gatewayKeys.client(of: publisher)))
            }
            let listeners = members.map { publisher, subscriber in
                Task { for await _ in subscriber.events { _ = heard.names.withLock { $0.insert(publisher) } } }
            }
            defer { for listener in listeners { listener.cancel() } }

            // Activity on every stream: a logout (accounts), a friendship (social), moves a friend
            // sees (geo), a helpNow (alerts).
            let alice = try await makeActor(stack, "alice", number: 1)
            let bob = try await makeActor(stack, "bob", number: 2)
            let dan = try await makeActor(stack, "dan", number: 4)
            _ = try await dan.client.call(AccountsV1.AccountsService.logout, AccountsV1.LogoutRequest(), mutation: true)
            try await befriend(alice, bob)
            try await addToCircle(alice, bob)
            _ = try await alice.client.call(AlertsV1.AlertsService.raiseHelpNow, AlertsV1.RaiseHelpNowRequest(message: "plane test"), mutation: true)
            try await eventually("the deployment's own subscriber hears every stream", timeout: .seconds(20)) {
                _ = try? await alice.client.call(GeoV1.GeoService.updateLocation, GeoV1.UpdateLocationRequest(
                    latitude: 33.78, longitude: -118.11, accuracyM: 10, deviceTimeMs: Int64(Date().timeIntervalSince1970 * 1000)))
                return heard.names.withLock { $0 } == Set(Self.publishers)
            }

            // Nothing reached any stranger: no reply, no event. (A negative check: the first waits
            // a second for anything in flight, the others only drain what is queued.)
            for (index, stranger) in (requestStrangers + eventStrangers).enumerated() {
                #expect(try !stranger.received(within: index == 0 ? .seconds(1) : .milliseconds(10)), "\(stranger.what) got an answer")
            }
            for service in Self.services + ["gateway"] {
                let log = (try? String(contentsOfFile: "\(stack.run)/logs/\(service).log", encoding: .utf8)) ?? ""
                if service != "gateway" {
                    #expect(log.contains("refused a connection"), "\(service) logs the refused keys")
                }
                #expect(!log.contains("handler threw"), "\(service) did not fail")
            }

            // Members: each key may do only what the policy gives it.
            let memberCall = { (member: String, service: String) throws -> WireClient in
                let keys = try KeyringFiles.load(at: stack.keyring, member: member)
                var options = ClientOptions(security: try keys.client(of: service))
                options.defaultDeadline = .seconds(3)
                return WireClient(endpoint: stack.endpoints[service]!, options: options, logger: logs.logger("\(member)→\(service)"))
            }
            let mediaToGeo = try memberCall("media", "geo")
            await expectError(.permissionDenied, containing: "only the gateway") {
                _ = try await mediaToGeo.call(GeoV1.GeoService.friendsLocations, GeoV1.FriendsLocationsRequest(),
                                              options: CallOptions(callerUserID: bob.id))
            }
            await expectError(.permissionDenied) {
                _ = try await mediaToGeo.call(GeoV1.GeoService.latestLocation, GeoV1.LatestLocationRequest(userId: alice.id))
            }
            // The edge is a front door like the gateway: client methods with a stamped caller, and
            // ValidateSession; no other internal method.
            let edgeToGeo = try memberCall("edge", "geo")
            let seenByBob = try await edgeToGeo.call(GeoV1.GeoService.friendsLocations, GeoV1.FriendsLocationsRequest(),
                                                     options: CallOptions(callerUserID: bob.id))
            #expect(seenByBob.friends.map(\.userId) == [alice.id])
            await expectError(.permissionDenied) {
                _ = try await edgeToGeo.call(GeoV1.GeoService.latestLocation, GeoV1.LatestLocationRequest(userId: alice.id))
            }
            let edgeToAccounts = try memberCall("edge", "accounts")
            await expectError(.unauthenticated) {
                _ = try await edgeToAccounts.call(AccountsV1.AccountsService.validateSession, AccountsV1.ValidateSessionRequest(sessionToken: "forged"))
            }
            await expectError(.permissionDenied) {
                _ = try await edgeToAccounts.call(AccountsV1.AccountsService.contactDetails, AccountsV1.ContactDetailsRequest(userIds: [alice.id]))
            }
            let launcherToAccounts = try memberCall("launcher", "accounts")
            await expectError(.permissionDenied) {
                _ = try await launcherToAccounts.call(AccountsV1.AccountsService.contactDetails, AccountsV1.ContactDetailsRequest(userIds: [alice.id]))
            }
            #expect(try await launcherToAccounts.ping(service: "accounts").service == "accounts")
            let alertsToSocial = try memberCall("alerts", "social")
            let circle = try await alertsToSocial.call(SocialV1.SocialService.circleOf, SocialV1.CircleOfRequest(ownerUserId: alice.id))
            #expect(circle.members.compactMap(\.user?.userId) == [bob.id], "alerts may read a circle through its internal method")
            await expectError(.permissionDenied) {
                _ = try await alertsToSocial.call(SocialV1.SocialService.showCircle, SocialV1.ShowCircleRequest(), options: CallOptions(callerUserID: alice.id))
            }
            for client in [mediaToGeo, edgeToGeo, edgeToAccounts, launcherToAccounts, alertsToSocial] { await client.close() }
            for (_, subscriber) in members { await subscriber.close() }

            // And the deployment serves its own people as before.
            let friends = try await bob.client.call(GeoV1.GeoService.friendsLocations, GeoV1.FriendsLocationsRequest())
            #expect(friends.friends.map(\.userId) == [alice.id])
        }
    }

    @Test func passwordSpraying_throughTheGateway_isStoppedPerClientAddress() async throws {
        let procs = try ProcessHarness()
        defer { procs.shutdown() }
        let stack = try await LaunchedStack(procs)
        defer { stack.shutdown() }
        try await stack.showingLogsOnFailure {
            let client = stack.client()
            defer { Task { await client.close() } }
            var outcomes: [StatusCode] = []
            var last = ""
            for n in 0..<12 {
                do {
                    _ = try await client.login("sprayed\(n)", password: "Winter2026!")
                    outcomes.append(.ok)
                } catch let error as RPCError {
                    outcomes.append(error.code)
                    last = error.message
                }
            }
            // The default allows ten accounts an hour from one address: the eleventh is refused,
            // and says how long to wait.
            #expect(outcomes == Array(repeating: .unauthenticated, count: 10) + [.resourceExhausted, .resourceExhausted], "\(outcomes)")
            #expect(last.contains("too many accounts") && last.contains("try again in"), "\(last)")
            let log = (try? String(contentsOfFile: "\(stack.run)/logs/accounts.log", encoding: .utf8)) ?? ""
            #expect(log.contains("client=127.0.0.1"), "accounts sees the client's address the gateway stamped")
        }
    }

    @Test func aServiceStartedByHand_refusesToStartWithoutKeysOrAPeersEndpoint_andSaysHow() async throws {
        let procs = try ProcessHarness()
        defer { procs.shutdown() }
        let dir = procs.workDirectory
        let noKeys = try await ProcessHarness.run("frienso-social", ["--data-dir", "\(dir)/data", "--endpoint", "tcp://127.0.0.1:*"],
                                                  environment: ["FRIENSO_ACCOUNTS_ENDPOINT": "tcp://127.0.0.1:1", "FRIENSO_GEO_ENDPOINT": "tcp://127.0.0.1:1"])
        #expect(noKeys.status != 0)
        #expect(noKeys.output.contains("no keyring") && noKeys.output.contains("--keyring"), "\(noKeys.output)")

        let noPeer = try await ProcessHarness.run("frienso-social", ["--data-dir", "\(dir)/data", "--endpoint", "tcp://127.0.0.1:*"],
                                                  environment: ["FRIENSO_KEYRING": procs.keyringFolder, "FRIENSO_ACCOUNTS_ENDPOINT": "tcp://127.0.0.1:1"])
        #expect(noPeer.status != 0)
        #expect(noPeer.output.contains("FRIENSO_GEO_ENDPOINT") && noPeer.output.contains("endpoints.geo"), "\(noPeer.output)")

        // A secret other users may read is refused.
        let loose = "\(dir)/loose-keys"
        try KeyringFiles.ensure(at: loose)
        chmod(KeyringFiles.secretPath(loose, "accounts"), 0o644)
        let looseRun = try await ProcessHarness.run("frienso-accounts", ["--data-dir", "\(dir)/data", "--endpoint", "tcp://127.0.0.1:*"],
                                                    environment: ["FRIENSO_KEYRING": loose])
        #expect(looseRun.status != 0)
        #expect(looseRun.output.contains("chmod 600"), "\(looseRun.output)")

        // Plaintext only when asked for, and said loudly.
        let handle = try procs.start("plain", executable: "frienso-accounts", arguments: [
            "--data-dir", "\(dir)/data", "--endpoint", "tcp://127.0.0.1:*", "--endpoint-file", "\(dir)/plain.endpoint", "--insecure-plaintext"])
        _ = try await endpoint(in: "\(dir)/plain.endpoint")
        let log = try String(contentsOfFile: handle.logPath, encoding: .utf8)
        #expect(log.contains("critical") && log.contains("INSECURE"), "\(log)")
    }

    @Test func keysRotate_newKeysServe_oldKeysAreRefused_dataKept() async throws {
        let procs = try ProcessHarness()
        defer { procs.shutdown() }
        var stack: LaunchedStack? = try await LaunchedStack(procs)
        defer { stack?.shutdown() }
        let first = try #require(stack)
        let keyring = first.keyring
        let before = try KeyringFiles.publicKeys(at: keyring)
        #expect(Set(before.keys) == Set(KeyringFiles.members))
        let oldGateway = try KeyringFiles.load(at: keyring, member: "gateway")
        _ = try await makeActor(first, "carol", number: 3)
        let accounts = first.endpoints["accounts"]!

        // Stop, rotate, start again on the same run folder.
        let status = await procs.terminate(first.launcher.name)
        #expect(status == 0, "\(first.logs())")
        let rotate = try await ProcessHarness.run("frienso-launch", ["keys", "rotate", "--run-dir", first.run])
        #expect(rotate.status == 0, "\(rotate.output)")
        #expect(rotate.output.contains("restart"))
        let after = try KeyringFiles.publicKeys(at: keyring)
        for member in KeyringFiles.members { #expect(after[member] != before[member], "\(member)'s key changed") }
        let mode = try FileManager.default.attributesOfItem(atPath: KeyringFiles.secretPath(keyring, "gateway"))[.posixPermissions] as? Int
        #expect(mode == 0o600)
        let listed = try await ProcessHarness.run("frienso-launch", ["keys", "list", "--run-dir", first.run])
        #expect(listed.output.contains(after["geo"]!) && !listed.output.contains("secret"), "\(listed.output)")

        stack = try await LaunchedStack(procs, reusing: first)
        let second = try #require(stack)
        let login = try await second.client().login("carol", password: "password carol 1")
        #expect(login.account?.profile?.username == "carol", "the data is kept across a rotation")

        // The old gateway key no longer reaches accounts; the new one does.
        var oldOptions = ClientOptions(security: .curve(serverPublicKey: before["accounts"]!, keys: oldGateway.keys))
        oldOptions.defaultDeadline = .seconds(1)
        let old = WireClient(endpoint: accounts, options: oldOptions, logger: Logger(label: "old-key"))
        await expectError(.unavailable) { _ = try await old.ping(service: "accounts") }
        var mixed = ClientOptions(security: .curve(serverPublicKey: after["accounts"]!, keys: oldGateway.keys))
        mixed.defaultDeadline = .seconds(1)
        let stale = WireClient(endpoint: accounts, options: mixed, logger: Logger(label: "stale-key"))
        await expectError(.unavailable) { _ = try await stale.ping(service: "accounts") }
        let fresh = try KeyringFiles.load(at: keyring, member: "gateway")
        let current = WireClient(endpoint: accounts, options: ClientOptions(security: try fresh.client(of: "accounts")), logger: Logger(label: "new-key"))
        #expect(try await current.ping(service: "accounts").service == "accounts")
        for client in [old, stale, current] { await client.close() }
    }
}

/// Which publishers a subscriber heard from.
final class HeardStreams: Sendable {
    let names = Mutex<Set<String>>([])
}
