import Foundation

/// Where a service's PostgreSQL database is, parsed from a libpq-style URL
/// (`postgres://user[:password]@host[:port]/database[?sslmode=disable|prefer|require][&host=/socket/dir]`,
/// and `pool_max`, `sslrootcert`, `prepared_statements=on|off`).
/// Each service keeps its tables in a schema of its own (`accounts`, `social`, …), so one
/// database can hold a whole deployment, and two instances of a service share one schema.
public struct PostgresSettings: Sendable, Equatable {
    public enum TLSMode: String, Sendable, Equatable { case disable, prefer, require }

    public var host: String
    public var port: Int
    /// A Unix socket folder (`?host=/run/postgresql`, as libpq), used instead of TCP when set.
    public var socketDirectory: String?
    public var username: String
    public var password: String?
    public var database: String
    public var tls: TLSMode
    /// The service's schema: every table the service creates, and its migrations' record.
    public var schema: String
    /// Connections the service keeps at most.
    public var maximumConnections: Int = 16
    /// PEM certificates to trust for the server's certificate instead of the system's roots
    /// (`?sslrootcert=/path`, as libpq): a database with a certificate from a private CA.
    public var caFile: String?
    /// Whether statements run prepared, once per connection (`PostgresConnection.prepared`;
    /// `?prepared_statements=off` runs each from its text, for a connection pooler in transaction
    /// mode that does not keep them: PgBouncer before 1.21, or without `max_prepared_statements`).
    public var preparedStatements = true

    public init(host: String = "127.0.0.1", port: Int = 5432, socketDirectory: String? = nil, username: String,
                password: String? = nil, database: String, tls: TLSMode = .prefer, schema: String) {
        self.host = host
        self.port = port
        self.socketDirectory = socketDirectory
        self.username = username
        self.password = password
        self.database = database
        self.tls = tls
        self.schema = schema
    }

    public struct Invalid: Error, CustomStringConvertible {
        public let description: String
    }

    /// Parses `url` for the service whose schema is `schema`.
    /// - Throws: `Invalid` naming what is wrong (never the password).
    public init(url: String, schema: String) throws {
        guard let components = URLComponents(string: url), let scheme = components.scheme,
              scheme == "postgres" || scheme == "postgresql" else {
            throw Invalid(description: "a PostgreSQL URL starts with postgres:// (got \(Self.redact(url)))")
        }
        guard Self.isIdentifier(schema) else { throw Invalid(description: "schema \"\(schema)\" is not a plain lower-case name") }
        let path = components.path.hasPrefix("/") ? String(components.path.dropFirst()) : components.path
        guard !path.isEmpty, !path.contains("/") else {
            throw Invalid(description: "the PostgreSQL URL names no database (postgres://user@host:port/DATABASE): \(Self.redact(url))")
        }
        guard let user = components.user, !user.isEmpty else {
            throw Invalid(description: "the PostgreSQL URL names no user (postgres://USER@host:port/database): \(Self.redact(url))")
        }
        var settings = PostgresSettings(host: components.host ?? "", port: components.port ?? 5432, username: user.removingPercentEncoding ?? user,
                                        password: components.password.map { $0.removingPercentEncoding ?? $0 },
                                        database: path.removingPercentEncoding ?? path, schema: schema)
        for item in components.queryItems ?? [] {
            switch item.name {
            case "sslmode":
                switch item.value ?? "" {
                case "disable": settings.tls = .disable
                case "prefer", "allow": settings.tls = .prefer
                case "require", "verify-ca", "verify-full": settings.tls = .require
                case let other: throw Invalid(description: "sslmode \"\(other)\" is not one of disable, prefer, require")
                }
            case "host":
                guard let value = item.value, value.hasPrefix("/") else { throw Invalid(description: "?host= is a Unix socket folder (an absolute path)") }
                settings.socketDirectory = value
            case "sslrootcert":
                guard let value = item.value, value.hasPrefix("/") else { throw Invalid(description: "sslrootcert is a PEM file (an absolute path)") }
                settings.caFile = value
            case "pool_max":
                guard let value = item.value.flatMap(Int.init), (1...1000).contains(value) else {
                    throw Invalid(description: "pool_max is a number of connections, 1 to 1000")
                }
                settings.maximumConnections = value
            case "prepared_statements":
                switch item.value ?? "" {
                case "on": settings.preparedStatements = true
                case "off": settings.preparedStatements = false
                case let other: throw Invalid(description: "prepared_statements \"\(other)\" is not one of on, off")
                }
            default:
                throw Invalid(description: "unknown PostgreSQL URL parameter \"\(item.name)\" (known: sslmode, sslrootcert, host, pool_max, prepared_statements)")
            }
        }
        if settings.socketDirectory == nil && settings.host.isEmpty {
            throw Invalid(description: "the PostgreSQL URL names no host: \(Self.redact(url))")
        }
        self = settings
    }

    /// The Unix socket path libpq would use: `<folder>/.s.PGSQL.<port>`.
    public var unixSocketPath: String? { socketDirectory.map { "\($0)/.s.PGSQL.\(port)" } }

    /// Where it points, for logs and errors: never the password.
    public var description: String {
        "postgres://\(username)@\(socketDirectory.map { "[\($0)]" } ?? host):\(port)/\(database) schema \(schema)"
    }

    /// `url` with any password replaced by `***`.
    public static func redact(_ url: String) -> String {
        guard var components = URLComponents(string: url), components.password != nil else { return url }
        components.password = "***"
        return components.string ?? "(a PostgreSQL URL)"
    }

    /// A schema name safe to splice into SQL: lower-case ASCII letters, digits and `_`, not
    /// starting with a digit, at most 63 bytes (PostgreSQL's identifier limit).
    public static func isIdentifier(_ name: String) -> Bool {
        guard let first = name.utf8.first, !(48...57).contains(first), name.utf8.count <= 63 else { return false }
        return name.utf8.allSatisfy { (97...122).contains($0) || (48...57).contains($0) || $0 == 95 }
    }
}

/// Where a service keeps its data: the embedded default, or PostgreSQL.
public enum StorageEngine: Sendable {
    /// A SQLite file per service in this folder.
    case sqlite(directory: String)
    /// The service's schema in this PostgreSQL database (opened, its pool running).
    case postgres(PostgresServiceDatabase)
}
