import CZeroMQ
import Dispatch
import FriensoProto
import FriensoTesting
import Logging
import Testing
@testable import Wire

@Suite("service host", .timeLimit(.minutes(1)))
struct ServiceHostTests {
    func router() -> MethodRouter {
        var router = MethodRouter()
        router.register(echo) { request, _ in CommonV1.PingResponse(service: "test", echo: request.echo) }
        router.register(needsSession) { _, context in CommonV1.PingResponse(service: "caller \(context.callerUserID)") }
        return router
    }

    @Test func typedCall_roundTripsThroughRouter() async throws {
        let logs = CapturedLogs()
        try await withHost(router(), logs: logs) { _, client in
            let reply = try await client.call(echo, CommonV1.PingRequest(echo: [1, 2, 3]))
            #expect(reply.echo == [1, 2, 3])
        }
    }

    @Test func ping_isAnsweredByEveryHost() async throws {
        try await withHost(MethodRouter(), logs: CapturedLogs()) { _, client in
            let pong = try await client.ping(service: "test")
            #expect(pong.service == "test")
        }
    }

    /// Ping is answered on the host's reactor thread as it arrives: no task, and no place among
    /// the requests in flight, so a host whose handlers are all busy still says it is alive (and
    /// a request meanwhile is told so).
    @Test func ping_isAnsweredOnTheReactor_evenWhileEveryHandlerIsBusy() async throws {
        let release = OneShot<Void>()
        let started = OneShot<Void>()
        var router = MethodRouter()
        router.registerSlow(started: started, gate: release, answering: "finished")
        try await withHost(router, logs: CapturedLogs(), options: { $0.maxInFlight = 1 }) { _, client in
            // A deadline well past the test's own steps: the claim is that Ping is answered while
            // this call holds the only place, not how soon the call ends (at the default 5 s, a
            // deploy/test run whose suites all started at once on two cores ran out of it).
            let slowCall = Task { try await client.call(slow, CommonV1.PingRequest(), options: CallOptions(deadline: .seconds(60))) }
            await started.value
            await expectError(.resourceExhausted, containing: "busy") { _ = try await client.call(slow, CommonV1.PingRequest()) }
            var answer = ""
            do { answer = try await client.ping(service: "test").service } catch { answer = "\(error)" }
            release.fulfil(())
            #expect(answer == "test")
            #expect((try? await slowCall.value)?.service == "finished")
        }
    }

    @Test func unknownMethod_getsInvalidArgument_andHostKeepsServing() async throws {
        try await withHost(router(), logs: CapturedLogs()) { _, client in
            let reply = await client.send(Envelope(method: "test.Nope"))
            #expect(reply.status == .invalidArgument)
            #expect(reply.statusMessage.contains("unknown method"))
            _ = try await client.ping(service: "test")
        }
    }

    @Test func authenticatedMethod_withoutCaller_isUnauthenticated() async throws {
        try await withHost(router(), logs: CapturedLogs()) { _, client in
            await #expect(throws: RPCError(.unauthenticated, "test.Private needs a session")) {
                try await client.call(needsSession, CommonV1.PingRequest())
            }
            let ok = try await client.call(needsSession, CommonV1.PingRequest(), options: CallOptions(callerUserID: 42))
            #expect(ok.service == "caller 42")
        }
    }

    @Test func malformedPayload_getsInvalidArgument() async throws {
        try await withHost(router(), logs: CapturedLogs()) { _, client in
            let reply = await client.send(Envelope(method: "test.Echo", payload: [0xFF, 0xFF, 0xFF]))
            #expect(reply.status == .invalidArgument)
        }
    }

    @Test func malformedFrames_getErrorRepliesOrAreDropped_andHostKeepsServing() async throws {
        let logs = CapturedLogs()
        try await withHost(router(), logs: logs) { host, client in
            let endpoint = try await host.boundEndpoint()
            let raw = try RawPeer(.dealer, connect: endpoint)
            // Not an envelope at all.
            try raw.send([[0xFF, 0x00, 0x13, 0x37, 0x99]])
            let garbage = try raw.receiveEnvelope()
            #expect(garbage?.status == .invalidArgument)
            // An envelope from a future protocol version.
            try raw.send([Envelope(version: 99, kind: .request, requestId: 5, method: "test.Echo").serializedBytes()])
            let future = try raw.receiveEnvelope()
            #expect(future?.status == .invalidArgument)
            #expect(future?.requestId == 5)
            // Too many frames: no way to answer, dropped and counted.
            try raw.send([[1], [2], [3], [4]])
            // Random frames of random sizes.
            for size in [0, 1, 2, 7, 64, 513] {
                try raw.send([(0..<size).map { _ in UInt8.random(in: 0...255) }])
            }
            try await eventually("the host counted the bad frames") { host.counters.malformed.load(ordering: .relaxed) >= 3 }
            // The host still serves.
            let reply = try await client.call(echo, CommonV1.PingRequest(echo: [7]))
            #expect(reply.echo == [7])
            #expect(host.counters.dropped.load(ordering: .relaxed) >= 1)
        }
    }

    @Test func heartbeat_isAnsweredWithHeartbeat() async throws {
        try await withHost(router(), logs: CapturedLogs()) { host, _ in
            let raw = try RawPeer(.dealer, connect: try await host.boundEndpoint())
            try raw.send([Envelope(version: 1, kind: .heartbeat, requestId: 9).serializedBytes()])
            let beat = try raw.receiveEnvelope()
            #expect(beat?.kind == .heartbeat)
            #expect(beat?.requestId == 9)
        }
    }

    /// A goodbye the host never sent (a peer's mistake, or an old one's answer) changes nothing
    /// and gets no reply; other kinds a host does not take are refused, naming what it takes.
    @Test func unsolicitedGoodbye_isIgnored_andAnEventIsRefused() async throws {
        try await withHost(router(), logs: CapturedLogs()) { host, client in
            let raw = try RawPeer(.dealer, connect: try await host.boundEndpoint())
            try raw.socket.set(ZMQ_RCVTIMEO, 300)
            try raw.send([Envelope(version: 1, kind: .goodbye, requestId: 42).serializedBytes()])
            #expect(try raw.receiveEnvelope() == nil, "a goodbye is not answered")
            try raw.send([Envelope(version: 1, kind: .event, requestId: 43, method: "test.Echo").serializedBytes()])
            let refused = try raw.receiveEnvelope()
            #expect(refused?.status == .invalidArgument && refused?.requestId == 43)
            #expect(refused?.statusMessage.contains("KIND_GOODBYE") == true, "\(refused?.statusMessage ?? "")")
            #expect(host.counters.malformed.load(ordering: .relaxed) == 1, "only the event counts as malformed")
            #expect(try await client.call(echo, CommonV1.PingRequest(echo: [5])).echo == [5])
        }
    }

    /// A peer answered while the host drains that never answers its goodbye (a raw DEALER here)
    /// holds the close for `farewellTimeout`, not longer, and the host says so in its log.
    @Test func silentPeer_holdsTheCloseForTheFarewellTimeoutOnly() async throws {
        var router = MethodRouter()
        let started = OneShot<Void>(), release = OneShot<Void>()
        router.registerSlow(started: started, gate: release, answering: "finished")
        let logs = CapturedLogs()
        var options = HostOptions(name: "test", endpoint: "tcp://127.0.0.1:*")
        options.farewellTimeout = .milliseconds(300)
        let host = ServiceHost(options: options, handler: router, logger: logs.logger("host"))
        let group = ServiceGroup(configuration: .init(services: [.init(service: host)], logger: logs.logger("group")))
        try await withThrowingTaskGroup(of: Void.self) { tasks in
            tasks.addTask { try await group.run() }
            let client = WireClient(endpoint: try await host.boundEndpoint(), options: .patient, logger: logs.logger("client"))
            let reply = Task { try await client.call(slow, CommonV1.PingRequest(), options: CallOptions(deadline: .seconds(20))) }
            await started.value
            await group.triggerGracefulShutdown()
            // The raw peer is answered while the host drains (its Pings, until the host says it is
            // draining: a bounded retry), and never reads again.
            let raw = try RawPeer(.dealer, connect: try await host.boundEndpoint())
            try raw.socket.set(ZMQ_RCVTIMEO, 5_000)
            let until = ContinuousClock.now.advanced(by: .seconds(10))
            var requestID: UInt64 = 0, status: StatusCode?
            repeat {
                requestID += 1
                try raw.send([Envelope.request(method: "test.Ping", payload: [], requestID: requestID).serializedBytes()])
                status = try raw.receiveEnvelope()?.status
            } while status != .unavailable && ContinuousClock.now < until
            try #require(status == .unavailable, "the host never said it was draining")
            release.fulfil(())
            #expect(try await reply.value.service == "finished")
            try await tasks.waitForAll() // returns once the host closed: after the timeout, not never
            #expect(logs.contains("goodbyes unanswered"), "\(logs.dump())")
            #expect(host.counters.goodbyes.load(ordering: .relaxed) >= 2, "both peers were asked")
            await client.close()
            _ = raw
        }
    }

    @Test func reqSocketPeers_withDelimiterFrame_areServed() async throws {
        try await withHost(router(), logs: CapturedLogs()) { host, _ in
            let raw = try RawPeer(.req, connect: try await host.boundEndpoint())
            try raw.send([Envelope.request(method: "test.Ping", payload: [], requestID: 3).serializedBytes()])
            let reply = try raw.receiveEnvelope()
            #expect(reply?.status == .ok)
            #expect(reply?.requestId == 3)
        }
    }

    @Test func oversizedFrame_isRefused_andHostKeepsServing() async throws {
        try await withHost(router(), logs: CapturedLogs(), options: { $0.maxMessageSize = 64 << 10 }) { host, client in
            let raw = try RawPeer(.dealer, connect: try await host.boundEndpoint())
            try raw.socket.set(ZMQ_RCVTIMEO, 300)
            try raw.send([Envelope.request(method: "test.Echo", payload: CommonV1.PingRequest(echo: Array(repeating: 1, count: 200 << 10)).serializedBytes()).serializedBytes()])
            #expect(try raw.receiveEnvelope() == nil, "an oversized frame must not be answered")
            let reply = try await client.call(echo, CommonV1.PingRequest(echo: [1]))
            #expect(reply.echo == [1])
        }
    }

    @Test func handlerError_isMappedToItsStatus_andUnexpectedErrorsToInternal() async throws {
        struct Boom: Error {}
        var router = MethodRouter()
        router.register(echo) { request, _ in
            if request.echo == [1] { throw RPCError.notFound("no such thing") }
            throw Boom()
        }
        let logs = CapturedLogs()
        try await withHost(router, logs: logs) { _, client in
            await #expect(throws: RPCError(.notFound, "no such thing")) { try await client.call(echo, CommonV1.PingRequest(echo: [1])) }
            await #expect(throws: RPCError(.internal, "internal error in test.Echo")) { try await client.call(echo, CommonV1.PingRequest(echo: [2])) }
        }
        #expect(logs.all.contains { $0.contains("handler threw") && $0.contains("request-id=") && $0.contains("method=test.Echo") },
                "log lines carry the request's id and method: \(logs.dump())")
    }

    @Test("handlers run on the host's reactor by default, and on the global pool when asked",
          arguments: [HandlerExecution.reactor, .pool])
    func handlerExecution(_ mode: HandlerExecution) async throws {
        let reactor = Reactor(name: "test-reactor")
        let onReactor = Counter()
        var router = MethodRouter()
        router.register(echo) { _, _ in
            if reactor.isCurrent { _ = onReactor.increment() }
            try await Task.sleep(for: .milliseconds(1)) // and after a suspension
            if reactor.isCurrent { _ = onReactor.increment() }
            return CommonV1.PingResponse()
        }
        let logs = CapturedLogs()
        var options = HostOptions(name: "test", endpoint: "tcp://127.0.0.1:*")
        options.handlerExecution = mode
        let host = ServiceHost(options: options, handler: router, logger: logs.logger("host"), reactor: reactor)
        try await withRunningServices([host], logger: logs.logger("group")) {
            let client = WireClient(endpoint: try await host.boundEndpoint(), options: .patient, logger: logs.logger("client"))
            _ = try await client.call(echo, CommonV1.PingRequest())
            await client.close()
        }
        #expect(onReactor.count == (mode == .reactor ? 2 : 0))
        reactor.stop()
    }

    @Test func gracefulShutdown_finishesRequestInFlight() async throws {
        let release = OneShot<Void>()
        let started = OneShot<Void>()
        var router = MethodRouter()
        router.registerSlow(started: started, gate: release, answering: "finished")
        let logs = CapturedLogs()
        let host = ServiceHost(options: HostOptions(name: "test", endpoint: "tcp://127.0.0.1:*"), handler: router, logger: logs.logger("host"))
        let group = ServiceGroup(configuration: .init(services: [.init(service: host)], logger: logs.logger("group")))
        try await withThrowingTaskGroup(of: Void.self) { tasks in
            tasks.addTask { try await group.run() }
            let client = WireClient(endpoint: try await host.boundEndpoint(), options: .patient, logger: logs.logger("client"))
            // A deadline well past the test's own steps: the claim is that the drain lets the
            // request finish, not how soon (at the default 5 s, a CI run whose suites all started
            // at once on a loaded host ran out of it: DEADLINE_EXCEEDED after 16 s of the run).
            let reply = Task { try await client.call(slow, CommonV1.PingRequest(), options: CallOptions(deadline: .seconds(60))) }
            await started.value
            await group.triggerGracefulShutdown()
            release.fulfil(())
            let finished = try await reply.value
            #expect(finished.service == "finished")
            try await tasks.waitForAll()
            await client.close()
        }
    }

    /// A reply sent while the host drains reaches a client whose thread is too busy to read it
    /// for a while: the host asks (`KIND_GOODBYE`) and closes once the client answered, after
    /// reading everything before it. With no grace at all after the last reply (`closeGrace`
    /// zero), a host that closed on a timer dropped the connection with the reply unread, and
    /// the client's DEALER (`ZMQ_IMMEDIATE`) threw it away (this test, before the goodbye).
    /// The other client, gone before the goodbyes, is asked too and must not hold the close.
    @Test func gracefulShutdown_waitsForABusyClientToReadItsLastReply() async throws {
        let release = OneShot<Void>(), started = OneShot<Void>()
        var router = MethodRouter()
        router.registerSlow(started: started, gate: release, answering: "finished")
        let logs = CapturedLogs()
        var options = HostOptions(name: "test", endpoint: "tcp://127.0.0.1:*")
        options.closeGrace = .zero
        options.farewellTimeout = .seconds(40)
        let host = ServiceHost(options: options, handler: router, logger: logs.logger("host"))
        let group = ServiceGroup(configuration: .init(services: [.init(service: host)], logger: logs.logger("group")))
        let clientReactor = Reactor(name: "busy-client")
        let closed = OneShot<Void>()
        try await withThrowingTaskGroup(of: Void.self) { tasks in
            tasks.addTask {
                try await group.run()
                closed.fulfil(())
            }
            let client = WireClient(endpoint: try await host.boundEndpoint(), options: .patient, logger: logs.logger("client"), reactor: clientReactor)
            let reply = Task { try await client.call(slow, CommonV1.PingRequest(), options: CallOptions(deadline: .seconds(20))) }
            await started.value
            await group.triggerGracefulShutdown()
            // Until the host says it is draining (a bounded retry): the goodbye is for replies
            // sent from then on (earlier ones have `closeGrace`, zero here).
            let other = WireClient(endpoint: try await host.boundEndpoint(), options: .patient, logger: logs.logger("other"))
            try await eventually("the host draining") {
                await other.send(Envelope(method: "test.Ping"), deadline: .seconds(5)).status == .unavailable
            }
            await other.close()
            // Fault injection: the client's thread is held, as a starved process's is, from
            // before the reply goes out until the host has asked whether it was read.
            let busy = DispatchSemaphore(value: 0), held = OneShot<Void>()
            clientReactor.execute {
                held.fulfil(())
                busy.wait()
            }
            await held.value
            release.fulfil(())
            // Until the host has asked, or closed without asking (the reply is then lost).
            do {
                try await eventually("the stopping host's goodbye or its close", timeout: .seconds(30)) {
                    host.counters.goodbyes.load(ordering: .relaxed) >= 1 || closed.current != nil
                }
            } catch {
                busy.signal()
                throw error
            }
            busy.signal()
            let finished = await reply.result
            #expect((try? finished.get())?.service == "finished", "the reply was lost: \(finished)\n\(logs.dump())")
            try await tasks.waitForAll()
            #expect(!logs.contains("goodbyes unanswered"), "a peer that left held the close: \(logs.dump())")
            await client.close()
        }
        clientReactor.stop()
    }
}

import ServiceLifecycle

/// A domain refusal that knows its status (as the services' store refusals do).
private enum ShelfRefusal: Error, RPCErrorConvertible {
    case full(Int)
    var rpcError: RPCError { .failedPrecondition("the shelf is full (\(self.count) books)") }
    var count: Int { if case .full(let n) = self { n } else { 0 } }
}

@Suite("method router: refusals that name their status")
struct RefusalMappingTests {
    @Test func aThrownRefusal_isAnsweredWithTheStatusItNames_andAnythingElseIsInternal() async throws {
        var router = MethodRouter()
        router.register(echo) { request, _ in
            if request.echo == [1] { throw ShelfRefusal.full(3) }
            struct Unexpected: Error {}
            throw Unexpected()
        }
        try await withHost(router, logs: CapturedLogs()) { _, client in
            await expectError(.failedPrecondition, containing: "full (3 books)") { _ = try await client.call(echo, CommonV1.PingRequest(echo: [1])) }
            await expectError(.internal) { _ = try await client.call(echo, CommonV1.PingRequest(echo: [3])) }
        }
    }
}
