import FriensoProto
import FriensoTesting
import Logging
import ServiceLifecycle
import Testing
@testable import Wire

/// A front host that forwards to a backend on its own reactor thread, as the gateway does:
/// "test.Declined" and anything it cannot send now go to `handle`, on a task. It relays the
/// backend's replies as the gateway does (`relayOnReactor`), or with `relays: false` makes each
/// reply from the decoded one (`sendOnReactor`).
struct ForwardOnReactor: ReactorRequestHandler {
    let backend: WireClient
    let reactor: Reactor
    var relays = true
    let offTheReactor = Counter()

    func handle(_ request: IncomingRequest, logger: Logger) async -> Envelope {
        _ = offTheReactor.increment()
        return await backend.send(Envelope(method: request.envelope.method, payload: request.envelope.payload),
                                  deadline: request.downstreamBudget)
    }

    func take(_ request: IncomingRequest, reply: ReactorReply) -> Bool {
        #expect(reactor.isCurrent, "offered on the host's reactor thread")
        guard request.envelope.method != "test.Declined", backend.canSendOnReactor else { return false }
        if relays {
            return backend.relayOnReactor(Envelope(method: request.envelope.method, payload: request.envelope.payload),
                                          deadline: request.downstreamBudget) { forwarded in
                #expect(reactor.isCurrent, "the relayed reply arrives on the same thread")
                reply.relay(forwarded)
            }
        }
        return backend.sendOnReactor(Envelope(method: request.envelope.method, payload: request.envelope.payload),
                                     deadline: request.downstreamBudget) { forwarded in
            #expect(reactor.isCurrent, "the forwarded reply arrives on the same thread")
            reply(request.envelope.reply(status: forwarded.status, message: forwarded.statusMessage, payload: forwarded.payload))
        }
    }
}

@Suite("service host: requests taken on the reactor thread", .timeLimit(.minutes(1)))
struct ReactorHandlerTests {
    let declined = RPCMethod<CommonV1.PingRequest, CommonV1.PingResponse>(service: "test", name: "Declined", access: .public)
    /// Refuses with the request's echo as its message (FAILED_PRECONDITION).
    let refuse = RPCMethod<CommonV1.PingRequest, CommonV1.PingResponse>(service: "test", name: "Refuse", access: .public)

    /// The backend (echo, a slow method held by `gate`, and the declined one) and the front host
    /// forwarding to it on its reactor; `body` gets the front's host, handler and a client.
    func withFront(gate: OneShot<Void> = OneShot(), started: OneShot<Void> = OneShot(), relays: Bool = true,
                   _ body: @Sendable (ServiceHost, ForwardOnReactor, WireClient, ServiceGroup) async throws -> Void) async throws {
        var backendRouter = MethodRouter()
        backendRouter.register(echo) { request, _ in CommonV1.PingResponse(service: "backend", echo: request.echo) }
        backendRouter.register(declined) { _, _ in CommonV1.PingResponse(service: "backend") }
        backendRouter.register(refuse) { request, _ in
            throw RPCError(.failedPrecondition, String(decoding: request.echo, as: UTF8.self))
        }
        backendRouter.registerSlow(started: started, gate: gate, answering: "finished")
        let logs = CapturedLogs()
        let backend = ServiceHost(options: HostOptions(name: "backend", endpoint: "tcp://127.0.0.1:*"), handler: backendRouter,
                                  logger: logs.logger("backend"))
        try await withRunningServices([backend], logger: logs.logger("backend-group")) {
            let reactor = Reactor(name: "front")
            let toBackend = WireClient(endpoint: try await backend.boundEndpoint(), options: .patient, logger: logs.logger("to-backend"), reactor: reactor)
            let handler = ForwardOnReactor(backend: toBackend, reactor: reactor, relays: relays)
            // The client to the backend makes its socket on the reactor; until then a request is
            // handled on a task (`take` declines), which the tests count. Readiness, asked on the
            // reactor's own thread.
            try await eventually("the client to the backend sends on the reactor") {
                await withTaskExecutorPreference(reactor) { toBackend.canSendOnReactor }
            }
            // A graceful stop waits up to 40 s for what it has taken (10 s by default): the
            // shutdown test must not depend on how quickly a loaded machine runs its checks.
            var frontOptions = HostOptions(name: "test", endpoint: "tcp://127.0.0.1:*")
            frontOptions.drainTimeout = .seconds(40)
            let front = ServiceHost(options: frontOptions, handler: handler,
                                    logger: logs.logger("front"), replyCache: nil, reactor: reactor)
            let group = ServiceGroup(configuration: .init(services: [.init(service: front)], logger: logs.logger("front-group")))
            try await withThrowingTaskGroup(of: Void.self) { tasks in
                tasks.addTask { try await group.run() }
                let client = WireClient(endpoint: try await front.boundEndpoint(), options: .patient, logger: logs.logger("client"))
                try await body(front, handler, client, group)
                await client.close()
                await group.triggerGracefulShutdown()
                try await tasks.waitForAll()
            }
            await toBackend.close()
            reactor.stop()
        }
    }

    @Test(arguments: [true, false])
    func forwardedOnTheReactor_declinedOnesOnATask_pingByTheHost(relays: Bool) async throws {
        try await withFront(relays: relays) { front, handler, client, _ async throws in
            for i in 0..<20 as Range<UInt8> {
                #expect(try await client.call(echo, CommonV1.PingRequest(echo: [i])).echo == [i])
            }
            #expect(front.counters.onReactor.load(ordering: .relaxed) == 20)
            #expect(handler.offTheReactor.count == 0)
            #expect(try await client.call(declined, CommonV1.PingRequest()).service == "backend")
            #expect(handler.offTheReactor.count == 1, "a declined request is handled on a task")
            #expect(try await client.ping(service: "test").service == "test", "the host answers its own Ping")
            #expect(front.counters.onReactor.load(ordering: .relaxed) == 20)
        }
    }

    /// Relayed replies reach the caller with its own request id and method and the backend's
    /// status, message and payload, whatever their size, and many at once: read in place and
    /// written once (`counters.relayed`). A status message that decoding would change (not plain
    /// ASCII) goes through the decoded path and arrives the same.
    @Test func relayedReplies_carryTheBackendsStatusMessageAndPayload() async throws {
        try await withFront { front, _, client, _ async throws in
            let sizes = [0, 1, 127, 128, 16_383, 16_384, 300_000]
            try await withThrowingTaskGroup(of: Void.self) { calls in
                for (index, size) in sizes.enumerated() {
                    calls.addTask {
                        let bytes = (0..<size).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ index) }
                        let request = Envelope(method: echo.fullName, payload: CommonV1.PingRequest(echo: bytes).serializedBytes())
                        let reply = await client.send(request, deadline: .seconds(20))
                        #expect(reply.kind == .reply && reply.method == echo.fullName && reply.status == .ok)
                        let response = try reply.decodeReply(CommonV1.PingResponse.self)
                        #expect(response == CommonV1.PingResponse(service: "backend", echo: bytes), "echo of \(size) bytes")
                    }
                }
                try await calls.waitForAll()
            }
            #expect(front.counters.relayed.load(ordering: .relaxed) == sizes.count)
            for message in ["plain ASCII refusal", "", "d\u{e9}j\u{e0} vu \u{2615}"] {
                let reply = await client.send(Envelope(method: refuse.fullName,
                                                       payload: CommonV1.PingRequest(echo: Array(message.utf8)).serializedBytes()))
                #expect(reply.method == refuse.fullName && reply.status == .failedPrecondition && reply.statusMessage == message)
                #expect(reply.payload.isEmpty && !reply.notStarted && reply.callerUserId == 0)
            }
            #expect(front.counters.relayed.load(ordering: .relaxed) == sizes.count + 2, "the non-ASCII message took the decoded path")
            #expect(front.counters.onReactor.load(ordering: .relaxed) == sizes.count + 3)
        }
    }

    /// A request taken on the reactor whose forwarded call outlives its deadline is answered in
    /// time (the forwarding client's budget ends just before the host's deadline); the late reply
    /// is dropped and the host goes on serving.
    @Test func aTakenRequestsDeadline_isAnsweredByTheHost() async throws {
        let gate = OneShot<Void>()
        try await withFront(gate: gate) { front, _, client, _ async throws in
            let reply = await client.send(Envelope(method: "test.Slow", payload: CommonV1.PingRequest().serializedBytes()),
                                          deadline: .milliseconds(300))
            #expect([.deadlineExceeded, .unavailable].contains(reply.status), "\(reply.status): \(reply.statusMessage)")
            gate.fulfil(())
            #expect(try await client.call(echo, CommonV1.PingRequest(echo: [7])).echo == [7], "the host goes on serving")
        }
    }

    /// A graceful stop waits for requests taken on the reactor, as it waits for handler tasks:
    /// the host keeps its socket (refusing new requests as it drains) until the taken one is
    /// answered. Without that wait it closed within milliseconds of the drain, no task being left.
    @Test func gracefulShutdown_finishesARequestTakenOnTheReactor() async throws {
        let gate = OneShot<Void>(), started = OneShot<Void>()
        try await withFront(gate: gate, started: started) { front, _, client, group async throws in
            let reply = Task { try await client.call(slow, CommonV1.PingRequest(), options: CallOptions(deadline: .seconds(45))) }
            await started.value
            await group.triggerGracefulShutdown()
            // Until the host says it is draining (a bounded retry)...
            let other = WireClient(endpoint: try await front.boundEndpoint(), options: .patient, logger: CapturedLogs().logger("other"))
            func draining(within deadline: Duration = .milliseconds(500)) async -> Bool {
                let pong = await other.send(Envelope(method: "test.Ping"), deadline: deadline)
                return pong.status == .unavailable && pong.statusMessage.contains("shutting down")
            }
            var attempts = 0
            while !(await draining()) && attempts < 20 { attempts += 1 }
            try #require(attempts < 20, "the host never said it was draining: it had closed")
            // ...and while the taken request waits, it is still there saying so. A host that had
            // closed never answers, so a long deadline only makes that failure slower; 500 ms
            // failed when the whole suite, starting PostgreSQL servers on two cores, stalled.
            for _ in 0..<3 { #expect(await draining(within: .seconds(10)), "the host closed with a request taken on its reactor unanswered") }
            await other.close()
            gate.fulfil(())
            #expect(try await reply.value.service == "finished")
            #expect(front.counters.onReactor.load(ordering: .relaxed) == 1)
        }
    }
}
