public import PostgresHarness
import Glibc

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
            let task = Task.detached {
                let server = try LocalPostgresServer.start()
                StopAtExit.register(server)
                return server
            }
            started = task
            return try await task.value
        }
    }
}

extension LocalPostgresServer {
    /// `createDatabase` off the cooperative pool (psql runs to its end).
    public func createDatabase(_ prefix: String = "t") async throws -> String {
        try await Task.detached { try self.createDatabase(prefix) }.value
    }

    /// `psql` off the cooperative pool.
    public func psql(_ database: String, _ sql: String) async throws -> String {
        try await Task.detached { try self.psql(database, sql) }.value
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
