public import Foundation
import Glibc
import ServiceKit
import Synchronization

/// A throwaway PostgreSQL server from Debian's `postgresql-15` (installed by `deploy/install-deps
/// --for-tests`): `initdb` into a folder, `pg_ctl start` on a free loopback port with its Unix
/// socket in that folder. For the tests (one per test process, `PostgresTestServer`) and for
/// `frienso-bench` (SQLite vs PostgreSQL in one run); never for a deployment, whose database is
/// the operator's (docs/deployment.md).
///
/// Authentication is real: over TCP the `frienso` role signs in with a password (SCRAM-SHA-256);
/// over the Unix socket it is trusted (for `psql`). Durability settings are PostgreSQL's defaults
/// (`fsync`, `synchronous_commit = on`), as in production.
public final class LocalPostgresServer: Sendable {
    public let port: Int
    public let folder: String
    public var socketDirectory: String { folder }
    public let password: String
    /// The postmaster's PID (pg_ctl started it: it is not this process's child).
    public var postmasterPID: pid_t { pid.withLock { $0 } }
    private let pid: Mutex<pid_t>
    let binaries: String
    /// How pg_ctl is run (as the postgres user when this process is root), and its server options.
    private let pgCtl: [String]
    private let options: String

    public static let user = "frienso"

    public struct Failure: Error, CustomStringConvertible {
        public let description: String
        init(_ description: String) { self.description = description }
    }

    /// The folder of Debian's server binaries (`FRIENSO_PG_BIN` overrides).
    public static func findBinaries() throws -> String {
        if let dir = ProcessInfo.processInfo.environment["FRIENSO_PG_BIN"], !dir.isEmpty { return dir }
        let root = "/usr/lib/postgresql"
        let versions = ((try? FileManager.default.contentsOfDirectory(atPath: root)) ?? [])
            .filter { FileManager.default.isExecutableFile(atPath: "\(root)/\($0)/bin/initdb") }
            .sorted { (Int($0) ?? 0) > (Int($1) ?? 0) }
        guard let version = versions.first else {
            throw Failure("PostgreSQL's server is not installed (no \(root)/*/bin/initdb): run deploy/install-deps --for-tests")
        }
        return "\(root)/\(version)/bin"
    }

    /// The address it listens on (loopback unless `start` was given another).
    public let host: String

    private init(port: Int, folder: String, password: String, pid: pid_t, binaries: String, pgCtl: [String], options: String,
                 host: String = "127.0.0.1") {
        self.host = host
        self.port = port
        self.folder = folder
        self.password = password
        self.pid = Mutex(pid)
        self.binaries = binaries
        self.pgCtl = pgCtl
        self.options = options
    }

    /// Makes a new cluster in a new temp folder and starts it; blocks until it takes connections
    /// (`pg_ctl -w`, at most 60 s). As root, the server runs as Debian's `postgres` user (it
    /// refuses to run as root).
    /// - Parameter tls: a certificate and its key (PEM): the server then also speaks TLS.
    /// - Parameter network: an address to listen on instead of loopback, and a command prefix
    ///   that runs the server where that address is (`ip netns exec <host>`: a database host of
    ///   a multi-host test); clients on that address's network may connect (SCRAM passwords).
    public static func start(prefix: String = "frienso-pg", tls: (certificateFile: String, keyFile: String)? = nil,
                             network: (address: String, runner: [String])? = nil) throws -> LocalPostgresServer {
        let binaries = try findBinaries()
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("\(prefix)-\(UUID().uuidString.prefix(8))").path
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        var asUser: [String] = []
        var owner: (uid_t, gid_t)?
        if geteuid() == 0 {
            guard let account = getpwnam("postgres") else { throw Failure("running as root, and there is no postgres user to run the server as") }
            owner = (account.pointee.pw_uid, account.pointee.pw_gid)
            asUser = ["/usr/bin/setpriv", "--reuid=\(account.pointee.pw_uid)", "--regid=\(account.pointee.pw_gid)", "--clear-groups", "--"]
        }
        if let (uid, gid) = owner { chown(folder, uid, gid) }
        let password = UUID().uuidString
        let passwordFile = "\(folder)/password"
        try password.write(toFile: passwordFile, atomically: true, encoding: .utf8)
        if let (uid, gid) = owner { chown(passwordFile, uid, gid) }
        let data = "\(folder)/data"
        let initdb = Spawn.run(asUser + ["\(binaries)/initdb", "-D", data, "-U", user, "--pwfile=\(passwordFile)", "-E", "UTF8",
                                         "--locale=C", "--auth-local=trust", "--auth-host=scram-sha-256", "--no-instructions"])
        try? FileManager.default.removeItem(atPath: passwordFile)
        guard initdb.status == 0 else { throw Failure("initdb failed (\(initdb.status)):\n\(initdb.output)") }
        if network != nil {
            // Clients on the server's own subnets, with a password.
            let hba = try FileHandle(forWritingTo: URL(fileURLWithPath: "\(data)/pg_hba.conf"))
            hba.seekToEndOfFile()
            hba.write(Data("host all all samenet scram-sha-256\n".utf8))
            try hba.close()
        }

        var tlsOptions = ""
        if let tls {
            // The server reads its key only when its user owns it and nobody else may read it.
            let certificate = "\(folder)/server.crt", key = "\(folder)/server.key"
            try FileManager.default.copyItem(atPath: tls.certificateFile, toPath: certificate)
            try FileManager.default.copyItem(atPath: tls.keyFile, toPath: key)
            chmod(key, 0o600)
            if let (uid, gid) = owner { chown(certificate, uid, gid); chown(key, uid, gid) }
            tlsOptions = " -c ssl=on -c ssl_cert_file=\(certificate) -c ssl_key_file=\(key)"
        }
        var lastFailure = ""
        for _ in 0..<5 {
            guard let port = Spawn.freePort() else { throw Failure("no free loopback port") }
            let address = network?.address ?? "127.0.0.1"
            let options = "-c listen_addresses=\(address) -c port=\(port) -c unix_socket_directories=\(folder) -c max_connections=300 -c shared_buffers=32MB" + tlsOptions
            let log = "\(folder)/server.log"
            let pgCtl = (network?.runner ?? []) + asUser + ["\(binaries)/pg_ctl", "-D", data, "-l", log]
            let started = Spawn.run(pgCtl + ["-o", options, "-w", "-t", "60", "start"])
            if started.status == 0, let pid = readPID(data) {
                return LocalPostgresServer(port: port, folder: folder, password: password, pid: pid, binaries: binaries, pgCtl: pgCtl, options: options,
                                           host: address)
            }
            lastFailure = "pg_ctl start failed (\(started.status)):\n\(started.output)\n\((try? String(contentsOfFile: log, encoding: .utf8)) ?? "")"
        }
        throw Failure(lastFailure)
    }

    /// The postmaster's PID, the first line of `postmaster.pid`.
    private static func readPID(_ data: String) -> pid_t? {
        guard let text = try? String(contentsOfFile: "\(data)/postmaster.pid", encoding: .utf8),
              let line = text.split(separator: "\n").first else { return nil }
        return pid_t(line.trimmingCharacters(in: .whitespaces))
    }

    /// Stops the server (fast shutdown), keeping its folder: a database host that went away.
    public func pause() throws {
        let stopped = Spawn.run(pgCtl + ["-m", "fast", "-w", "stop"])
        guard stopped.status == 0 else { throw Failure("pg_ctl stop failed: \(stopped.output)") }
    }

    /// Starts the paused server again, on the same port and folder.
    public func resume() throws {
        let started = Spawn.run(pgCtl + ["-o", options, "-w", "-t", "60", "start"])
        guard started.status == 0, let pid = Self.readPID("\(folder)/data") else { throw Failure("pg_ctl start failed: \(started.output)") }
        self.pid.withLock { $0 = pid }
    }

    /// A new, empty database; returns its name.
    public func createDatabase(_ prefix: String = "t") throws -> String {
        let name = "\(prefix)_\(UUID().uuidString.prefix(13).lowercased().replacingOccurrences(of: "-", with: ""))"
        _ = try psql("postgres", "CREATE DATABASE \(name)")
        return name
    }

    /// Runs `sql` in `database` through psql over the Unix socket. - Returns: what it printed
    /// (unaligned, tuples only), trimmed.
    public func psql(_ database: String, _ sql: String) throws -> String {
        let result = Spawn.run(["\(binaries)/psql", "-X", "-q", "-v", "ON_ERROR_STOP=1", "-h", socketDirectory, "-p", "\(port)",
                                "-U", Self.user, "-d", database, "-At", "-c", sql])
        guard result.status == 0 else { throw Failure("psql failed: \(result.output)") }
        return result.output.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// A URL a service connects with: over TCP, with the password.
    public func url(database: String) -> String {
        "postgres://\(Self.user):\(password)@\(host):\(port)/\(database)?sslmode=disable"
    }

    /// The server's log.
    public func log() -> String {
        (try? String(contentsOfFile: "\(folder)/server.log", encoding: .utf8)) ?? ""
    }

    /// Fast shutdown (SIGINT to the postmaster), waiting for it to go (at most 10 s, then
    /// SIGKILL), then removes the folder. Safe from an `atexit` handler: no allocation-heavy work
    /// beyond the folder's removal.
    public func stop() {
        Self.stop(pid: postmasterPID, folder: folder)
    }

    public static func stop(pid: pid_t, folder: String) {
        guard pid > 0 else { return }
        kill(pid, SIGINT)
        for _ in 0..<1000 where kill(pid, 0) == 0 { usleep(10_000) }
        if kill(pid, 0) == 0 { kill(pid, SIGKILL) }
        try? FileManager.default.removeItem(atPath: folder)
    }
}
