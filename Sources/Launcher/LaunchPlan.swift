import Foundation
public import ServiceKit

/// Which processes to start, with which arguments, from the deployment's configuration.
public struct LaunchPlan: Sendable {
    /// Every service, in start order (the gateway last: it routes to the others).
    public static let defaultOrder = ["accounts", "social", "geo", "alerts", "media", "gateway"]

    public var children: [ChildSpec]

    /// - Parameter options: passed on to every child (config file, data dir, log level).
    public init(resolved: ResolvedOptions, options: ServiceOptions, binDirectory: String) throws {
        let names = resolved.config.launch ?? Self.defaultOrder
        var shared: [String] = []
        if let config = options.config ?? resolved.environment["FRIENSO_CONFIG"] { shared += ["--config", config] }
        if let dataDir = options.dataDir { shared += ["--data-dir", dataDir] }
        if let level = options.logLevel { shared += ["--log-level", level] }
        children = try names.map { name in
            let executable = "\(binDirectory)/frienso-\(name)"
            guard FileManager.default.isExecutableFile(atPath: executable) else {
                throw ConfigError("no executable for \(name) at \(executable): build it first (swift build)")
            }
            return ChildSpec(name: name, executable: executable, arguments: shared, endpoint: resolved.endpoint(of: name))
        }
    }
}
