public import ArgumentParser
public import Foundation
public import Logging

/// Options every service executable takes. Each value is resolved as: flag, then environment
/// (`FRIENSO_…`), then the config file (`--config` or `FRIENSO_CONFIG`), then the embedded default.
public struct ServiceOptions: ParsableArguments, Sendable {
    @Option(help: "JSON config file (env FRIENSO_CONFIG).")
    public var config: String?

    @Option(help: "Directory for this service's data (env FRIENSO_DATA_DIR; default ./run/data).")
    public var dataDir: String?

    @Option(help: "Endpoint to bind for requests, e.g. tcp://127.0.0.1:7101 or tcp://127.0.0.1:* (env FRIENSO_<SERVICE>_ENDPOINT).")
    public var endpoint: String?

    @Option(help: "trace, debug, info, notice, warning, error or critical (env FRIENSO_LOG_LEVEL; default info).")
    public var logLevel: String?

    @Option(help: "Write the bound endpoint to this file once listening (for launchers and tests).")
    public var endpointFile: String?

    public init() {}

    /// Resolves options for `service` against the environment and the config file.
    public func resolve(service: String, environment: [String: String] = ProcessInfo.processInfo.environment) throws -> ResolvedOptions {
        let configPath = config ?? environment["FRIENSO_CONFIG"]
        let file = try configPath.map(FriensoConfig.load) ?? FriensoConfig()
        let envKey = "FRIENSO_\(service.uppercased())_ENDPOINT"
        let levelName = logLevel ?? environment["FRIENSO_LOG_LEVEL"] ?? file.logLevel ?? "info"
        guard let level = Logger.Level(rawValue: levelName.lowercased()) else {
            throw ConfigError("unknown log level \"\(levelName)\"")
        }
        let baseDir = dataDir ?? environment["FRIENSO_DATA_DIR"] ?? file.dataDir ?? Defaults.dataDir
        return ResolvedOptions(
            service: service,
            config: file,
            dataDirectory: URL(fileURLWithPath: baseDir).appendingPathComponent(service).path,
            endpoint: endpoint ?? environment[envKey] ?? file.endpoints?[service] ?? Defaults.endpoints[service] ?? "tcp://127.0.0.1:*",
            logLevel: level,
            endpointFile: endpointFile,
            environment: environment)
    }
}

/// Options after resolution.
public struct ResolvedOptions: Sendable {
    public var service: String
    public var config: FriensoConfig
    /// `<data-dir>/<service>`, created on first use.
    public var dataDirectory: String
    public var endpoint: String
    public var logLevel: Logger.Level
    public var endpointFile: String?
    public var environment: [String: String]

    /// Where another service listens, as this deployment configures it.
    public func endpoint(of other: String) -> String {
        environment["FRIENSO_\(other.uppercased())_ENDPOINT"] ?? config.endpoints?[other] ?? Defaults.endpoints[other] ?? ""
    }

    public func eventEndpoint(of other: String) -> String {
        environment["FRIENSO_\(other.uppercased())_EVENTS"] ?? config.eventEndpoints?[other] ?? Defaults.eventEndpoints[other] ?? ""
    }

    public func createDataDirectory() throws {
        try FileManager.default.createDirectory(atPath: dataDirectory, withIntermediateDirectories: true)
    }
}
