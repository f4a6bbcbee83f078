public import Storage
import Foundation
import Logging
public import Testing

/// The storage engines services run on: every test that stores something runs on both.
public enum Engine: String, CaseIterable, Sendable, CustomTestStringConvertible {
    case sqlite, postgres
    public var testDescription: String { rawValue }
}

/// Where one test's data of one service lives, across "restarts": a folder (SQLite) or a
/// schema of its own in the test process's PostgreSQL database (`PostgresTestServer.database`),
/// as a deployment keeps each service in a schema of one database.
public struct TestStorage: Sendable {
    public let engine: Engine
    /// The service.
    public let service: String
    /// SQLite: the data folder. PostgreSQL: a scratch folder.
    public let directory: String
    public let postgresDatabase: String?
    /// The service's schema on PostgreSQL: the service's name and a suffix of this storage's own
    /// (`accounts_1f3a…`), so that every test's tables are apart in the one database.
    public let schema: String
    private let temp: TemporaryDirectory

    public static func fresh(_ engine: Engine, service: String) async throws -> TestStorage {
        let temp = try TemporaryDirectory("frienso-\(service)")
        switch engine {
        case .sqlite:
            return TestStorage(engine: engine, service: service, directory: temp.path, postgresDatabase: nil, schema: service, temp: temp)
        case .postgres:
            let database = try await PostgresTestServer.database()
            let schema = "\(service)_\(UUID().uuidString.prefix(8).lowercased())"
            return TestStorage(engine: engine, service: service, directory: temp.path, postgresDatabase: database, schema: schema, temp: temp)
        }
    }

    /// Opens the engine as a service would (PostgreSQL: its pool started, the server answered);
    /// `StorageEngine.close()` ends it.
    public func open() async throws -> StorageEngine {
        switch engine {
        case .sqlite:
            return .sqlite(directory: directory)
        case .postgres:
            let server = try await PostgresTestServer.shared()
            let settings = try PostgresSettings(url: server.url(database: postgresDatabase!), schema: schema)
            var logger = Logger(label: "test.postgres")
            logger.logLevel = .warning
            return .postgres(try await PostgresServiceDatabase.open(settings, logger: logger))
        }
    }

    /// Runs `sql` through psql in the service's schema (PostgreSQL), for checks of what is stored.
    public func psql(_ sql: String) async throws -> String {
        try await PostgresTestServer.shared().psql(postgresDatabase!, "SET search_path = \(schema); \(sql)")
    }

    /// What of `texts` is still stored: SQLite, the bytes of every file in the data folder
    /// (`Residue`); PostgreSQL, every row of every table of the schema as text, and its bytes
    /// (bytea columns print as hex).
    public func residue(_ texts: [String]) async throws -> [String] {
        switch engine {
        case .sqlite:
            return Residue.find(texts.map { .text($0) }, under: directory)
        case .postgres:
            let tables = try await psql("SELECT table_name FROM information_schema.tables WHERE table_schema = '\(schema)' ORDER BY 1")
                .split(separator: "\n").map(String.init)
            var found: [String] = []
            for table in tables {
                for text in texts {
                    let hex = text.utf8.map { String(format: "%02x", $0) }.joined()
                    let n = try await psql("SELECT count(*) FROM \(schema).\(table) r WHERE r::text LIKE '%\(text)%' OR r::text LIKE '%\(hex)%'")
                    if n != "0" { found.append("\(table): \(n) row(s) with \"\(text)\"") }
                }
            }
            return found
        }
    }

    /// Deletes the folder, and hands the database back emptied (PostgreSQL).
    public func remove() async {
        temp.remove()
        if let postgresDatabase, let server = try? await PostgresTestServer.shared() {
            // Not waiting on a connection left open in a transaction: the schema then stays (the
            // server's folder goes at the end of the run).
            _ = try? await server.psql(postgresDatabase, "SET lock_timeout = '5s'; DROP SCHEMA IF EXISTS \(schema) CASCADE")
        }
    }
}

extension TestStorage {
    /// Runs `body` with `service`'s storage on `engine` open: `given` when a test restarts the
    /// service on the same data (left in place), else a fresh one, removed after.
    public static func withOpen<T>(_ engine: Engine, given: TestStorage?, service: String,
                                   _ body: (TestStorage, StorageEngine) async throws -> T) async throws -> T {
        let fresh = given == nil ? try await TestStorage.fresh(engine, service: service) : nil
        let storage = given ?? fresh!
        do {
            let opened = try await storage.open()
            do {
                let result = try await body(storage, opened)
                await opened.close()
                await fresh?.remove()
                return result
            } catch {
                await opened.close()
                throw error
            }
        } catch {
            await fresh?.remove()
            throw error
        }
    }
}
