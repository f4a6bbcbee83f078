@testable import Accounts
import Foundation
import FriensoProto
import FriensoTesting
import Storage
import Testing
import Wire

/// A retry that arrives while its request's first run is still open on another instance (that
/// instance's host cut off between its statements and its commit): the two must not both run.
@Suite("accounts: a retry meeting its first run (PostgreSQL)", .timeLimit(.minutes(3)))
struct RetryRaceTests {
    /// The retry waits at its claim for the first run's transaction, and once that commits it is
    /// refused UNAVAILABLE ("retry it for its reply"), touching nothing. With the claim taken at
    /// the end of the transaction instead, it ran the registration alongside, waited on the
    /// first run's user row, and answered ALREADY_EXISTS "username" to its own retry (seen in
    /// the several-hosts test).
    @Test func retryWhileTheFirstRunIsOpen_waitsAtItsClaim_thenIsRefusedAsRetryable() async throws {
        let storage = try await TestStorage.fresh(.postgres, service: "accounts")
        let (service, close) = try await storage.open(config: testConfig(TestClock()))
        let other = try await storage.open()
        do {
            guard case .postgres(let database) = other else { throw StoreInvariant("not PostgreSQL") }
            let client = RouterClient(service, name: "accounts", logger: CapturedLogs().logger("accounts"))
            let request = AccountsV1.RegisterRequest(username: "race", email: "race@example.org", phone: "+15625550700",
                                                     password: "correct horse 1", firstName: "R", lastName: "C")
            let envelope = Envelope(method: API.register.fullName, idempotencyKey: "k1", payload: request.serializedBytes(),
                                    clientAddress: "10.0.0.9")
            let (key, digest) = ReplyCache.key(for: envelope)
            // The first run, on "another instance": its user row and its claim, not committed yet.
            // It stays open until released: without `SET LOCAL`, the server ends it after 15 s
            // idle in its transaction (our setting for cut-off hosts), and a retry that a starved
            // suite took longer than that to bring to its claim found no first run to wait for.
            let written = OneShot<Int32>(), release = OneShot<Void>()
            let firstRun = Task {
                try await database.transaction { connection in
                    try await connection.query("SET LOCAL idle_in_transaction_session_timeout = 0", logger: database.logger)
                    // Its server process, to find who waits on it (other tests' schemas share the database).
                    var backend: Int32 = 0
                    for try await pid in try await connection.query("SELECT pg_backend_pid()", logger: database.logger).decode(Int32.self) {
                        backend = pid
                    }
                    try await connection.query("""
                        INSERT INTO users (username, email, phone, password_hash, first_name, last_name, created_at_ms)
                        VALUES ('race', 'race@example.org', '+15625550700', 'x', 'R', 'C', 0)
                        """, logger: database.logger)
                    try await connection.query("""
                        INSERT INTO idempotent_replies (key, reply, digest, created_at) VALUES (\(key), ''::bytea, \(Int64(bitPattern: digest)), 0)
                        """, logger: database.logger)
                    written.fulfil(backend)
                    await release.value
                }
            }
            let firstRunBackend = await written.value
            // A long deadline and a long wait: on a starved suite (PostgreSQL servers starting on
            // two cores) the retry has taken more than 15 s to reach its claim, and it must still
            // be waiting there when a poll sees it.
            let retry = Task { await client.send(envelope, deadline: .seconds(120)) }
            try await eventually("the retry waits on a lock of the first run", timeout: .seconds(40)) {
                try await storage.psql("SELECT count(*) FROM pg_stat_activity WHERE \(firstRunBackend) = ANY(pg_blocking_pids(pid))") == "1"
            }
            release.fulfil(())
            try await firstRun.value
            let reply = await retry.value
            #expect(reply.status == .unavailable, "\(reply.status): \(reply.statusMessage)")
            #expect(try await storage.psql("SELECT count(*) FROM users") == "1")
        } catch {
            await other.close()
            await close()
            await storage.remove()
            throw error
        }
        await other.close()
        await close()
        await storage.remove()
    }
}
