import FriensoProto
import FriensoTesting
import Synchronization
import Testing
@testable import Wire

@Suite("idempotent retries", .timeLimit(.minutes(1)))
struct IdempotencyTests {
    func countingRouter(_ counter: Counter) -> MethodRouter {
        var router = MethodRouter()
        router.register(echo) { _, _ in
            let n = counter.increment()
            return CommonV1.PingResponse(service: "applied \(n)")
        }
        return router
    }

    @Test func retriedMutation_withSameKey_isAppliedOnce_andGetsTheSameReply() async throws {
        let counter = Counter()
        try await withHost(countingRouter(counter), logs: CapturedLogs()) { _, client in
            let options = CallOptions(idempotencyKey: "raise-1", callerUserID: 7)
            let first = try await client.call(echo, CommonV1.PingRequest(), options: options)
            let second = try await client.call(echo, CommonV1.PingRequest(), options: options)
            #expect(first == second)
            #expect(counter.count == 1)
            // Another caller with the same key is another request.
            _ = try await client.call(echo, CommonV1.PingRequest(), options: CallOptions(idempotencyKey: "raise-1", callerUserID: 8))
            #expect(counter.count == 2)
        }
    }

    @Test func sameKey_onADifferentRequest_isRefused_andFromAnotherAnonymousClient_isNotReplayed() async throws {
        let counter = Counter()
        try await withHost(countingRouter(counter), logs: CapturedLogs()) { _, client in
            _ = try await client.call(echo, CommonV1.PingRequest(echo: [1]), options: CallOptions(idempotencyKey: "k", clientAddress: "10.0.0.1"))
            await expectError(.invalidArgument, containing: "already used for a different") {
                _ = try await client.call(echo, CommonV1.PingRequest(echo: [2]), options: CallOptions(idempotencyKey: "k", clientAddress: "10.0.0.1"))
            }
            #expect(counter.count == 1, "a key reused for a different payload is refused, not run as a new request")
            _ = try await client.call(echo, CommonV1.PingRequest(echo: [1]), options: CallOptions(idempotencyKey: "k", clientAddress: "10.0.0.2"))
            #expect(counter.count == 2, "another anonymous client does not get the first one's reply")
            _ = try await client.call(echo, CommonV1.PingRequest(echo: [1]), options: CallOptions(idempotencyKey: "k", clientAddress: "10.0.0.1"))
            #expect(counter.count == 2, "the same request from the same client is replayed")
        }
    }

    @Test func sameKey_onADifferentRequest_isRefused_afterARestartToo() async throws {
        let store = MemoryStore()
        let counter = Counter()
        try await withHost(countingRouter(counter), logs: CapturedLogs(), replyCache: ReplyCache(store: store)) { _, client in
            _ = try await client.call(echo, CommonV1.PingRequest(echo: [1]), options: CallOptions(idempotencyKey: "k", callerUserID: 3))
        }
        try await withHost(countingRouter(counter), logs: CapturedLogs(), replyCache: ReplyCache(store: store)) { _, client in
            await expectError(.invalidArgument, containing: "already used for a different") {
                _ = try await client.call(echo, CommonV1.PingRequest(echo: [9]), options: CallOptions(idempotencyKey: "k", callerUserID: 3))
            }
            let replayed = try await client.call(echo, CommonV1.PingRequest(echo: [1]), options: CallOptions(idempotencyKey: "k", callerUserID: 3))
            #expect(replayed.service == "applied 1")
        }
        #expect(counter.count == 1)
    }

    @Test func concurrentDuplicates_areAppliedOnce() async throws {
        let counter = Counter()
        let gate = OneShot<Void>()
        var router = MethodRouter()
        router.register(echo) { _, _ in
            let n = counter.increment()
            await gate.value
            return CommonV1.PingResponse(service: "applied \(n)")
        }
        try await withHost(router, logs: CapturedLogs()) { _, client in
            try await withThrowingTaskGroup(of: String.self) { group in
                for _ in 0..<5 {
                    group.addTask { try await client.call(echo, CommonV1.PingRequest(), options: CallOptions(idempotencyKey: "same")).service }
                }
                try await eventually("the first copy is running") { counter.count == 1 }
                gate.fulfil(())
                var replies: [String] = []
                for try await reply in group { replies.append(reply) }
                #expect(replies == Array(repeating: "applied 1", count: 5))
            }
            #expect(counter.count == 1)
        }
    }

    @Test func durableStore_replaysAfterRestart() async throws {
        let store = MemoryStore()
        let counter = Counter()
        for _ in 0..<2 {
            // A fresh host and cache each time, as after a restart; only the store survives.
            try await withHost(countingRouter(counter), logs: CapturedLogs(), replyCache: ReplyCache(store: store)) { _, client in
                let reply = try await client.call(echo, CommonV1.PingRequest(), options: CallOptions(idempotencyKey: "k"))
                #expect(reply.service == "applied 1")
            }
        }
        #expect(counter.count == 1)
    }

    @Test func transientFailure_isNotRemembered() async throws {
        let counter = Counter()
        var router = MethodRouter()
        router.register(echo) { _, _ in
            if counter.increment() == 1 { throw RPCError.unavailable("try later") }
            return CommonV1.PingResponse(service: "ok")
        }
        try await withHost(router, logs: CapturedLogs()) { _, client in
            let options = CallOptions(idempotencyKey: "k")
            await #expect(throws: RPCError.self) { try await client.call(echo, CommonV1.PingRequest(), options: options) }
            let retried = try await client.call(echo, CommonV1.PingRequest(), options: options)
            #expect(retried.service == "ok")
        }
    }
}

final class MemoryStore: ReplyStore {
    private let replies = Mutex<[String: StoredReply]>([:])
    func load(_ key: String) async -> StoredReply? { replies.withLock { $0[key] } }
    func save(_ key: String, _ stored: StoredReply) async { replies.withLock { $0[key] = stored } }
}

/// A durable store whose loads wait for `gate`: a duplicate can arrive while the first request
/// is still asking the store.
final class GatedStore: ReplyStore {
    let inner = MemoryStore()
    let gate = OneShot<Void>()
    let loads = Counter()
    func load(_ key: String) async -> StoredReply? {
        _ = loads.increment()
        await gate.value
        return await inner.load(key)
    }
    func save(_ key: String, _ stored: StoredReply) async { await inner.save(key, stored) }
}

@Suite("idempotent retries: a reused key found in the durable store", .timeLimit(.minutes(1)))
struct ReusedKeyInStoreTests {
    @Test func theRequest_andTheDuplicatesThatWaitedBehindIt_areAllRefused() async throws {
        let store = GatedStore()
        let counter = Counter()
        var router = MethodRouter()
        router.register(echo) { _, _ in CommonV1.PingResponse(service: "applied \(counter.increment())") }
        // Before a restart the key answered another payload.
        let earlier = Envelope(method: echo.fullName, callerUserId: 3, idempotencyKey: "k", payload: CommonV1.PingRequest(echo: [1]).serializedBytes())
        await store.inner.save(ReplyCache.key(for: earlier).key, StoredReply(digest: ReplyCache.key(for: earlier).digest, reply: earlier.reply()))
        try await withHost(router, logs: CapturedLogs(), replyCache: ReplyCache(store: store)) { host, client in
            let options = CallOptions(deadline: .seconds(10), idempotencyKey: "k", callerUserID: 3)
            let call = { @Sendable () async -> RPCError? in
                do { _ = try await client.call(echo, CommonV1.PingRequest(echo: [2]), options: options); return nil } catch let error as RPCError { return error } catch { return RPCError(.internal, "\(error)") }
            }
            async let first = call()
            try await eventually("the first asks the store") { store.loads.count == 1 }
            async let duplicate = call()
            try await eventually("the duplicate reached the host") { host.counters.requests.load(ordering: .relaxed) >= 2 }
            store.gate.fulfil(())
            let (a, b) = await (first, duplicate)
            #expect(a?.code == .invalidArgument && b?.code == .invalidArgument, "\(String(describing: a)) \(String(describing: b))")
            #expect(counter.count == 0)
        }
    }
}
