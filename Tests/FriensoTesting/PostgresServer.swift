public import PostgresHarness
import Glibc
import Storage

/// The test process's PostgreSQL server (`LocalPostgresServer`): started on first use, shared by
/// every test of the process (each takes a database of its own), stopped by its PID when the
/// process exits.
public enum PostgresTestServer {
    public static let user = LocalPostgresServer.user

    /// The server for this test process (started on first call).
    public static func shared() async throws -> LocalPostgresServer {
        try await Starter.instance.server()
    }

    private actor Starter {
        static let instance = Starter()
        private var started: Task<LocalPostgresServer, any Error>?

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
    /// A database for one test's storage: one an earlier test handed back (`recycleDatabase`) if
    /// there is one, else a new one. Measured on 2026-11-28: the in-process suites made 189
    /// databases and dropped 180, at 0.4 s a `CREATE DATABASE` and 0.6 s a `DROP DATABASE`
    /// (two at a time, see `createDatabase`): the psql queue was busy for 100 of the run's 160 s,
    /// and the PostgreSQL half of every engine test waited in it.
    public func takeDatabase() async throws -> String {
        if let name = await RecycledDatabases.shared.take() { return name }
        return try await createDatabase()
    }

    /// Hands `name` back for another test, emptied: its connections ended and every schema of its
    /// own dropped (the services keep everything in their schema). A database with anything in
    /// `public`, or that does not empty cleanly, is dropped instead.
    public func recycleDatabase(_ name: String) async {
        let emptied = try? await psql(name, """
            SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid();
            DO $$
            DECLARE s text;
            BEGIN
              IF EXISTS (SELECT 1 FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = 'public') THEN
                RAISE EXCEPTION 'public is not empty';
              END IF;
              FOR s IN SELECT nspname FROM pg_namespace
                       WHERE nspname NOT IN ('public', 'information_schema') AND nspname NOT LIKE 'pg\\_%' LOOP
                EXECUTE format('DROP SCHEMA %I CASCADE', s);
              END LOOP;
            END $$;
            """)
        if emptied != nil {
            await RecycledDatabases.shared.give(name)
        } else {
            _ = try? await psql("postgres", "DROP DATABASE IF EXISTS \(name) WITH (FORCE)")
        }
    }

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

/// Databases handed back by tests, emptied, for the next test to take.
private actor RecycledDatabases {
    static let shared = RecycledDatabases()
    private var free: [String] = []

    func take() -> String? { free.popLast() }
    func give(_ name: String) { free.append(name) }
}
