public import PostgresHarness
import Glibc
import Storage

/// The test process's PostgreSQL server (`LocalPostgresServer`): started on first use, shared by
/// every test of the process (each in-process test's storage is a schema of its own in one
/// database, `database()`; end-to-end deployments make databases of their own), stopped by its
/// PID when the process exits.
public enum PostgresTestServer {
    public static let user = LocalPostgresServer.user

    /// The server for this test process (started on first call).
    public static func shared() async throws -> LocalPostgresServer {
        try await Starter.instance.server()
    }

    /// The database every in-process test's storage has a schema of its own in (`TestStorage`),
    /// as a deployment keeps each service in a schema of one database; made on first call. A
    /// database per test cost a `CREATE DATABASE` (0.3 s of the server's CPU, two psql at a
    /// time) when no emptied one was free, and every suite asked for its first ones at once, in
    /// the run's most crowded seconds; a schema costs a millisecond. Measured 2026-11-29, two
    /// runs each: the in-process phase 104 / 101 s → 93 / 99 s; the serialized alerts chain's
    /// first test (the phase's critical path) 36.6 → 28.7 s.
    public static func database() async throws -> String {
        try await Starter.instance.database()
    }

    private actor Starter {
        static let instance = Starter()
        private var started: Task<LocalPostgresServer, any Error>?
        private var made: Task<String, any Error>?

        func database() async throws -> String {
            if let made { return try await made.value }
            let task = Task { try await self.server().createDatabase("tests") }
            made = task
            return try await task.value
        }

        func server() async throws -> LocalPostgresServer {
            if let started { return try await started.value }
            let task = Task {
                try await onOwnThread {
                    let server = try LocalPostgresServer.start()
                    StopAtExit.register(server)
                    return server
                }
            }
            started = task
            return try await task.value
        }
    }
}

extension LocalPostgresServer {
    /// `createDatabase` off the cooperative pool (psql runs to its end, blocking its thread: on
    /// the pool's two threads, tests waiting for psql held up every other test, and geo's
    /// commits, which wait for pool tasks from their own thread). Two at a time: every suite
    /// making its databases at once at the start of a run starved the timing-sensitive tests'
    /// reactors on two cores.
    public func createDatabase(_ prefix: String = "t") async throws -> String {
        try await PsqlTurns.shared.run { try await onOwnThread { try self.createDatabase(prefix) } }
    }

    /// `psql` off the cooperative pool (two at a time, as `createDatabase`).
    public func psql(_ database: String, _ sql: String) async throws -> String {
        try await PsqlTurns.shared.run { try await onOwnThread { try self.psql(database, sql) } }
    }
}

/// Stops the server when the test process exits.
private enum StopAtExit {
    nonisolated(unsafe) static var server: LocalPostgresServer?

    static func register(_ server: LocalPostgresServer) {
        Self.server = server
        atexit { StopAtExit.server?.stop() }
    }
}

/// At most two psql processes of this test process at a time; the others wait their turn, in order.
private actor PsqlTurns {
    static let shared = PsqlTurns()
    private var running = 0
    private var waiting: [CheckedContinuation<Void, Never>] = []

    func run<T: Sendable>(_ body: @Sendable () async throws -> T) async throws -> T {
        if running >= 2 {
            await withCheckedContinuation { waiting.append($0) }
        } else {
            running += 1
        }
        defer {
            if waiting.isEmpty { running -= 1 } else { waiting.removeFirst().resume() }
        }
        return try await body()
    }
}
