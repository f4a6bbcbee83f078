import Foundation
import FriensoProto
import FriensoTesting
import Logging
import PostgresHarness
import PostgresNIO
import Storage
import Synchronization
import Testing
@testable import Wire

private let create = RPCMethod<CommonV1.PingRequest, CommonV1.PingResponse>(service: "test", name: "Create", access: .authenticated)
private let ensure = RPCMethod<CommonV1.PingRequest, CommonV1.PingResponse>(service: "test", name: "Ensure", access: .authenticated)

/// `CrashWindowTests`' two mutations on PostgreSQL: one creates a row every time it runs, one
/// finds its work done when run again.
private struct PostgresItems {
    let database: PostgresServiceDatabase

    static let migrations = PostgresReplyStore.migrations + [
        PostgresMigration("items", ["CREATE TABLE items (id bigserial PRIMARY KEY, name text NOT NULL)"]),
    ]

    func count() async throws -> Int {
        try await database.read { connection in
            for try await n in try await connection.query("SELECT count(*) FROM items", logger: quiet).decode(Int64.self) { return Int(n) }
            return -1
        }
    }

    func router() -> MethodRouter {
        var router = MethodRouter()
        let database = database
        router.register(create) { request, _ in
            let name = String(decoding: request.echo, as: UTF8.self)
            let id = try await database.write { connection -> Int64 in
                for try await id in try await connection.query("INSERT INTO items (name) VALUES (\(name)) RETURNING id", logger: quiet).decode(Int64.self) { return id }
                return 0
            }
            return CommonV1.PingResponse(service: "item \(id)")
        }
        router.register(ensure) { request, _ in
            let name = String(decoding: request.echo, as: UTF8.self)
            let id = try await database.write { connection -> Int64 in
                for try await id in try await connection.query("SELECT id FROM items WHERE name = \(name)", logger: quiet).decode(Int64.self) { return id }
                for try await id in try await connection.query("INSERT INTO items (name) VALUES (\(name)) RETURNING id", logger: quiet).decode(Int64.self) { return id }
                return 0
            }
            return CommonV1.PingResponse(service: "item \(id)")
        }
        return router
    }
}

/// A fresh database of the test process's PostgreSQL server, opened on schema `schema`.
private func withPostgres<T>(schema: String = "items", urlParameters: String = "", _ body: (PostgresServiceDatabase, String) async throws -> T) async throws -> T {
    let server = try await PostgresTestServer.shared()
    let name = try await server.createDatabase("storage")
    let url = server.url(database: name) + (urlParameters.isEmpty ? "" : "&" + urlParameters) // the URL has `?sslmode=` already
    let database = try await PostgresServiceDatabase.open(try PostgresSettings(url: url, schema: schema), logger: quiet)
    do {
        let result = try await body(database, name)
        await database.close()
        return result
    } catch {
        await database.close()
        throw error
    }
}

private let quiet: Logger = {
    var logger = Logger(label: "test.postgres")
    logger.logLevel = .warning
    return logger
}()

@Suite("PostgreSQL storage: settings, migrations, the idempotency claim", .timeLimit(.minutes(3)))
struct PostgresStorageTests {
    @Test func urls_parse_refuseWhatTheyCannotUse_andNeverShowThePassword() throws {
        let settings = try PostgresSettings(url: "postgres://frienso:s3cret%21@db.internal:6543/frienso?sslmode=require&pool_max=8", schema: "geo")
        #expect(settings.host == "db.internal" && settings.port == 6543 && settings.username == "frienso" && settings.password == "s3cret!")
        #expect(settings.database == "frienso" && settings.tls == .require && settings.maximumConnections == 8 && settings.schema == "geo")
        #expect(!settings.description.contains("s3cret"))
        #expect(PostgresSettings.redact("postgres://frienso:s3cret@db/frienso") == "postgres://frienso:***@db/frienso")
        let socket = try PostgresSettings(url: "postgresql://frienso@/frienso?host=/run/postgresql", schema: "accounts")
        #expect(socket.unixSocketPath == "/run/postgresql/.s.PGSQL.5432" && socket.password == nil)
        #expect(try PostgresSettings(url: "postgres://a@db/c?sslmode=require&sslrootcert=/etc/frienso/db-ca.pem", schema: "geo").caFile == "/etc/frienso/db-ca.pem")
        #expect(settings.preparedStatements, "prepared unless the URL says otherwise")
        #expect(try PostgresSettings(url: "postgres://a@db/c?prepared_statements=off", schema: "geo").preparedStatements == false)
        for (url, reason) in [("mysql://a@b/c", "postgres://"), ("postgres://a@b", "names no database"), ("postgres://b:5432/c", "names no user"),
                              ("postgres://a@b/c?sslmode=sometimes", "sslmode"), ("postgres://a@b/c?colour=blue", "unknown PostgreSQL URL parameter"),
                              ("postgres://a:pw@b/c?pool_max=0", "pool_max"), ("postgres://a@b/c?prepared_statements=sometimes", "prepared_statements")] {
            #expect {
                _ = try PostgresSettings(url: url, schema: "accounts")
            } throws: { error in
                "\(error)".contains(reason) && !"\(error)".contains("pw@")
            }
        }
        #expect(throws: PostgresSettings.Invalid.self) { _ = try PostgresSettings(url: "postgres://a@b/c", schema: "drop table; --") }
    }

    @Test func aServerThatDoesNotAnswer_isUNAVAILABLE_afterABoundedWait() async throws {
        let port = try DeadPort()
        let portNumber = port.endpoint.split(separator: ":").last.map(String.init) ?? "1"
        let settings = try PostgresSettings(url: "postgres://frienso@127.0.0.1:\(portNumber)/frienso?sslmode=disable", schema: "items")
        await expectError(.unavailable, containing: "does not answer") {
            _ = try await PostgresServiceDatabase.open(settings, logger: quiet, timeout: .seconds(3))
        }
    }

    @Test func aServerThatGoesAway_isUNAVAILABLE_andServiceResumesWhenItIsBack() async throws {
        let server = try await Task.detached { try LocalPostgresServer.start(prefix: "frienso-pg-outage") }.value
        defer { server.stop() }
        let name = try await server.createDatabase("outage")
        let database = try await PostgresServiceDatabase.open(try PostgresSettings(url: server.url(database: name), schema: "items"), logger: quiet)
        try await database.migrate(PostgresItems.migrations)
        let items = PostgresItems(database: database)
        #expect(try await items.count() == 0)

        try await Task.detached { try server.pause() }.value
        // The health probe notices (bounded), and from then on a request is refused at once
        // instead of waiting for a connection the pool cannot make.
        try await eventually("the database is known to be unreachable", timeout: .seconds(20)) { !database.isReachable }
        await expectError(.unavailable, containing: "database is unavailable") { _ = try await items.count() }
        await expectError(.unavailable) {
            _ = try await database.write { connection in try await connection.query("INSERT INTO items (name) VALUES ('lost')", logger: quiet) }
        }

        try await Task.detached { try server.resume() }.value
        try await eventually("requests are served again", timeout: .seconds(30)) { (try? await items.count()) == 0 }
        _ = try await database.write { connection in try await connection.query("INSERT INTO items (name) VALUES ('after')", logger: quiet) }
        #expect(try await items.count() == 1, "nothing refused was applied; the write after the outage was")
        await database.close()
    }

    @Test func aPoolWhoseConnectionsAreAllBusy_isNotAnOutage() async throws {
        let server = try await PostgresTestServer.shared()
        let name = try await server.createDatabase("busy")
        defer { Task.detached { _ = try? await server.psql("postgres", "DROP DATABASE IF EXISTS \(name) WITH (FORCE)") } }
        let database = try await PostgresServiceDatabase.open(try PostgresSettings(url: server.url(database: name) + "&pool_max=1", schema: "items"),
                                                              logger: quiet)
        try await database.migrate(PostgresItems.migrations)
        let items = PostgresItems(database: database)
        // The pool's only connection stays in a transaction until the probes have been seen,
        // with a statement now and then: on a loaded machine the probes can take longer than the
        // server lets a transaction sit idle (15 s), and that limit is not what this test is about.
        let released = OneShot<Void>()
        let holding = Task {
            try await database.transaction { connection in
                try await connection.query("INSERT INTO items (name) VALUES ('held')", logger: quiet)
                while released.current == nil {
                    try await connection.query("SELECT 1", logger: quiet)
                    try await Task.sleep(for: .milliseconds(200)) // a keep-alive's pace; `holding.value` is the wait
                }
            }
        }
        try await eventually("the pool's connection is held") {
            (try? await server.psql(name, """
                SELECT count(*) FROM pg_stat_activity
                WHERE datname = '\(name)' AND application_name = 'frienso-items' AND state = 'idle in transaction'
                """)) == "1"
        }
        let before = database.answeredProbes
        try await eventually("three probes answered while the pool is busy", timeout: .seconds(20)) { database.answeredProbes >= before + 3 }
        #expect(database.isReachable, "a busy pool is not an outage")
        // A request meanwhile waits for the connection instead of being refused, and is served.
        async let counted = items.count()
        released.fulfil(())
        try await holding.value
        #expect(try await counted == 1)
        await database.close()
    }

    @Test func tls_isUsedAndChecked_aServerCertificateNobodyVouchesFor_isRefused() async throws {
        let scratch = try TemporaryDirectory("frienso-pg-tls")
        defer { scratch.remove() }
        let ca = try await TestCA.make(in: scratch.path)
        let server = try await Task.detached {
            try LocalPostgresServer.start(prefix: "frienso-pg-tls", tls: (ca.certificateFile, ca.keyFile))
        }.value
        defer { server.stop() }
        let name = try await server.createDatabase("tls")
        let base = "postgres://\(LocalPostgresServer.user):\(server.password)@127.0.0.1:\(server.port)/\(name)"

        // Trusting the CA that signed the server's certificate: the connection is TLS.
        let trusted = try await PostgresServiceDatabase.open(
            try PostgresSettings(url: "\(base)?sslmode=require&sslrootcert=\(ca.caFile)", schema: "items"), logger: quiet, timeout: .seconds(10))
        let encrypted = try await trusted.read { connection -> Bool in
            for try await ssl in try await connection.query("SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()", logger: quiet).decode(Bool.self) {
                return ssl
            }
            return false
        }
        #expect(encrypted, "the session is encrypted")
        // The health probe's own connection is encrypted too.
        try await eventually("a probe was answered") { trusted.answeredProbes > 0 }
        let probeEncrypted = try await trusted.read { connection -> Bool? in
            for try await ssl in try await connection.query("""
                SELECT bool_and(s.ssl) FROM pg_stat_ssl s JOIN pg_stat_activity a USING (pid) WHERE a.application_name = 'frienso-items-probe'
                """, logger: quiet).decode(Bool?.self) {
                return ssl
            }
            return nil
        }
        #expect(probeEncrypted == true, "the probe's session is encrypted")
        await trusted.close()

        // The system's roots do not vouch for the test CA: refused, never sent in clear.
        await expectError(.unavailable, containing: "does not answer") {
            _ = try await PostgresServiceDatabase.open(try PostgresSettings(url: "\(base)?sslmode=require", schema: "items"),
                                                       logger: quiet, timeout: .seconds(3))
        }
    }

    @Test func instancesMigratingAtOnce_applyEachMigrationOnce_andAgainIsNothing() async throws {
        let server = try await PostgresTestServer.shared()
        try await withPostgres { first, name in
            let second = try await PostgresServiceDatabase.open(try PostgresSettings(url: server.url(database: name), schema: "items"), logger: quiet)
            defer { Task { await second.close() } }
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask { try await first.migrate(PostgresItems.migrations) }
                group.addTask { try await second.migrate(PostgresItems.migrations) }
                try await group.waitForAll()
            }
            try await first.migrate(PostgresItems.migrations)
            #expect(try await server.psql(name, "SELECT string_agg(name, ',' ORDER BY name) FROM items.schema_migrations") == "idempotent_replies,items")
            #expect(try await server.psql(name, "SELECT count(*) FROM items.items") == "0")
        }
    }

    @Test func theClaimCommitsWithTheMutation_andARolledBackMutationLeavesNoClaim() async throws {
        try await withPostgres { database, _ in
            try await database.migrate(PostgresItems.migrations)
            let items = PostgresItems(database: database)
            let scope = IdempotencyScope(key: "u5|test.Create|k", digest: 42, dryRun: false)
            try await IdempotencyScope.$current.withValue(scope) {
                _ = try await database.write { connection in try await connection.query("INSERT INTO items (name) VALUES ('x')", logger: quiet) }
                await #expect(throws: PSQLError.self) {
                    try await database.write { connection in
                        try await connection.query("INSERT INTO items (name) VALUES ('y')", logger: quiet)
                        try await connection.query("INSERT INTO nowhere VALUES (1)", logger: quiet)
                    }
                }
            }
            #expect(try await items.count() == 1)
            let stored = await PostgresReplyStore(database: database).load(scope.key)
            #expect(stored == StoredReply(digest: 42, reply: nil), "a claim is a row without a reply")
            let other = await PostgresReplyStore(database: database).load("u5|test.Create|other")
            #expect(other == nil)
        }
    }

    /// Two instances handed the same request (a client's retry reached the other one while the
    /// first was applying it): the second's claim waits for the first's commit, then refuses.
    @Test func theSameRequestOnTwoInstancesAtOnce_isAppliedOnce_andASecondClaimIsRefused() async throws {
        try await withPostgres { database, name in
            try await database.migrate(PostgresItems.migrations)
            let server = try await PostgresTestServer.shared()
            let other = try await PostgresServiceDatabase.open(try PostgresSettings(url: server.url(database: name), schema: "items"), logger: quiet)
            let outcomes = await withTaskGroup(of: Bool.self) { group in
                for instance in [database, other] {
                    group.addTask {
                        // Each instance's run of the request has its own scope, as each host makes one.
                        let scope = IdempotencyScope(key: "u5|test.Create|same", digest: 7, dryRun: false)
                        do {
                            try await IdempotencyScope.$current.withValue(scope) {
                                _ = try await instance.write { connection in
                                    try await connection.query("INSERT INTO items (name) VALUES ('once')", logger: quiet)
                                }
                            }
                            return true
                        } catch let error as RPCError {
                            #expect(error.code == .unavailable && error.message.contains("applied already"), "\(error)")
                            return false
                        } catch {
                            Issue.record("unexpected \(error)")
                            return false
                        }
                    }
                }
                return await group.reduce(into: [Bool]()) { $0.append($1) }
            }
            #expect(outcomes.filter { $0 }.count == 1 && outcomes.count == 2, "one applied it, the other was refused")
            #expect(try await PostgresItems(database: database).count() == 1)
            await other.close()
        }
    }

    @Test func aRetryAfterACrashBetweenCommitAndReply_neverAppliesTheMutationTwice() async throws {
        try await withPostgres { database, _ in
            try await database.migrate(PostgresItems.migrations)
            let items = PostgresItems(database: database)
            func applyThenDie(_ method: String, name: String, key: String) async -> Envelope {
                let envelope = Envelope(version: WireProtocol.version, kind: .request, requestId: 1, method: method, callerUserId: 5,
                                        idempotencyKey: key, payload: CommonV1.PingRequest(echo: Array(name.utf8)).serializedBytes())
                let (cacheKey, digest) = ReplyCache.key(for: envelope)
                let incoming = IncomingRequest(envelope: envelope, peer: PeerIdentity(routingID: [1], hasDelimiter: false), peerAddress: "",
                                               deadline: .now.advanced(by: .seconds(5)), key: 1)
                return await IdempotencyScope.$current.withValue(IdempotencyScope(key: cacheKey, digest: digest, dryRun: false)) {
                    await items.router().handle(incoming, logger: quiet)
                }
            }
            #expect(await applyThenDie(create.fullName, name: "a", key: "k-create").status == .ok)
            #expect(await applyThenDie(ensure.fullName, name: "b", key: "k-ensure").status == .ok)
            #expect(try await items.count() == 2)

            // The service comes back (or another instance answers): a fresh host and cache over the same database.
            let logs = CapturedLogs()
            let host = ServiceHost(options: HostOptions(name: "test", endpoint: "tcp://127.0.0.1:*"), handler: items.router(),
                                   logger: logs.logger("host"), replyCache: ReplyCache(store: PostgresReplyStore(database: database)))
            try await withRunningServices([host], logger: logs.logger("group")) {
                let client = WireClient(endpoint: try await host.boundEndpoint(), options: .patient, logger: logs.logger("client"))
                func call(_ method: RPCMethod<CommonV1.PingRequest, CommonV1.PingResponse>, _ name: String, key: String) async throws -> String {
                    try await client.call(method, CommonV1.PingRequest(echo: Array(name.utf8)),
                                          options: CallOptions(idempotencyKey: key, callerUserID: 5)).service
                }
                #expect(try await call(ensure, "b", key: "k-ensure") == "item 2")
                await expectError(.alreadyExists, containing: "applied once already") { _ = try await call(create, "a", key: "k-create") }
                #expect(try await items.count() == 2, "no mutation was applied twice")
                // (PostgreSQL's sequences are not rolled back: the dry run above used an id, so the
                // new item's id is not necessarily 3. It is replayed as it was answered.)
                let created = try await call(create, "c", key: "k-new")
                #expect(created.hasPrefix("item "))
                #expect(try await call(create, "c", key: "k-new") == created)
                #expect(try await items.count() == 3)
                await client.close()
            }
        }
    }

    /// `PostgresConnection.prepared` (issue 16, item 126): a statement is prepared once per
    /// connection and run again with other values; its results are the plain query's. With
    /// `?prepared_statements=off` it runs from its text, and nothing stays prepared.
    @Test(arguments: [true, false]) func aPreparedStatement_isPreparedOncePerConnection_andRunAgainWithOtherValues(prepares: Bool) async throws {
        try await withPostgres(urlParameters: prepares ? "" : "prepared_statements=off") { database, _ in
            let sum = { (connection: PostgresConnection, value: Int64) async throws -> Int64? in
                try await PostgresServiceDatabase.first(connection.prepared("SELECT \(value)::bigint + 1 AS next_of_a_prepared_test", logger: quiet),
                                                        Int64.self)
            }
            let (answers, prepared) = try await database.read { connection in
                var answers: [Int64?] = []
                for value: Int64 in [1, 41, -8] { answers.append(try await sum(connection, value)) }
                var prepared: [String] = []
                for try await statement in try await connection.query("""
                    SELECT statement FROM pg_prepared_statements WHERE statement LIKE '%next_of_a_prepared_test%' AND statement NOT LIKE '%pg_prepared_statements%'
                    """, logger: quiet).decode(String.self) {
                    prepared.append(statement)
                }
                return (answers, prepared)
            }
            #expect(answers == [2, 42, -7])
            // Off (`?prepared_statements=off`, for a pooler that does not keep them): none.
            #expect(prepared == (prepares ? ["SELECT $1::bigint + 1 AS next_of_a_prepared_test"] : []), "one statement on the connection, prepared once")
        }
    }

    /// Every way in runs its body on the event loop of the connection it leased, so a statement's
    /// rows resume it on the thread that read them (no thread woken per statement), and hands the
    /// caller back to its own executor afterwards (a service's reactor).
    @Test func aBodyRunsOnItsConnectionsEventLoop_andTheCallerResumesOnItsOwnExecutor() async throws {
        try await withPostgres { database, _ in
            let reactor = Reactor(name: "test-pg-caller")
            defer { reactor.stop() }
            let body = { @Sendable (connection: PostgresConnection) async throws -> [Bool] in
                let first = connection.eventLoop.inEventLoop
                let rows = try await PostgresServiceDatabase.count(connection.prepared("SELECT generate_series(1, 500)", logger: quiet))
                return [first, rows == 500, connection.eventLoop.inEventLoop]
            }
            try await withTaskExecutorPreference(reactor) { () async throws in
                #expect(reactor.isCurrent)
                let read = try await database.read(body)
                #expect(read == [true, true, true] && reactor.isCurrent, "read, and back")
                let snapshot = try await database.snapshot(body)
                #expect(snapshot == [true, true, true] && reactor.isCurrent, "snapshot, and back")
                let transaction = try await database.transaction(body)
                #expect(transaction == [true, true, true] && reactor.isCurrent, "transaction, and back")
                let write = try await database.write(body)
                #expect(write == [true, true, true] && reactor.isCurrent, "write, and back")
                await #expect(throws: (any Error).self) { try await database.write { connection in try await connection.query("SELECT 1 / 0", logger: quiet) } }
                #expect(reactor.isCurrent, "after a failed write")
            }
        }
    }

    /// A statement first run inside a transaction that already failed cannot be prepared, and
    /// postgres-nio would keep that failure for it on the connection: the connection is closed,
    /// and the statement runs on the next one.
    @Test func aStatementFirstRunInAFailedTransaction_closesItsConnection_andRunsOnTheNext() async throws {
        try await withPostgres { database, _ in
            let statement: (Int64) -> PostgresQuery = { "SELECT \($0)::bigint * 2 AS doubled_in_a_failed_transaction" }
            let closed = Mutex<PostgresConnection?>(nil)
            await #expect(throws: (any Error).self) {
                try await database.transaction { connection in
                    closed.withLock { $0 = connection }
                    _ = try? await PostgresServiceDatabase.count(connection.query("SELECT 1 / 0", logger: quiet))
                    _ = try await PostgresServiceDatabase.count(connection.prepared(statement(1), logger: quiet))
                }
            }
            #expect(closed.withLock { $0?.isClosed } == true)
            let doubled = try await database.read { connection in try await PostgresServiceDatabase.first(connection.prepared(statement(21), logger: quiet), Int64.self) }
            #expect(doubled == 42)
        }
    }

    @Test func committedActions_runInCommitOrder_onlyForWhatCommitted() async throws {
        try await withPostgres { database, _ in
            try await database.migrate(PostgresItems.migrations)
            final class Seen: Sendable { let ids = Mutex<[Int64]>([]) }
            let seen = Seen()
            try await withThrowingTaskGroup(of: Void.self) { group in
                for n in 0..<40 {
                    group.addTask {
                        _ = try? await database.write({ connection -> Int64 in
                            if n % 10 == 9 { throw RPCError.failedPrecondition("refused") }
                            for try await id in try await connection.query("INSERT INTO items (name) VALUES ('n') RETURNING id", logger: quiet).decode(Int64.self) { return id }
                            return 0
                        }, committed: { id in seen.ids.withLock { $0.append(id) } })
                    }
                }
                try await group.waitForAll()
            }
            let ids = seen.ids.withLock { $0 }
            #expect(ids.count == 36, "the four refused mutations announce nothing")
            #expect(ids == ids.sorted(), "ids are handed out and announced in commit order: \(ids)")
        }
    }
}
