import Dispatch
import FriensoProto
import FriensoTesting
import Logging
import ServiceLifecycle
import Synchronization
import Testing
@testable import Wire

/// `MethodRouter.startOnReactor`: a method that starts on the host's reactor thread and answers
/// once, later, from another thread (geo's location updates answer from their commit's thread:
/// issue 16, item 70).
@Suite("service host: methods started on the reactor, answered from another thread", .timeLimit(.minutes(1)))
struct StartOnReactorTests {
    let refuse = RPCMethod<CommonV1.PingRequest, CommonV1.PingResponse>(service: "test", name: "Refuse", access: .public)
    let broken = RPCMethod<CommonV1.PingRequest, CommonV1.PingResponse>(service: "test", name: "Broken", access: .public)
    let signedIn = RPCMethod<CommonV1.PingRequest, CommonV1.PingResponse>(service: "test", name: "SignedIn", access: .authenticated)

    struct Broken: Error {}

    /// What the handlers saw.
    final class Seen: Sendable {
        let onTasks = Counter()
        let startedOffTheReactor = Counter()
        let answeredOnTheReactor = Counter()
    }

    /// A host whose methods start on its reactor and answer from a global queue: "test.Echo"
    /// echoes (its task-path handler counts in `onTasks`), "test.Refuse" fails with
    /// FAILED_PRECONDITION, "test.Broken" with an error that is no status, "test.SignedIn" needs a
    /// caller, and "test.Slow" answers only when `gate` opens.
    func withHost(gate: OneShot<Void> = OneShot(), _ body: @Sendable (ServiceHost, Seen, WireClient) async throws -> Void) async throws {
        let seen = Seen()
        let reactor = Reactor(name: "start-on-reactor")
        let later = DispatchQueue(label: "answers", attributes: .concurrent)
        var router = MethodRouter()
        router.register(echo) { request, _ in
            _ = seen.onTasks.increment()
            return CommonV1.PingResponse(service: "task", echo: request.echo)
        }
        for method in [refuse, broken, signedIn, slow] {
            router.register(method) { _, _ in
                _ = seen.onTasks.increment()
                return CommonV1.PingResponse(service: "task")
            }
        }
        func start(_ method: RPCMethod<CommonV1.PingRequest, CommonV1.PingResponse>,
                   _ answer: @escaping @Sendable (CommonV1.PingRequest, RequestContext) async -> Result<CommonV1.PingResponse, any Error>) {
            router.startOnReactor(method) { request, context, done in
                if !reactor.isCurrent { _ = seen.startedOffTheReactor.increment() }
                later.async {
                    Task {
                        let result = await answer(request, context)
                        if reactor.isCurrent { _ = seen.answeredOnTheReactor.increment() }
                        done(result)
                    }
                }
            }
        }
        start(echo) { request, _ in .success(CommonV1.PingResponse(service: "later", echo: request.echo)) }
        start(refuse) { request, _ in .failure(RPCError(.failedPrecondition, String(decoding: request.echo, as: UTF8.self))) }
        start(broken) { _, _ in .failure(Broken()) }
        start(signedIn) { _, context in .success(CommonV1.PingResponse(service: "caller \(context.callerUserID)")) }
        start(slow) { _, _ in
            await gate.value
            return .success(CommonV1.PingResponse(service: "finished"))
        }
        let logs = CapturedLogs()
        let host = ServiceHost(options: HostOptions(name: "test", endpoint: "tcp://127.0.0.1:*"), handler: router,
                               logger: logs.logger("host"), reactor: reactor)
        try await withRunningServices([host], logger: logs.logger("group")) {
            let client = WireClient(endpoint: try await host.boundEndpoint(), options: .patient, logger: logs.logger("client"))
            try await body(host, seen, client)
            await client.close()
        }
        reactor.stop()
    }

    @Test func startsOnTheReactor_answersFromAnotherThread_manyAtOnce() async throws {
        try await withHost { host, seen, client async throws in
            try await withThrowingTaskGroup(of: Void.self) { calls in
                for i in 0..<200 {
                    calls.addTask {
                        let bytes = [UInt8(i % 256), UInt8(i / 256)]
                        let reply = try await client.call(echo, CommonV1.PingRequest(echo: bytes))
                        #expect(reply.service == "later" && reply.echo == bytes, "call \(i) got its own answer")
                    }
                }
                try await calls.waitForAll()
            }
            #expect(host.counters.onReactor.load(ordering: .relaxed) == 200)
            #expect(seen.onTasks.count == 0, "no request took the task path")
            #expect(seen.startedOffTheReactor.count == 0, "each started on the host's reactor thread")
            #expect(seen.answeredOnTheReactor.count == 0, "each answered from another thread")
        }
    }

    @Test func failuresAndRefusals_getTheirStatuses() async throws {
        try await withHost { host, seen, client async throws in
            let refused = await client.send(Envelope(method: "test.Refuse", payload: CommonV1.PingRequest(echo: Array("not now".utf8)).serializedBytes()),
                                            deadline: TestDeadline.patient)
            #expect(refused.status == .failedPrecondition && refused.statusMessage == "not now")
            let broken = await client.send(Envelope(method: "test.Broken", payload: CommonV1.PingRequest().serializedBytes()), deadline: TestDeadline.patient)
            #expect(broken.status == .internal && broken.statusMessage == "internal error in test.Broken",
                    "an error that is no status is INTERNAL, its text not shown: \(broken.statusMessage)")
            let garbage = await client.send(Envelope(method: "test.Echo", payload: [0xFF, 0xFF, 0xFF]), deadline: TestDeadline.patient)
            #expect(garbage.status == .invalidArgument, "a payload that does not decode is refused before the handler")
            let anonymous = await client.send(Envelope(method: "test.SignedIn", payload: CommonV1.PingRequest().serializedBytes()), deadline: TestDeadline.patient)
            #expect(anonymous.status == .unauthenticated)
            let caller = try await client.call(signedIn, CommonV1.PingRequest(), options: CallOptions(callerUserID: 42))
            #expect(caller.service == "caller 42")
            #expect(seen.onTasks.count == 0)
            #expect(try await client.ping(service: "test").service == "test", "the host goes on serving")
        }
    }

    /// A keyed request goes to the task path (the host keeps replies and answers a retry from
    /// them); the same method without a key starts on the reactor.
    @Test func aKeyedRequest_takesTheTaskPath() async throws {
        try await withHost { host, seen, client async throws in
            let keyed = try await client.call(echo, CommonV1.PingRequest(echo: [1]), options: CallOptions(idempotencyKey: "k-1"))
            #expect(keyed.service == "task" && seen.onTasks.count == 1)
            let again = try await client.call(echo, CommonV1.PingRequest(echo: [1]), options: CallOptions(idempotencyKey: "k-1"))
            #expect(again.service == "task" && seen.onTasks.count == 1, "the retry is answered from the kept reply")
            #expect(try await client.call(echo, CommonV1.PingRequest(echo: [2])).service == "later")
            #expect(host.counters.onReactor.load(ordering: .relaxed) == 1)
        }
    }

    /// The host answers DEADLINE_EXCEEDED when a started request's deadline passes; the late
    /// answer is dropped, and the host goes on serving.
    @Test func aDeadlineBeforeTheAnswer_isAnsweredByTheHost_andTheLateAnswerDropped() async throws {
        let gate = OneShot<Void>()
        try await withHost(gate: gate) { host, _, client async throws in
            let reply = await client.send(Envelope(method: "test.Slow", payload: CommonV1.PingRequest().serializedBytes()),
                                          deadline: .milliseconds(300))
            #expect([.deadlineExceeded, .unavailable].contains(reply.status), "\(reply.status): \(reply.statusMessage)")
            // The host's own deadline runs from the request's arrival, a little after the client's.
            try await eventually("the host answers the deadline") { host.counters.deadlineExceeded.load(ordering: .relaxed) == 1 }
            gate.fulfil(())
            try await eventually("the late answer is dropped") { host.counters.dropped.load(ordering: .relaxed) == 1 }
            #expect(try await client.call(echo, CommonV1.PingRequest(echo: [7])).echo == [7])
        }
    }
}
