import FriensoProto
import FriensoTesting
import Synchronization
import Testing
@testable import Wire

/// A host's handler tasks are kept between requests (`HandlerTasks`, issue 16 item 114): a request
/// runs on a parked task when one waits, on a new one otherwise, never fewer at once than before.
@Suite("handler tasks", .timeLimit(.minutes(1)))
struct HandlerTasksTests {
    // MARK: The host

    /// One call at a time: the task that served the first serves every other. On the reactor,
    /// a handler's task parks before its reply leaves the reactor thread (the reply is a command
    /// the reactor runs after the task's job), so the next request always finds it parked.
    @Test func sequentialRequests_runOnTheTaskTheFirstStarted() async throws {
        var router = MethodRouter()
        router.register(echo) { request, _ in CommonV1.PingResponse(service: "kept", echo: request.echo) }
        try await withHost(router, logs: CapturedLogs()) { host, client in
            for round in 0..<50 {
                let reply = try await client.call(echo, CommonV1.PingRequest(echo: [UInt8(round)]))
                #expect(reply.echo == [UInt8(round)])
            }
            #expect(host.counters.handlerTasks.load(ordering: .relaxed) == 1)
        }
        // withHost's end stopped the host: its dispatch finished with the task still parked.
    }

    /// More requests at once than tasks may park: each still gets a task of its own (they all
    /// wait for each other here, so fewer tasks would never finish), and afterwards the parked
    /// ones serve the next calls without new tasks.
    @Test func concurrentRequests_eachRunOnATask_pastTheParkedLimit() async throws {
        let together = 12
        let barrier = Barrier(count: together)
        var router = MethodRouter()
        router.register(slow) { request, _ in
            await barrier.arriveAndWait()
            return CommonV1.PingResponse(service: "together", echo: request.echo)
        }
        router.register(echo) { request, _ in CommonV1.PingResponse(service: "after", echo: request.echo) }
        try await withHost(router, logs: CapturedLogs(), options: { $0.parkedHandlerTasks = 3 }) { host, client in
            let replies = try await withThrowingTaskGroup(of: [UInt8].self) { group in
                for index in 0..<together {
                    group.addTask {
                        try await client.call(slow, CommonV1.PingRequest(echo: [UInt8(index)]),
                                              options: CallOptions(deadline: .seconds(30))).echo
                    }
                }
                return try await group.reduce(into: Set<[UInt8]>()) { $0.insert($1) }
            }
            #expect(replies == Set((0..<together).map { [UInt8($0)] }))
            #expect(host.counters.handlerTasks.load(ordering: .relaxed) == together)
            for round in 0..<10 {
                let reply = try await client.call(echo, CommonV1.PingRequest(echo: [UInt8(round)]))
                #expect(reply.echo == [UInt8(round)])
            }
            #expect(host.counters.handlerTasks.load(ordering: .relaxed) == together)
        }
    }

    /// Handlers on Swift's global pool (`HandlerExecution.pool`, as media's) are kept too, and
    /// the host still stops with its tasks parked.
    @Test func poolHandlers_areKept_andTheHostStops() async throws {
        var router = MethodRouter()
        router.register(echo) { request, _ in CommonV1.PingResponse(service: "pool", echo: request.echo) }
        try await withHost(router, logs: CapturedLogs(), options: { $0.handlerExecution = .pool }) { host, client in
            for round in 0..<30 {
                let reply = try await client.call(echo, CommonV1.PingRequest(echo: [UInt8(round)]))
                #expect(reply.echo == [UInt8(round)])
            }
            // On the pool a request can arrive before the task that answered the last one has
            // parked; never a task per request over 30 calls made one after the other.
            #expect(host.counters.handlerTasks.load(ordering: .relaxed) < 30)
        }
    }

    // MARK: HandlerTasks alone

    @Test func aParkedTask_getsTheRequestItIsHanded() async throws {
        let tasks = HandlerTasks(keepParked: 4)
        #expect(tasks.parkedCount == 0)
        let waiting = Task { await tasks.next()?.envelope.method }
        let parked = try await eventually { tasks.takeParked() }
        parked.resume(returning: request("test.Handed"))
        #expect(await waiting.value == "test.Handed")
        #expect(tasks.parkedCount == 0)
    }

    @Test func pastTheLimit_aTaskEnds_insteadOfParking() async throws {
        let tasks = HandlerTasks(keepParked: 1)
        let first = Task { await tasks.next()?.envelope.method }
        try await eventually { tasks.parkedCount == 1 ? true : nil }
        #expect(await tasks.next() == nil) // the second: one is parked already
        #expect(await HandlerTasks(keepParked: 0).next() == nil)
        tasks.close()
        #expect(await first.value == nil)
    }

    @Test func close_endsTheParkedTasks_andThoseThatWouldParkLater() async throws {
        let tasks = HandlerTasks(keepParked: 8)
        let waiting = (0..<3).map { _ in Task { await tasks.next() == nil } }
        try await eventually { tasks.parkedCount == 3 ? true : nil }
        tasks.close()
        for task in waiting { #expect(await task.value) }
        #expect(await tasks.next() == nil)
        #expect(tasks.parkedCount == 0)
    }

    @Test func aCancelledTask_doesNotPark() async throws {
        let tasks = HandlerTasks(keepParked: 8)
        let cancelled = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            return await tasks.next() == nil
        }
        #expect(await cancelled.value)
        #expect(tasks.parkedCount == 0)
    }

    private func request(_ method: String) -> IncomingRequest {
        var request = IncomingRequest.filler
        request.envelope.method = method
        return request
    }

    /// `probe`'s first non-nil answer, asked again (yielding between) until it gives one.
    @discardableResult
    private func eventually<T>(_ probe: () -> T?) async throws -> T {
        for _ in 0..<100_000 {
            if let value = probe() { return value }
            await Task.yield()
        }
        throw Timeout()
    }

    private struct Timeout: Error {}
}

/// Lets `count` callers through together, once the last has arrived.
private final class Barrier: Sendable {
    private let arrived = Atomic<Int>(0)
    private let open = OneShot<Void>()
    private let count: Int

    init(count: Int) { self.count = count }

    func arriveAndWait() async {
        if arrived.add(1, ordering: .relaxed).newValue == count { open.fulfil(()) }
        await open.value
    }
}
