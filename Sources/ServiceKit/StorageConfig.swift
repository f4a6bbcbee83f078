public import Logging
public import Storage
import Foundation

/// Where a service keeps its data, in the configuration file:
///
///     "storage": {"kind": "postgres", "url": "postgres://frienso@db.internal:5432/frienso?sslmode=require",
///                 "passwordFile": "/etc/frienso/postgres-password"}
///
/// at the top (every service) or in a service's section (that service). `kind` is `sqlite` (the
/// default: a file per service in the data folder) or `postgres` (the service's schema, named
/// after it, in that database). The password comes from a file, never from the configuration
/// (a URL with a password in it is refused), and never into a log line.
public struct StorageSection: Codable, Sendable, Equatable {
    public var kind: String?
    public var url: String?
    public var passwordFile: String?

    public init(kind: String? = nil, url: String? = nil, passwordFile: String? = nil) {
        self.kind = kind
        self.url = url
        self.passwordFile = passwordFile
    }
}

extension FriensoConfig {
    /// The storage configured for `service`: its own section's, else the deployment's.
    public func storage(for service: String) -> StorageSection? {
        let own: StorageSection? = switch service {
        case "accounts": accounts?.storage
        case "social": social?.storage
        case "geo": geo?.storage
        case "alerts": alerts?.storage
        case "media": media?.storage
        default: nil
        }
        return own ?? storage
    }
}

/// A storage configuration resolved for one service, before anything is opened.
public enum StorageChoice: Sendable, Equatable {
    case sqlite(directory: String)
    case postgres(PostgresSettings)

    /// For logs: the engine and where (never a password).
    public var description: String {
        switch self {
        case .sqlite(let directory): "sqlite in \(directory)"
        case .postgres(let settings): settings.description
        }
    }
}

extension ResolvedOptions {
    /// Reads `service`'s storage configuration (the password file included).
    /// - Throws: `ConfigError` naming what is wrong.
    public func storageChoice(for service: String, logger: Logger) throws -> StorageChoice {
        guard let section = config.storage(for: service) else { return .sqlite(directory: dataDirectory) }
        switch section.kind ?? "sqlite" {
        case "sqlite":
            guard section.url == nil else { throw ConfigError("storage for \(service): a url is only for kind \"postgres\"") }
            return .sqlite(directory: dataDirectory)
        case "postgres":
            guard let url = section.url else { throw ConfigError("storage for \(service): kind \"postgres\" needs a url") }
            var settings: PostgresSettings
            do { settings = try PostgresSettings(url: url, schema: service) } catch {
                throw ConfigError("storage for \(service): \(error)")
            }
            guard settings.password == nil else {
                throw ConfigError("storage for \(service): the url carries a password; put it in a file named by passwordFile (chmod 600)")
            }
            if let file = section.passwordFile {
                settings.password = try SecretFile.read(file, what: "storage for \(service)", logger: logger)
            }
            return .postgres(settings)
        case let other:
            throw ConfigError("storage for \(service): unknown kind \"\(other)\" (sqlite or postgres)")
        }
    }

    /// Opens what `storageChoice` resolved: PostgreSQL's pool is started and the server answered.
    public func openStorage(for service: String, logger: Logger) async throws -> StorageEngine {
        let choice = try storageChoice(for: service, logger: logger)
        switch choice {
        case .sqlite(let directory):
            logger.info("storage", metadata: ["engine": "sqlite", "at": "\(directory)"])
            try createDataDirectory()
            return .sqlite(directory: directory)
        case .postgres(let settings):
            logger.info("storage", metadata: ["engine": "postgres", "at": "\(settings.description)"])
            return .postgres(try await PostgresServiceDatabase.open(settings, logger: logger))
        }
    }
}

extension ResolvedOptions {
    /// For a service whose instances share everything through its database (accounts, social):
    /// several instances need PostgreSQL; says which instance this is when there are several.
    public func refuseSeveralInstances(on storage: StorageEngine, logger: Logger) throws {
        if case .sqlite = storage {
            try refuseSeveralInstances("instances of \(service) share their data through PostgreSQL (storage kind \"postgres\"), not a SQLite file")
        }
        if instances > 1 { logger.info("instance", metadata: ["instance": "\(instance)", "of": "\(instances)"]) }
    }

    /// Opens `service`'s storage, refuses several instances unless it is PostgreSQL, runs `body`
    /// with it and closes it, however `body` ends.
    public func withStorage(for service: String, logger: Logger, _ body: (StorageEngine) async throws -> Void) async throws {
        let storage = try await openStorage(for: service, logger: logger)
        do {
            try refuseSeveralInstances(on: storage, logger: logger)
            try await body(storage)
        } catch {
            await storage.close()
            throw error
        }
        await storage.close()
    }
}

extension StorageEngine {
    /// Closes PostgreSQL's pool (nothing for SQLite).
    public func close() async {
        if case .postgres(let database) = self { await database.close() }
    }
}
