import Foundation
import FriensoProto
import FriensoTesting
import GRDB
import Logging
import Storage
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

    func router() -> MethodRouter {
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
        return router
    }
}

@Suite("a mutation and its idempotency claim commit together", .timeLimit(.minutes(1)))
struct CrashWindowTests {
    /// Runs `method` as a host would, up to the commit, then "dies": the reply is never saved.
    private func applyThenDie(_ items: Items, _ method: String, name: String, key: String) async -> Envelope {
        let envelope = Envelope(version: WireProtocol.version, kind: .request, requestId: 1, method: method, callerUserId: 5,
                                idempotencyKey: key, payload: CommonV1.PingRequest(echo: Array(name.utf8)).serializedBytes())
        let (cacheKey, digest) = ReplyCache.key(for: envelope)
        let incoming = IncomingRequest(envelope: envelope, peer: PeerIdentity(routingID: [1], hasDelimiter: false), peerAddress: "",
                                       deadline: .now.advanced(by: .seconds(5)), key: 1)
        return await IdempotencyScope.$current.withValue(IdempotencyScope(key: cacheKey, digest: digest, dryRun: false)) {
            await items.router().handle(incoming, logger: Logger(label: "test"))
        }
    }

    @Test func aRetryAfterACrashBetweenCommitAndReply_neverAppliesTheMutationTwice() async throws {
        let directory = try TemporaryDirectory("frienso-crash-window")
        defer { directory.remove() }
        let items = try Items("\(directory.path)/items.sqlite")
        let first = await applyThenDie(items, create.fullName, name: "a", key: "k-create")
        #expect(first.status == .ok)
        let second = await applyThenDie(items, ensure.fullName, name: "b", key: "k-ensure")
        #expect(second.status == .ok)
        let third = await applyThenDie(items, claimName.fullName, name: "taken", key: "k-claim")
        #expect(third.status == .ok)
        #expect(items.count == 3)

        // The service comes back: a fresh host and cache over the same database.
        let logs = CapturedLogs()
        let host = ServiceHost(options: HostOptions(name: "test", endpoint: "tcp://127.0.0.1:*"), handler: items.router(),
                               logger: logs.logger("host"), replyCache: ReplyCache(store: SQLiteReplyStore(database: items.database)))
        try await withRunningServices([host], logger: logs.logger("group")) {
            let client = WireClient(endpoint: try await host.boundEndpoint(), logger: logs.logger("client"))
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
}
