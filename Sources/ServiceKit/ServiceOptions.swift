public import ArgumentParser
public import Foundation
public import Logging
import Wire

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

    @Option(help: "The deployment keyring folder: this member's secret key and every member's public key (env FRIENSO_KEYRING; frienso-launch makes one in run/keys).")
    public var keyring: String?

    @Flag(help: "DEBUGGING ONLY: no CurveZMQ on internal sockets; any process that reaches a port is believed.")
    public var insecurePlaintext = false

    @Option(help: "Which instance of the service this process is, when its endpoints list several (comma-separated): 1 binds the first (env FRIENSO_INSTANCE; default 1).")
    public var instance: Int?

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
        let formatName = environment["FRIENSO_LOG_FORMAT"] ?? file.logFormat ?? "text"
        guard let format = LogFormat(rawValue: formatName.lowercased()) else {
            throw ConfigError("unknown log format \"\(formatName)\": text or json")
        }
        let baseDir = dataDir ?? environment["FRIENSO_DATA_DIR"] ?? file.dataDir ?? Defaults.dataDir
        let instanceText = instance.map(String.init) ?? environment["FRIENSO_INSTANCE"] ?? "1"
        guard let number = Int(instanceText), number >= 1 else { throw ConfigError("instance \"\(instanceText)\": a number from 1") }
        let endpoints = endpoint ?? environment[envKey] ?? file.endpoints?[service] ?? Defaults.endpoints[service] ?? "tcp://127.0.0.1:*"
        let list = EndpointList.split(endpoints)
        guard number <= max(1, list.count) else {
            throw ConfigError("\(service) instance \(number): its endpoints list \(list.count) (\(endpoints))")
        }
        return ResolvedOptions(
            service: service,
            config: file,
            dataDirectory: URL(fileURLWithPath: baseDir).appendingPathComponent(service).path,
            endpoint: list.isEmpty ? endpoints : list[number - 1],
            instance: number,
            instances: max(1, list.count),
            logLevel: level,
            logFormat: format,
            endpointFile: endpointFile,
            keyring: keyring ?? environment["FRIENSO_KEYRING"] ?? file.keyring,
            insecurePlaintext: insecurePlaintext,
            environment: environment)
    }
}

/// Options after resolution.
public struct ResolvedOptions: Sendable {
    public var service: String
    public var config: FriensoConfig
    /// `<data-dir>/<service>`, created on first use.
    public var dataDirectory: String
    /// `<data-dir>`: every service's folder is in it.
    public var dataRoot: String { (dataDirectory as NSString).deletingLastPathComponent }
    /// The endpoint this process binds: its instance's of the service's list.
    public var endpoint: String
    /// Which instance this process is (1…), and how many the deployment's endpoints list.
    public var instance: Int = 1
    public var instances: Int = 1
    public var logLevel: Logger.Level
    /// `logFormat` in the config, or FRIENSO_LOG_FORMAT: text (default) or json.
    public var logFormat: LogFormat = .text
    public var endpointFile: String?
    /// The keyring folder, when one was named.
    public var keyring: String?
    public var insecurePlaintext: Bool
    public var environment: [String: String]

    /// Where another member listens for requests, as this deployment configures it (environment,
    /// then config file). Never an embedded default: a service given some endpoints but not this
    /// one would otherwise reach whatever runs on the default port, another deployment's
    /// service perhaps. `frienso-launch` passes every endpoint to every member.
    /// - Throws: `ConfigError` naming both settings.
    public func peer(_ other: String) throws -> String {
        let key = "FRIENSO_\(other.uppercased())_ENDPOINT"
        guard let endpoint = environment[key] ?? config.endpoints?[other], !endpoint.isEmpty else {
            throw ConfigError("\(service) needs \(other)'s request endpoint: set \(key) or endpoints.\(other) in the config file (frienso-launch sets every endpoint)")
        }
        return endpoint
    }

    /// A peer's request endpoint when this deployment has one, else nil (not an embedded default):
    /// for the gateway, to which a service the deployment lacks is "not deployed here".
    public func configuredPeer(_ other: String) -> String? {
        (environment["FRIENSO_\(other.uppercased())_ENDPOINT"] ?? config.endpoints?[other]).flatMap { $0.isEmpty ? nil : $0 }
    }

    public func configuredPeerEvents(_ other: String) -> String? {
        (environment["FRIENSO_\(other.uppercased())_EVENTS"] ?? config.eventEndpoints?[other]).flatMap { $0.isEmpty ? nil : $0 }
    }

    /// Where another member publishes events; never an embedded default (see `peer`).
    public func peerEvents(_ other: String) throws -> String {
        let key = "FRIENSO_\(other.uppercased())_EVENTS"
        guard let endpoint = environment[key] ?? config.eventEndpoints?[other], !endpoint.isEmpty else {
            throw ConfigError("\(service) needs \(other)'s event endpoint: set \(key) or eventEndpoints.\(other) in the config file (frienso-launch sets every endpoint)")
        }
        return endpoint
    }

    /// Where `member` listens in the whole deployment this configuration describes: the
    /// environment, the config file, then the embedded defaults (the launcher's view).
    public func deploymentEndpoint(of member: String) -> String {
        environment["FRIENSO_\(member.uppercased())_ENDPOINT"] ?? config.endpoints?[member] ?? Defaults.endpoints[member] ?? ""
    }

    public func deploymentEventEndpoint(of member: String) -> String {
        environment["FRIENSO_\(member.uppercased())_EVENTS"] ?? config.eventEndpoints?[member] ?? Defaults.eventEndpoints[member] ?? ""
    }

    /// Where this process publishes: its instance's of the service's event endpoints.
    /// - Throws: `ConfigError` when the event endpoints list fewer instances than the request endpoints.
    public func ownEventEndpoint() throws -> String {
        let all = deploymentEventEndpoint(of: service)
        let list = EndpointList.split(all)
        guard list.count == instances || (instances == 1 && list.isEmpty) else {
            throw ConfigError("\(service) lists \(instances) request endpoints but \(list.count) event endpoints (\(all)): one of each per instance")
        }
        return list.isEmpty ? all : list[instance - 1]
    }

    /// Refuses to start a service the deployment lists several instances of, when it cannot run
    /// as one of several (`reason`: why not).
    public func refuseSeveralInstances(_ reason: String) throws {
        guard instances == 1 else {
            throw ConfigError("\(service) is listed with \(instances) instances, but \(reason): list one endpoint for it")
        }
    }

    /// The secret key (Z85) of the gateway's client socket, from the file `gateway.curveSecretKeyFile`
    /// (or `FRIENSO_GATEWAY_CURVE_SECRET_FILE`) names; nil when the client socket is plain TCP.
    /// - Throws: `ConfigError` when the file cannot be read or holds no CurveZMQ key.
    public func gatewayClientSecretKey() throws -> String? {
        guard let file = config.gateway?.curveSecretKeyFile ?? environment["FRIENSO_GATEWAY_CURVE_SECRET_FILE"] else { return nil }
        guard let key = try? String(contentsOfFile: file, encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines),
              CurveKeys.isKey(key) else {
            throw ConfigError("cannot read the gateway's CurveZMQ secret key file \(file)")
        }
        return key
    }

    /// This member's internal plane: its keyring (CurveZMQ), or plaintext when started with
    /// `--insecure-plaintext`, said loudly in the log.
    /// - Throws: `ConfigError` saying how to get keys when there is no keyring.
    /// Also bootstraps the process's metrics (`ServiceMetrics`) as `service`.
    public func plane(logger: Logger) throws -> InternalPlane {
        ServiceMetrics.bootstrap(service: service, environment: environment)
        if insecurePlaintext {
            logger.critical("INSECURE: --insecure-plaintext: internal sockets are plain TCP and any process that reaches them is believed (user ids, internal methods). For debugging only; never on a network.",
                            metadata: ["service": "\(service)"])
            return .plaintext
        }
        guard let keyring else {
            throw ConfigError("\(service) has no keyring: internal sockets need CurveZMQ keys. Start the deployment with frienso-launch (it creates run/keys), or pass --keyring DIR (env FRIENSO_KEYRING) naming that folder; --insecure-plaintext disables authentication for debugging only")
        }
        return InternalPlane(keyring: try KeyringFiles.load(at: keyring, member: service))
    }

    public func createDataDirectory() throws {
        try FileManager.default.createDirectory(atPath: dataDirectory, withIntermediateDirectories: true)
    }
}
