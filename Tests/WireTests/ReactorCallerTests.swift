import FriensoProto
import FriensoTesting
import Foundation
import Testing
@testable import Wire

/// Calls made by tasks running on the client's own reactor (a load loop preferring it, a host's
/// handler on it): handed to the client's loop at once, not through its command queue, so a full
/// batch leaves while the turn's other callers still run (issue 16, item 164).
@Suite("Calls from the client's reactor", .timeLimit(.minutes(1)))
struct ReactorCallerTests {
    /// One job on the reactor starts a batch's worth of callers and, after them, a watcher that
    /// holds the reactor's thread until the host has the batch: the callers and the watcher run
    /// in that order in one turn, so the batch must leave during the turn, not at its end. (Sent
    /// at the turn's end, as calls through the queue are, the host saw none of them while the
    /// watcher held the turn.)
    @Test func aFullBatchFromTheReactor_leavesBeforeItsTurnEnds() async throws {
        let logs = CapturedLogs()
        let seen = Counter()
        var router = MethodRouter()
        router.register(echo) { request, _ in
            _ = seen.increment()
            return CommonV1.PingResponse(echo: request.echo)
        }
        try await withHostOnItsOwnReactor(router, logs: logs) { client, reactor in
            // Connected, and the host's batches known to the client.
            let first = try await client.call(echo, CommonV1.PingRequest(echo: [0]))
            #expect(first.echo == [0])
            let batch = WireBatch.members
            let (callers, watcher) = await withTaskExecutorPreference(reactor) {
                let callers = (1...batch).map { index in
                    Task(executorPreference: reactor) {
                        try await client.call(echo, CommonV1.PingRequest(echo: [UInt8(index)])).echo == [UInt8(index)]
                    }
                }
                let watcher = Task(executorPreference: reactor) {
                    Self.holdThread(upTo: .seconds(20)) { seen.count >= 1 + batch }
                }
                return (callers, watcher)
            }
            #expect(await watcher.value, "the batch left only after its turn\n\(logs.dump())")
            for caller in callers {
                let answered = try await caller.value
                #expect(answered)
            }
        }
    }

    /// A caller that gives up (its task cancelled) gets UNAVAILABLE at once, not its reply or its
    /// deadline, whether its call went to the loop directly (from the reactor) or through the queue.
    @Test(arguments: [true, false])
    func aCancelledCall_isAnsweredAtOnce(fromTheReactor: Bool) async throws {
        let logs = CapturedLogs()
        let arrived = Counter()
        var router = MethodRouter()
        router.register(slow) { _, _ in
            _ = arrived.increment()
            try await Task.sleep(for: .seconds(50))
            return CommonV1.PingResponse()
        }
        try await withHostOnItsOwnReactor(router, logs: logs) { client, reactor in
            let operation: @Sendable () async -> Envelope = { await client.send(Envelope(method: "test.Slow"), deadline: .seconds(45)) }
            let call = fromTheReactor ? Task(executorPreference: reactor, operation: operation) : Task(operation: operation)
            try await eventually("the host has the call") { arrived.count == 1 }
            call.cancel()
            let reply = await call.value
            #expect(reply.status == .unavailable && reply.statusMessage == "call cancelled", "\(reply.status) \(reply.statusMessage)")
        }
    }

    /// A host on a reactor of its own, and a client on another: a test may hold the client's
    /// reactor while the host goes on answering.
    private func withHostOnItsOwnReactor(
        _ router: MethodRouter, logs: CapturedLogs, _ body: @Sendable (WireClient, Reactor) async throws -> Void
    ) async throws {
        var options = HostOptions(name: "test", endpoint: "tcp://127.0.0.1:*")
        options.drainTimeout = .milliseconds(50) // a slow handler's sleep is not waited for
        let hostReactor = Reactor(name: "caller-host")
        let host = ServiceHost(options: options, handler: router, logger: logs.logger("host"), reactor: hostReactor)
        try await withRunningServices([host], logger: logs.logger("group")) {
            let reactor = Reactor(name: "caller")
            let client = WireClient(endpoint: try await host.boundEndpoint(), options: .patient, logger: logs.logger("client"), reactor: reactor)
            try await body(client, reactor)
            await client.close()
            reactor.stop()
        }
        hostReactor.stop()
    }

    /// Holds the calling thread (a reactor's, on purpose) until `condition` holds, looking every
    /// 100 µs, for `limit` at most. - Returns: whether it held.
    private static func holdThread(upTo limit: Duration, until condition: () -> Bool) -> Bool {
        let until = ContinuousClock.now.advanced(by: limit)
        while ContinuousClock.now < until {
            if condition() { return true }
            usleep(100)
        }
        return condition()
    }
}
