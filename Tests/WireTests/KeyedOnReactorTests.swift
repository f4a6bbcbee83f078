import FriensoProto
import FriensoTesting
import Logging
import ServiceLifecycle
import Synchronization
import Testing
@testable import Wire

/// `MethodRouter.startOnReactor(_:keyed:_:)` with a durable reply cache: keyed requests start on
/// the host's reactor after the reply cache's in-memory steps (`RequestDispatcher.takeKeyed`), and
/// go on as on a task where a step needs the store (geo's check-ins: issue 16, item 91).
@Suite("service host: keyed requests started on the reactor", .timeLimit(.minutes(1)))
struct KeyedOnReactorTests {
    let keyed = RPCMethod<CommonV1.PingRequest, CommonV1.PingResponse>(service: "test", name: "Keyed", access: .public)

    /// What the handler saw and did.
    final class Runs: Sendable {
        let started = Counter()
        let onTasks = Counter()
        let withoutScope = Counter()
        /// Keys whose store holds an earlier run's claim: the handler's "write" meets it, as
        /// `ServiceDatabase`'s claim does (the run is marked collided and refused).
        let applied = Mutex<Set<String>>([])
    }

    /// "test.Keyed" starts on the reactor, keyed or not, waits for `gate` when its echo is
    /// "slow", and answers "run N" from another thread.
    func withHost(store: MemoryStore = MemoryStore(), gate: OneShot<Void> = OneShot(),
                  _ body: @Sendable (ServiceHost, Runs, WireClient) async throws -> Void) async throws {
        let runs = Runs()
        var router = MethodRouter()
        router.register(keyed) { _, _ in
            _ = runs.onTasks.increment()
            return CommonV1.PingResponse(service: "task")
        }
        router.claimFirst(keyed)
        router.startOnReactor(keyed, keyed: true) { request, context, done in
            let run = runs.started.increment()
            if context.idempotencyKey.isEmpty == (context.idempotency != nil) { _ = runs.withoutScope.increment() }
            Task {
                if request.echo == Array("slow".utf8) { await gate.value }
                if let scope = context.idempotency, runs.applied.withLock({ $0.contains(scope.key) }) {
                    scope.claims.collided()
                    return done(.failure(IdempotencyScope.claimedAlready(scope.key)))
                }
                done(.success(CommonV1.PingResponse(service: "run \(run)", echo: request.echo)))
            }
        }
        let logs = CapturedLogs()
        let host = ServiceHost(options: HostOptions(name: "test", endpoint: "tcp://127.0.0.1:*"), handler: router,
                               logger: logs.logger("host"), replyCache: ReplyCache(store: store))
        try await withRunningServices([host], logger: logs.logger("group")) {
            let client = WireClient(endpoint: try await host.boundEndpoint(), options: .patient, logger: logs.logger("client"))
            try await body(host, runs, client)
            await client.close()
        }
    }

    func call(_ client: WireClient, _ echo: String, key: String) async throws -> CommonV1.PingResponse {
        try await client.call(keyed, CommonV1.PingRequest(echo: Array(echo.utf8)), options: CallOptions(idempotencyKey: key))
    }

    @Test func aKeyedRequest_startsOnTheReactor_andItsRetryIsTheKeptReply() async throws {
        let store = MemoryStore()
        try await withHost(store: store) { host, runs, client async throws in
            let first = try await call(client, "a", key: "k-1")
            #expect(first.service == "run 1")
            #expect(try await call(client, "a", key: "k-1") == first, "the retry is the kept reply")
            #expect(try await call(client, "b", key: "k-2").service == "run 2")
            let unkeyed = try await client.call(keyed, CommonV1.PingRequest(echo: [1]))
            #expect(unkeyed.service == "run 3", "without a key too")
            await expectError(.invalidArgument) { _ = try await call(client, "another request", key: "k-1") }
            #expect(runs.started.count == 3 && runs.onTasks.count == 0 && runs.withoutScope.count == 0,
                    "keyed runs had their scope, the unkeyed one none; no request took the task path")
            #expect(host.counters.onReactor.load(ordering: .relaxed) == 5, "retries and refusals were answered on the reactor too")
        }
        // The host's stop waited for the replies' saves.
        #expect(await store.load(ReplyCache.key(for: Envelope(method: "test.Keyed", callerUserId: 0, idempotencyKey: "k-1")).key) != nil)
    }

    /// A duplicate that arrives while the first run is in flight waits for it and gets its reply.
    @Test func aDuplicateInFlight_waitsForTheFirstRun() async throws {
        let gate = OneShot<Void>()
        try await withHost(gate: gate) { _, runs, client async throws in
            let calls = (0..<5).map { _ in Task { try await call(client, "slow", key: "k-slow") } }
            try await eventually("the first run started") { runs.started.count == 1 }
            gate.fulfil(())
            var services: Set<String> = []
            for call in calls { services.insert(try await call.value.service) }
            #expect(services == ["run 1"] && runs.started.count == 1, "one run, its reply to all five")
        }
    }

    /// A run whose write meets an earlier run's claim (after a restart) is answered from the
    /// store: its reply, or INVALID_ARGUMENT for a key the store holds for another request.
    @Test func aRunThatMeetsAClaim_isAnsweredFromTheStore() async throws {
        let store = MemoryStore()
        let request = CommonV1.PingRequest(echo: Array("kept".utf8))
        let envelope = Envelope(method: "test.Keyed", idempotencyKey: "k-kept", payload: request.serializedBytes())
        let (key, digest) = ReplyCache.key(for: envelope)
        let kept = envelope.reply(payload: CommonV1.PingResponse(service: "before the restart").serializedBytes())
        await store.save(key, StoredReply(digest: digest, reply: kept))
        try await withHost(store: store) { _, runs, client async throws in
            _ = runs.applied.withLock { $0.insert(key) }
            #expect(try await call(client, "kept", key: "k-kept").service == "before the restart")
            #expect(try await call(client, "kept", key: "k-kept").service == "before the restart", "now from memory")
            #expect(runs.started.count == 1)
            await expectError(.invalidArgument) { _ = try await call(client, "another", key: "k-kept") }
        }
    }
}
