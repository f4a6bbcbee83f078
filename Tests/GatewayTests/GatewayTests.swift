import Accounts
import FriensoClient
import FriensoProto
import FriensoTesting
import Gateway
import Logging
import Synchronization
import Testing
import Wire

@Suite("gateway", .timeLimit(.minutes(2)))
struct GatewayTests {
    @Test func authenticatedMethods_withoutSession_areUnauthenticated() async throws {
        try await withStack { stack in
            let anonymous = stack.client()
            await expectError(.unauthenticated, containing: "log in") { _ = try await anonymous.call(API.whoAmI, AccountsV1.WhoAmIRequest()) }
            let forged = stack.client(token: "fs1_" + String(repeating: "B", count: 43))
            await expectError(.unauthenticated) { _ = try await forged.call(API.whoAmI, AccountsV1.WhoAmIRequest()) }
        }
    }

    @Test("internal methods cannot be reached from the client socket, even with a session",
          arguments: ProtoIndex.methods.filter { $0.access == .internal }.map(\.fullName))
    func internalMethods_areUnreachable(_ method: String) async throws {
        try await withStack { stack in
            let alice = try await stack.user("alice", phone: "+15625550001")
            let wire = WireClient(endpoint: stack.endpoint, options: .patient, logger: stack.logs.logger("raw"))
            let reply = await wire.send(Envelope(method: method, sessionToken: alice.token, payload: []))
            #expect(reply.status == .permissionDenied, "\(reply.statusMessage)")
            #expect(reply.statusMessage.contains("internal"))
            await wire.close()
        }
    }

    @Test func unknownMethods_areInvalidArgument() async throws {
        try await withStack { stack in
            let wire = WireClient(endpoint: stack.endpoint, options: .patient, logger: stack.logs.logger("raw"))
            for method in ["", "accounts", "accounts.DropTables", "nosuch.Ping.Extra", "gateway.Nope"] {
                let reply = await wire.send(Envelope(method: method))
                #expect(reply.status == .invalidArgument, "\(method): \(reply.statusMessage)")
            }
            await wire.close()
        }
    }

    @Test func callerID_isStampedByTheGateway_notTakenFromTheClient() async throws {
        try await withStack { stack in
            let victim = try await stack.user("victim", phone: "+15625550002")
            let attacker = try await stack.user("attacker", phone: "+15625550003")
            let victimID = try await victim.call(API.whoAmI, AccountsV1.WhoAmIRequest()).account?.profile?.userId ?? 0
            let wire = WireClient(endpoint: stack.endpoint, options: .patient, logger: stack.logs.logger("raw"))
            // Claims to be the victim, without and with the attacker's own session.
            let noSession = await wire.send(Envelope(method: API.whoAmI.fullName, callerUserId: victimID))
            #expect(noSession.status == .unauthenticated)
            let spoofed = await wire.send(Envelope(method: API.whoAmI.fullName, callerUserId: victimID, sessionToken: attacker.token))
            let who = try spoofed.decodeReply(AccountsV1.WhoAmIResponse.self)
            #expect(who.account?.profile?.username == "attacker")
            await wire.close()
        }
    }

    @Test func rateLimit_perSession_givesResourceExhausted() async throws {
        try await withStack(configure: { $0.requestsPerSecond = 0.001; $0.burst = 3 }) { stack in
            let client = stack.client()
            // Before login the limit is per client address: register + login use 2 of 3.
            _ = try await client.call(API.register, AccountsV1.RegisterRequest(
                username: "hasty", email: "hasty@example.org", phone: "+15625550004", password: "password hasty", firstName: "F", lastName: "L"))
            _ = try await client.login("hasty", password: "password hasty")
            // The session has its own bucket of 3.
            for _ in 0..<3 { _ = try await client.call(API.whoAmI, AccountsV1.WhoAmIRequest()) }
            await expectError(.resourceExhausted, containing: "rate limit") { _ = try await client.call(API.whoAmI, AccountsV1.WhoAmIRequest()) }
            // Both paths keep the same buckets: register and login (no session) were forwarded on
            // the gateway's reactor thread, the first WhoAmI resolved the session on a task, the
            // next two and the refused one went on the reactor thread again.
            #expect(stack.gateway.counters.onReactor.load(ordering: .relaxed) == 5)
        }
    }

    @Test func logout_invalidatesTheCachedSession_atOnce() async throws {
        try await withStack(configure: { $0.sessionCacheTTL = .seconds(600) }) { stack in
            let client = try await stack.user("bye", phone: "+15625550005")
            _ = try await client.call(API.whoAmI, AccountsV1.WhoAmIRequest()) // cached now
            _ = try await client.call(API.logout, AccountsV1.LogoutRequest())
            await expectError(.unauthenticated) { _ = try await client.call(API.whoAmI, AccountsV1.WhoAmIRequest()) }
        }
    }

    @Test func passwordChange_locksOutOtherSessions_atOnce() async throws {
        try await withStack(configure: { $0.sessionCacheTTL = .seconds(600) }) { stack in
            let phone = try await stack.user("twice", phone: "+15625550006")
            let laptop = stack.client()
            _ = try await laptop.login("twice", password: "password twice")
            _ = try await laptop.call(API.whoAmI, AccountsV1.WhoAmIRequest()) // cached now
            _ = try await phone.call(API.changePassword, AccountsV1.ChangePasswordRequest(currentPassword: "password twice", newPassword: "password thrice"))
            await expectError(.unauthenticated) { _ = try await laptop.call(API.whoAmI, AccountsV1.WhoAmIRequest()) }
            _ = try await phone.call(API.whoAmI, AccountsV1.WhoAmIRequest())
        }
    }

    @Test func ping_eachServiceThroughTheGateway() async throws {
        try await withStack { stack in
            let client = stack.client()
            let gatewayPong = try await client.ping("gateway")
            let accountsPong = try await client.ping("accounts")
            #expect(gatewayPong.service == "gateway")
            #expect(accountsPong.service == "accounts")
            await expectError(.unavailable, containing: "not deployed") { _ = try await client.ping("social") }
        }
    }

    @Test func serviceDown_givesUnavailable_withinTheDeadline() async throws {
        // Point the gateway at a port where nothing listens.
        let dead = try DeadPort()
        try await withStack(configure: { $0.services["accounts"] = dead.endpoint }) { stack in
            let client = stack.client()
            await expectError(.unavailable) {
                // The gateway declares accounts down after 3 silent heartbeats (1.5 s) and answers at once.
                _ = try await client.call(API.login, AccountsV1.LoginRequest(login: "x", password: "y"), deadline: .seconds(3))
            }
            // The gateway itself still answers.
            let pong = try await client.ping("gateway")
            #expect(pong.service == "gateway")
        }
    }

    @Test("a public method with a session: anonymous only when the session is invalid, never because accounts could not say")
    func publicMethodWithASession_whenAccountsCannotSay_isUnavailable_notAnonymous() async throws {
        let validation = Mutex<RPCError>(.unavailable("accounts is restarting (test)"))
        let logins = Mutex<[UInt64]>([])
        var fake = MethodRouter()
        fake.register(API.validateSession) { _, _ in throw validation.withLock { $0 } }
        fake.register(API.login) { _, context in
            logins.withLock { $0.append(context.callerUserID) }
            return AccountsV1.LoginResponse()
        }
        try await withStack(accountsHandler: fake) { stack in
            let client = stack.client(token: "fs1_" + String(repeating: "D", count: 43))
            await expectError(.unavailable) { _ = try await client.call(API.login, AccountsV1.LoginRequest(login: "x", password: "y")) }
            #expect(logins.withLock { $0 }.isEmpty, "not forwarded without its caller")
            validation.withLock { $0 = .unauthenticated("unknown session: log in again") }
            _ = try await client.call(API.login, AccountsV1.LoginRequest(login: "x", password: "y"))
            #expect(logins.withLock { $0 } == [0], "a stale token: on anonymously")
        }
    }

    @Test func slowRequest_doesNotBlockOthers() async throws {
        let gate = OneShot<Void>()
        let slowStarted = OneShot<Void>()
        var fake = MethodRouter()
        fake.register(API.validateSession) { _, _ in AccountsV1.ValidateSessionResponse(userId: 1, expiresAtMs: .max, sessionId: [1]) }
        fake.register(API.getProfile) { _, _ in
            slowStarted.fulfil(())
            await gate.value
            return AccountsV1.GetProfileResponse(profile: AccountsV1.Profile(username: "slow"))
        }
        fake.register(API.whoAmI) { _, _ in AccountsV1.WhoAmIResponse(account: AccountsV1.Account(email: "fast")) }
        try await withStack(accountsHandler: fake) { stack in
            let client = stack.client(token: "fs1_" + String(repeating: "C", count: 43))
            let slow = Task { try await client.call(API.getProfile, AccountsV1.GetProfileRequest()) }
            await slowStarted.value
            // While the slow call is held open, a fast one goes through.
            let fast = try await client.call(API.whoAmI, AccountsV1.WhoAmIRequest())
            #expect(fast.account?.email == "fast")
            gate.fulfil(())
            let slowReply = try await slow.value
            #expect(slowReply.profile?.username == "slow")
        }
    }

    @Test func events_areRelayedToTheSubscribedUser_only() async throws {
        let publisher = Publisher(name: "geo", endpoint: "tcp://127.0.0.1:*", logger: CapturedLogs().logger("pub"))
        try await withStack(extraServices: [publisher], configure: { $0.eventSources = ["geo": try await publisher.boundEndpoint()] }) { stack in
            let alice = try await stack.user("eve_a", phone: "+15625550007")
            let bob = try await stack.user("eve_b", phone: "+15625550008")
            let aliceID = try await alice.call(API.whoAmI, AccountsV1.WhoAmIRequest()).account?.profile?.userId ?? 0
            let bobID = try await bob.call(API.whoAmI, AccountsV1.WhoAmIRequest()).account?.profile?.userId ?? 0
            let events = try await alice.events()
            try await eventually("the gateway knows the subscription") { stack.gateway.subscriptionCount == 1 }
            var iterator = events.makeAsyncIterator()
            // PUB/SUB joins asynchronously: publish until the first event reaches Alice.
            let publishing = Task {
                while !Task.isCancelled {
                    publisher.publish(topic: ViewerTopic.of(bobID), method: "geo.FriendNearby", payload: [2])
                    publisher.publish(topic: ViewerTopic.of(aliceID), method: "geo.FriendNearby", payload: [1])
                    try? await Task.sleep(for: .milliseconds(20))
                }
            }
            let first = await iterator.next()
            publishing.cancel()
            #expect(first?.kind == .event)
            #expect(first?.method == "geo.FriendNearby")
            #expect(first?.payload == [1], "Alice only gets her own events")
            #expect(stack.gateway.filteredUsers == 1, "the publisher sends this gateway Alice's events only")
            _ = try await alice.call(CommonMethods.unsubscribe, CommonV1.UnsubscribeRequest())
            #expect(stack.gateway.subscriptionCount == 0 && stack.gateway.filteredUsers == 0)
        }
    }

    @Test func curve_refusesPlainAndWrongKeyClients() async throws {
        let server = try CurveKeys.generate()
        let stranger = try CurveKeys.generate()
        try await withStack(configure: { $0.curveSecretKey = server.secretKey }) { stack in
            func client(_ key: String?) -> WireClient {
                var options = ClientOptions.patient
                options.security = key.map { .curve(serverPublicKey: $0, keys: nil) } ?? .plaintext
                options.failFastWhenPeerDown = false
                return WireClient(endpoint: stack.endpoint, options: options, logger: stack.logs.logger("curve"))
            }
            let trusted = client(server.publicKey)
            let pong = try await trusted.ping(service: "gateway")
            #expect(pong.service == "gateway")
            for refused in [client(nil), client(stranger.publicKey)] {
                await expectError(.unavailable) { _ = try await refused.ping(service: "gateway", deadline: .milliseconds(700)) }
                await refused.close()
            }
            await trusted.close()
        }
    }
}

@Suite("gateway: oversize requests", .timeLimit(.minutes(1)))
struct GatewayOversizeTests {
    @Test func aRequestLargerThanTheServiceAccepts_isRefusedAtOnce_andOtherClientsKeepTheirConnection() async throws {
        try await withStack { stack in
            let big = stack.client(), other = stack.client()
            let huge = AccountsV1.RegisterRequest(username: "big", email: "b@example.org", phone: "+15625550000",
                                                  password: String(repeating: "x", count: 5 << 20), firstName: "B", lastName: "B")
            // Another client's calls run beside the oversize one, on the gateway's one connection to accounts.
            async let others: [Bool] = withThrowingTaskGroup(of: Bool.self) { group in
                for _ in 0..<20 { group.addTask { (try? await other.ping("accounts", deadline: .seconds(2))) != nil } }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            // INVALID_ARGUMENT (not DEADLINE_EXCEEDED) is the gateway's own answer: the request was never forwarded.
            await expectError(.invalidArgument, containing: "accepts at most 4194304 bytes") {
                _ = try await big.call(API.register, huge, deadline: .seconds(5))
            }
            let results = try await others
            #expect(results.allSatisfy { $0 }, "no other client's request was lost with a dropped connection")
            #expect(try await other.ping("accounts").service == "accounts")
        }
    }
}

@Suite("gateway: session revocation reaches every gateway", .timeLimit(.minutes(1)))
struct GatewayRevocationTests {
    /// Several instances of accounts relay one revocation stream, so a gateway gets each event
    /// once per instance: a copy it already applied is dropped, not taken for a gap (which drops
    /// every cached session; the first version did that on every copy).
    @Test func aRevocationItAlreadyHas_isDropped_notTakenForAGap() async throws {
        let logs = CapturedLogs()
        let dir = try TemporaryDirectory("frienso-gateway-copies")
        defer { dir.remove() }
        let config = cheapAccountsConfig()
        let accounts = try AccountsService(directory: dir.path, config: config)
            .makeHost(options: HostOptions(name: "accounts", endpoint: "tcp://127.0.0.1:*"), logger: logs.logger("accounts"))
        // The revocation stream, numbered as a database's event log numbers it.
        let relay = Publisher(name: "accounts", endpoint: "tcp://127.0.0.1:*", logger: logs.logger("relay"))
        try await withRunningServices([relay, accounts], logger: logs.logger("group")) {
            var gatewayConfig = GatewayConfig(endpoint: "tcp://127.0.0.1:*", services: ["accounts": try await accounts.boundEndpoint()])
            gatewayConfig.sessionCacheTTL = .seconds(60)
            gatewayConfig.sessionEvents = try await relay.boundEndpoint()
            let gateway = Gateway(config: gatewayConfig, logger: logs.logger("gateway"))
            try await withRunningServices([gateway], logger: logs.logger("gateways")) {
                let endpoint = try await gateway.boundEndpoint()
                var made: [FriensoClient] = []
                var ids: [UInt64] = []
                for name in ["rita", "sam"] {
                    let client = FriensoClient(gateway: endpoint, options: .patient, logger: logs.logger(name))
                    let account = try await client.call(API.register, AccountsV1.RegisterRequest(
                        username: name, email: "\(name)@example.org", phone: name == "rita" ? "+15625551201" : "+15625551202",
                        password: "password \(name)", firstName: "R", lastName: "L"))
                    ids.append(account.account?.profile?.userId ?? 0)
                    _ = try await client.login(name, password: "password \(name)")
                    made.append(client)
                }
                let clients = made
                @Sendable func revoke(_ user: UInt64, _ sequence: UInt64) {
                    relay.relay(topic: AccountsService.sessionsStream, method: AccountsService.sessionsRevoked,
                                payload: AccountsV1.SessionsRevoked(userId: user).serializedBytes(), epoch: 77, sequence: sequence)
                }
                // The gateway's first event (whenever its socket joins) starts its numbering, and
                // drops its cache (what came before is unknown): sent until it has arrived.
                _ = try await clients[0].call(API.whoAmI, AccountsV1.WhoAmIRequest())
                try await eventually("the gateway follows the stream") {
                    revoke(999_999, 1)
                    return gateway.cachedSessions == 0
                }
                for client in clients { _ = try await client.call(API.whoAmI, AccountsV1.WhoAmIRequest()) }
                #expect(gateway.cachedSessions == 2)
                revoke(999_999, 1) // a copy from a second instance
                revoke(ids[1], 2) // sam's sessions
                try await eventually("sam's session is dropped") { gateway.cachedSessions < 2 }
                #expect(gateway.cachedSessions == 1, "the copy dropped every cached session")
                for client in clients { await client.close() }
            }
        }
    }

    @Test func logoutOrPasswordChange_throughOneGateway_revokesTheSessionAtAnotherAtOnce() async throws {
        let logs = CapturedLogs()
        let dir = try TemporaryDirectory("frienso-gateway-revocation")
        defer { dir.remove() }
        let config = cheapAccountsConfig()
        let publisher = Publisher(name: "accounts", endpoint: "tcp://127.0.0.1:*", logger: logs.logger("accounts-events"))
        let accounts = try AccountsService(directory: dir.path, config: config, events: publisher)
            .makeHost(options: HostOptions(name: "accounts", endpoint: "tcp://127.0.0.1:*"), logger: logs.logger("accounts"))
        try await withRunningServices([publisher, accounts], logger: logs.logger("group")) {
            let services = ["accounts": try await accounts.boundEndpoint()]
            // Three gateways that trust a resolved session for a minute: two follow accounts'
            // revocations, the third (the control) does not.
            func gateway(following: Bool) async throws -> Gateway {
                var gatewayConfig = GatewayConfig(endpoint: "tcp://127.0.0.1:*", services: services)
                gatewayConfig.sessionCacheTTL = .seconds(60)
                if following { gatewayConfig.sessionEvents = try await publisher.boundEndpoint() }
                return Gateway(config: gatewayConfig, logger: logs.logger("gateway"))
            }
            let a = try await gateway(following: true), b = try await gateway(following: true), control = try await gateway(following: false)
            try await withRunningServices([a, b, control], logger: logs.logger("gateways")) {
                let viaA = FriensoClient(gateway: try await a.boundEndpoint(), options: .patient, logger: logs.logger("via-a"))
                _ = try await viaA.call(API.register, AccountsV1.RegisterRequest(
                    username: "rita", email: "rita@example.org", phone: "+15625551111", password: "password rita", firstName: "R", lastName: "L"))
                for round in 0..<2 {
                    let login = try await viaA.login("rita", password: "password rita")
                    let viaB = FriensoClient(gateway: try await b.boundEndpoint(), token: login.sessionToken, options: .patient, logger: logs.logger("via-b"))
                    let viaControl = FriensoClient(gateway: try await control.boundEndpoint(), token: login.sessionToken, options: .patient, logger: logs.logger("via-c"))
                    _ = try await viaB.call(API.whoAmI, AccountsV1.WhoAmIRequest())
                    _ = try await viaControl.call(API.whoAmI, AccountsV1.WhoAmIRequest())
                    #expect(b.cachedSessions >= 1 && control.cachedSessions >= 1)
                    if round == 0 {
                        _ = try await viaA.call(API.logout, AccountsV1.LogoutRequest(), mutation: true)
                    } else {
                        // A password change from another session revokes this one.
                        let other = FriensoClient(gateway: try await a.boundEndpoint(), options: .patient, logger: logs.logger("other"))
                        _ = try await other.login("rita", password: "password rita")
                        _ = try await other.call(API.changePassword, AccountsV1.ChangePasswordRequest(
                            currentPassword: "password rita", newPassword: "password rita 2"), mutation: true)
                    }
                    try await eventually("gateway B forgets the revoked session") { b.cachedSessions == 0 }
                    await expectError(.unauthenticated) { _ = try await viaB.call(API.whoAmI, AccountsV1.WhoAmIRequest()) }
                    // Without the event, the control gateway's cache still holds it: the stale window the event closes.
                    #expect(control.cachedSessions >= 1)
                }
            }
        }
    }
}
