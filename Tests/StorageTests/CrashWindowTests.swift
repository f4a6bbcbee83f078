import Foundation
import FriensoProto
import FriensoTesting
import GRDB
import Logging
import Storage
import Synchronization
import Testing
@testable import Wire

/// Two mutations over a real SQLite file: one that creates a row every time it runs, one that
/// finds its work done when run again (as `SendFriendRequest` returns a pending request).
private let create = RPCMethod<CommonV1.PingRequest, CommonV1.PingResponse>(service: "test", name: "Create", access: .authenticated)
private let ensure = RPCMethod<CommonV1.PingRequest, CommonV1.PingResponse>(service: "test", name: "Ensure", access: .authenticated)
/// Refuses a name it holds already (as `Register` refuses a taken username): run again after its
/// commit, it meets its own row.
private let claimName = RPCMethod<CommonV1.PingRequest, CommonV1.PingResponse>(service: "test", name: "ClaimName", access: .authenticated)

private struct Items {
    let database: ServiceDatabase

    init(_ path: String) throws {
        database = try ServiceDatabase.open(path)
        var migrator = DatabaseMigrator()
        migrator.registerMigration("items") { db in
            try db.execute(sql: "CREATE TABLE items (id INTEGER PRIMARY KEY, name TEXT NOT NULL)")
        }
        SQLiteReplyStore.migrate(&migrator)
        try database.migrate(migrator)
    }

    var count: Int { (try? database.read { db in try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM items") ?? 0 }) ?? -1 }

    /// - Parameter claimsFirst: the three methods run before the reply cache reads the store
    ///   (`MethodRouter.claimFirst`): every answer must be the same either way.
    func router(claimsFirst: Bool = false) -> MethodRouter {
        var router = MethodRouter()
        let database = database
        router.register(create) { request, _ in
            let name = String(decoding: request.echo, as: UTF8.self)
            let id = try await database.write { db -> Int64 in
                try db.execute(sql: "INSERT INTO items (name) VALUES (?)", arguments: [name])
                return db.lastInsertedRowID
            }
            return CommonV1.PingResponse(service: "item \(id)")
        }
        router.register(ensure) { request, _ in
            let name = String(decoding: request.echo, as: UTF8.self)
            let id = try await database.write { db -> Int64 in
                if let id = try Int64.fetchOne(db, sql: "SELECT id FROM items WHERE name = ?", arguments: [name]) { return id }
                try db.execute(sql: "INSERT INTO items (name) VALUES (?)", arguments: [name])
                return db.lastInsertedRowID
            }
            return CommonV1.PingResponse(service: "item \(id)")
        }
        router.register(claimName) { request, _ in
            let name = String(decoding: request.echo, as: UTF8.self)
            let id = try await database.write { db -> Int64 in
                if try Bool.fetchOne(db, sql: "SELECT 1 FROM items WHERE name = ?", arguments: [name]) == true {
                    throw RPCError.alreadyExists("name: already registered")
                }
                try db.execute(sql: "INSERT INTO items (name) VALUES (?)", arguments: [name])
                return db.lastInsertedRowID
            }
            return CommonV1.PingResponse(service: "item \(id)")
        }
        if claimsFirst {
            router.claimFirst(create)
            router.claimFirst(ensure)
            router.claimFirst(claimName)
        }
        return router
    }
}

/// The durable reply store, counting its reads.
private final class CountingReplies: ReplyStore, Sendable {
    let base: SQLiteReplyStore
    private let reads = Atomic<Int>(0)
    var loads: Int { reads.load(ordering: .relaxed) }

    init(_ base: SQLiteReplyStore) { self.base = base }

    func load(_ key: String) async -> StoredReply? {
        reads.add(1, ordering: .relaxed)
        return await base.load(key)
    }
    func save(_ key: String, _ stored: StoredReply) async { await base.save(key, stored) }
    func save(_ key: String, _ stored: StoredReply, then done: @escaping @Sendable () -> Void) { base.save(key, stored, then: done) }
}

/// A call of one of the test methods, as client 5, under an idempotency key: its answer.
private typealias Call = @Sendable (RPCMethod<CommonV1.PingRequest, CommonV1.PingResponse>, _ name: String, _ key: String) async throws -> String

/// Runs `body` against a fresh host of `router` (a restart: nothing in memory) over `store`.
private func serveHost(_ router: MethodRouter, replies store: any ReplyStore, logs: CapturedLogs,
                   _ body: @escaping @Sendable (_ call: Call, _ host: ServiceHost) async throws -> Void) async throws {
    let host = ServiceHost(options: HostOptions(name: "test", endpoint: "tcp://127.0.0.1:*"), handler: router,
                           logger: logs.logger("host"), replyCache: ReplyCache(store: store))
    try await withRunningServices([host], logger: logs.logger("group")) {
        let client = WireClient(endpoint: try await host.boundEndpoint(), options: .patient, logger: logs.logger("client"))
        defer { Task { await client.close() } }
        try await body({ method, name, key in
            try await client.call(method, CommonV1.PingRequest(echo: Array(name.utf8)),
                                  options: CallOptions(idempotencyKey: key, callerUserID: 5)).service
        }, host)
    }
}

@Suite("a mutation and its idempotency claim commit together", .timeLimit(.minutes(1)))
struct CrashWindowTests {
    /// Runs `method` as a host would, up to the commit, then "dies": the reply is never saved.
    private func applyThenDie(_ items: Items, _ method: RPCMethod<CommonV1.PingRequest, CommonV1.PingResponse>,
                              name: String, key: String) async throws -> String {
        let host = RouterClient(name: "test", router: items.router(), replyCache: nil, logger: Logger(label: "test"))
        return try await host.callThenLoseTheReply(method, CommonV1.PingRequest(echo: Array(name.utf8)),
                                                   options: CallOptions(idempotencyKey: key, callerUserID: 5)).service
    }

    @Test(arguments: [false, true])
    func aRetryAfterACrashBetweenCommitAndReply_neverAppliesTheMutationTwice(claimsFirst: Bool) async throws {
        let directory = try TemporaryDirectory("frienso-crash-window")
        defer { directory.remove() }
        let items = try Items("\(directory.path)/items.sqlite")
        let first = try await applyThenDie(items, create, name: "a", key: "k-create")
        #expect(first == "item 1")
        let second = try await applyThenDie(items, ensure, name: "b", key: "k-ensure")
        #expect(second == "item 2")
        let third = try await applyThenDie(items, claimName, name: "taken", key: "k-claim")
        #expect(third == "item 3")
        #expect(items.count == 3)

        // The service comes back: a fresh host and cache over the same database.
        let logs = CapturedLogs()
        let host = ServiceHost(options: HostOptions(name: "test", endpoint: "tcp://127.0.0.1:*"), handler: items.router(claimsFirst: claimsFirst),
                               logger: logs.logger("host"), replyCache: ReplyCache(store: SQLiteReplyStore(database: items.database)))
        try await withRunningServices([host], logger: logs.logger("group")) {
            let client = WireClient(endpoint: try await host.boundEndpoint(), options: .patient, logger: logs.logger("client"))
            defer { Task { await client.close() } }
            func call(_ method: RPCMethod<CommonV1.PingRequest, CommonV1.PingResponse>, _ name: String, key: String) async throws -> String {
                try await client.call(method, CommonV1.PingRequest(echo: Array(name.utf8)),
                                      options: CallOptions(idempotencyKey: key, callerUserID: 5)).service
            }
            // The handler that finds its work done answers as the first run did.
            #expect(try await call(ensure, "b", key: "k-ensure") == "item 2")
            // The one that would create again is told it was applied, and creates nothing.
            await expectError(.alreadyExists, containing: "applied once already") { _ = try await call(create, "a", key: "k-create") }
            // The one that refuses now that its own row is there is told the same, never that
            // its name is taken (the registration a killed instance committed: found by the
            // two-instances e2e test).
            await expectError(.alreadyExists, containing: "applied once already") { _ = try await call(claimName, "taken", key: "k-claim") }
            #expect(items.count == 3, "no mutation was applied twice")
            // Its answer is kept: asked again, the same.
            await expectError(.alreadyExists, containing: "applied once already") { _ = try await call(create, "a", key: "k-create") }
            // A new request for the name is refused as usual.
            await expectError(.alreadyExists, containing: "name: already registered") { _ = try await call(claimName, "taken", key: "k-claim-2") }
            // Ordinary requests are untouched: applied once, replayed after.
            #expect(try await call(create, "c", key: "k-new") == "item 4")
            #expect(try await call(create, "c", key: "k-new") == "item 4")
            #expect(items.count == 4)
        }
    }

    /// A keyed request started on the host's reactor whose write is given its reply
    /// (`ServiceDatabase.write(as:_:reply:then:)`) makes the reply durable with the mutation and
    /// its claim (issue 16, item 94): nothing is left to save after the commit, so a crash there
    /// loses nothing, and the retry gets the reply where a claim alone says ALREADY_EXISTS.
    @Test func aReplyWrittenWithItsMutation_answersTheRetryAfterACrash_whereAClaimAloneCannot() async throws {
        let directory = try TemporaryDirectory("frienso-crash-window")
        defer { directory.remove() }
        let items = try Items("\(directory.path)/items.sqlite")
        let onReactor = RPCMethod<CommonV1.PingRequest, CommonV1.PingResponse>(service: "test", name: "CreateOnReactor", access: .authenticated)
        func router() -> MethodRouter {
            var router = items.router(claimsFirst: true)
            let database = items.database
            @Sendable func insert(_ request: CommonV1.PingRequest) -> @Sendable (Database) throws -> Int64 {
                { db in
                    try db.execute(sql: "INSERT INTO items (name) VALUES (?)", arguments: [String(decoding: request.echo, as: UTF8.self)])
                    return db.lastInsertedRowID
                }
            }
            router.register(onReactor) { request, _ in CommonV1.PingResponse(service: "item \(try await database.write(insert(request)))") }
            router.claimFirst(onReactor)
            router.startOnReactor(onReactor, keyed: true) { request, context, done in
                database.write(as: context.idempotency, insert(request), reply: { id in CommonV1.PingResponse(service: "item \(id)").serializedBytes() }) {
                    done($0.map { CommonV1.PingResponse(service: "item \($0)") })
                }
            }
            return router
        }
        let logs = CapturedLogs()
        // The process that dies: every save after a commit is lost.
        let losing = LosingSaves(SQLiteReplyStore(database: items.database))
        try await serveHost(router(), replies: losing, logs: logs) { call, host async throws in
            #expect(try await call(onReactor, "a", "k-reactor") == "item 1")
            #expect(host.counters.onReactor.load(ordering: .relaxed) == 1, "started on the reactor")
            #expect(losing.saves == 0, "nothing left to save after its commit")
            let stored = await losing.load("u5|test.CreateOnReactor|k-reactor")
            #expect(stored?.reply.map { try? CommonV1.PingResponse(serializedBytes: $0.payload) }??.service == "item 1",
                    "durable when it was answered: \(String(describing: stored))")
            // The same request made on a task: its reply's save comes after, and is lost.
            #expect(try await call(create, "b", "k-task") == "item 2")
            #expect(losing.saves == 1, "handed to the store before it was answered")
        }
        // The service comes back.
        try await serveHost(router(), replies: SQLiteReplyStore(database: items.database), logs: logs) { call, _ async throws in
            #expect(try await call(onReactor, "a", "k-reactor") == "item 1", "the reply, kept with its mutation")
            await expectError(.alreadyExists, containing: "applied once already") { _ = try await call(create, "b", "k-task") }
            #expect(try await call(onReactor, "c", "k-reactor-2") == "item 3")
            #expect(try await call(onReactor, "c", "k-reactor-2") == "item 3", "replayed from memory")
        }
        #expect(items.count == 3, "nothing applied twice")
    }

    @Test func theClaimCommitsWithTheMutation_andARolledBackMutationLeavesNoClaim() async throws {
        let directory = try TemporaryDirectory("frienso-crash-window")
        defer { directory.remove() }
        let items = try Items("\(directory.path)/items.sqlite")
        let scope = IdempotencyScope(key: "u5|test.Create|k", digest: 42, dryRun: false)
        try await IdempotencyScope.$current.withValue(scope) {
            _ = try await items.database.write { db in try db.execute(sql: "INSERT INTO items (name) VALUES ('x')") }
            await #expect(throws: DatabaseError.self) {
                try await items.database.write { db in
                    try db.execute(sql: "INSERT INTO items (name) VALUES ('y')")
                    try db.execute(sql: "INSERT INTO nowhere VALUES (1)")
                }
            }
        }
        let claims = try await items.database.read { db in try String.fetchAll(db, sql: "SELECT key FROM idempotent_replies") }
        #expect(claims == [scope.key])
        #expect(items.count == 1)
        let stored = await SQLiteReplyStore(database: items.database).load(scope.key)
        #expect(stored == StoredReply(digest: 42, reply: nil), "a claim is a row without a reply")
    }

    /// The reply cache reads the key before the handler runs; when that read misses a claim
    /// (it failed, or another process applied the request meanwhile), the claim refuses.
    @Test func aMutationUnderAKeyClaimedAlready_isRefusedAndRolledBack_neverAppliedTwice() async throws {
        let directory = try TemporaryDirectory("frienso-crash-window")
        defer { directory.remove() }
        let items = try Items("\(directory.path)/items.sqlite")
        // One run of the request: its second write finds its own claim (a handler may write twice).
        let run = IdempotencyScope(key: "u5|test.Create|k", digest: 42, dryRun: false)
        try await IdempotencyScope.$current.withValue(run) {
            _ = try await items.database.write { db in try db.execute(sql: "INSERT INTO items (name) VALUES ('x')") }
            _ = try await items.database.write { db in try db.execute(sql: "INSERT INTO items (name) VALUES ('x, second step')") }
        }
        // Another run of the same request, whose read of the key missed: refused, rolled back.
        let again = IdempotencyScope(key: "u5|test.Create|k", digest: 42, dryRun: false)
        await IdempotencyScope.$current.withValue(again) {
            await expectError(.unavailable, containing: "applied already") {
                _ = try await items.database.write { db in try db.execute(sql: "INSERT INTO items (name) VALUES ('x again')") }
            }
        }
        #expect(items.count == 2, "the second run's write was rolled back")
    }

    /// A method that claims first (issue 16, item 54) runs without the reply cache's read of the
    /// store; the store is read only when its claim meets an earlier run's (then the stored reply
    /// is the answer, or a key used for another request is refused, as the read would have
    /// said), or when the handler confirms before an effect its claim cannot take back.
    @Test func aMethodThatClaimsFirst_readsTheStoreOnlyWhenItMust_andAnswersRetriesFromIt() async throws {
        let directory = try TemporaryDirectory("frienso-claims-first")
        defer { directory.remove() }
        let items = try Items("\(directory.path)/items.sqlite")
        let effects = Atomic<Int>(0)
        let effect = RPCMethod<CommonV1.PingRequest, CommonV1.PingResponse>(service: "test", name: "Effect", access: .authenticated)
        func router() -> MethodRouter {
            var router = items.router(claimsFirst: true)
            let database = items.database
            router.register(effect) { request, _ in
                // What its claim cannot take back (a call that changes another service): after the check.
                try await IdempotencyScope.confirmFirstRun()
                effects.add(1, ordering: .relaxed)
                let id = try await database.write { db -> Int64 in
                    try db.execute(sql: "INSERT INTO items (name) VALUES (?)", arguments: [String(decoding: request.echo, as: UTF8.self)])
                    return db.lastInsertedRowID
                }
                return CommonV1.PingResponse(service: "item \(id)")
            }
            router.claimFirst(effect)
            return router
        }
        let logs = CapturedLogs()
        /// A fresh host over the same database, counting the store's reads.
        func serve(_ body: @escaping @Sendable (_ call: Call, _ replies: CountingReplies) async throws -> Void) async throws {
            let replies = CountingReplies(SQLiteReplyStore(database: items.database))
            try await serveHost(router(), replies: replies, logs: logs) { call, _ in try await body(call, replies) }
        }
        try await serve { call, replies in
            let answer1 = try await call(create, "a", "k1")
            #expect(answer1 == "item 1")
            #expect(replies.loads == 0, "a new request that claims first never reads the store")
            let answer2 = try await call(effect, "e", "k2")
            #expect(answer2 == "item 2")
            #expect(replies.loads == 1, "the handler's confirmation read it once")
            let answer3 = try await call(create, "a", "k1")
            #expect(answer3 == "item 1", "replayed from memory")
            #expect(replies.loads == 1)
        }
        try await serve { call, replies in
            let answer4 = try await call(create, "a", "k1")
            #expect(answer4 == "item 1", "after a restart: the claim met, the stored reply given back")
            #expect(replies.loads == 1)
            let answer5 = try await call(effect, "e", "k2")
            #expect(answer5 == "item 2")
            #expect(effects.load(ordering: .relaxed) == 1, "confirmed before the effect: the retry did not repeat it")
            await expectError(.invalidArgument, containing: "already used for a different") { _ = try await call(create, "other", "k1") }
            let answer6 = try await call(create, "b", "k3")
            #expect(answer6 == "item 3")
            #expect(items.count == 3, "nothing applied twice, nothing of the refused request kept")
        }
    }
}
