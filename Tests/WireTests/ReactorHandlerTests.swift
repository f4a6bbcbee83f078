import FriensoProto
import FriensoTesting
import Logging
import ServiceLifecycle
import Testing
@testable import Wire

/// A front host that forwards to a backend on its own reactor thread, as the gateway does:
/// "test.Declined" and anything it cannot send now go to `handle`, on a task.
struct ForwardOnReactor: ReactorRequestHandler {
    let backend: WireClient
    let reactor: Reactor
    let offTheReactor = Counter()

    func handle(_ request: IncomingRequest, logger: Logger) async -> Envelope {
        _ = offTheReactor.increment()
        return await backend.send(Envelope(method: request.envelope.method, payload: request.envelope.payload),
                                  deadline: request.downstreamBudget)
    }

    func take(_ request: IncomingRequest, reply: ReactorReply) -> Bool {
        #expect(reactor.isCurrent, "offered on the host's reactor thread")
        guard request.envelope.method != "test.Declined", backend.canSendOnReactor else { return false }
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

    /// The backend (echo, a slow method held by `gate`, and the declined one) and the front host
    /// forwarding to it on its reactor; `body` gets the front's host, handler and a client.
    func withFront(gate: OneShot<Void> = OneShot(), started: OneShot<Void> = OneShot(),
                   _ body: @Sendable (ServiceHost, ForwardOnReactor, WireClient, ServiceGroup) async throws -> Void) async throws {
        var backendRouter = MethodRouter()
        backendRouter.register(echo) { request, _ in CommonV1.PingResponse(service: "backend", echo: request.echo) }
        backendRouter.register(declined) { _, _ in CommonV1.PingResponse(service: "backend") }
        backendRouter.registerSlow(started: started, gate: gate, answering: "finished")
        let logs = CapturedLogs()
        let backend = ServiceHost(options: HostOptions(name: "backend", endpoint: "tcp://127.0.0.1:*"), handler: backendRouter,
                                  logger: logs.logger("backend"))
        try await withRunningServices([backend], logger: logs.logger("backend-group")) {
            let reactor = Reactor(name: "front")
            let toBackend = WireClient(endpoint: try await backend.boundEndpoint(), logger: logs.logger("to-backend"), reactor: reactor)
            let handler = ForwardOnReactor(backend: toBackend, reactor: reactor)
            // A graceful stop waits up to 40 s for what it has taken (10 s by default): the
            // shutdown test must not depend on how quickly a loaded machine runs its checks.
            var frontOptions = HostOptions(name: "test", endpoint: "tcp://127.0.0.1:*")
            frontOptions.drainTimeout = .seconds(40)
            let front = ServiceHost(options: frontOptions, handler: handler,
                                    logger: logs.logger("front"), replyCache: nil, reactor: reactor)
            let group = ServiceGroup(configuration: .init(services: [.init(service: front)], logger: logs.logger("front-group")))
            try await withThrowingTaskGroup(of: Void.self) { tasks in
                tasks.addTask { try await group.run() }
                let client = WireClient(endpoint: try await front.boundEndpoint(), logger: logs.logger("client"))
                try await body(front, handler, client, group)
                await client.close()
                await group.triggerGracefulShutdown()
                try await tasks.waitForAll()
            }
            await toBackend.close()
            reactor.stop()
        }
    }

    @Test func forwardedOnTheReactor_declinedOnesOnATask_pingByTheHost() async throws {
        try await withFront { front, handler, client, _ async throws in
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
            let other = WireClient(endpoint: try await front.boundEndpoint(), logger: CapturedLogs().logger("other"))
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
