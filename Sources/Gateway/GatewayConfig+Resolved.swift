import Foundation
public import ServiceKit

extension GatewayConfig {
    /// The services and event sources every deployment may have; each is reached only if it exists.
    public static let serviceNames = ["accounts", "social", "geo", "alerts", "media"]
    public static let publisherNames = ["social", "geo", "alerts"]

    /// The gateway's configuration from flags, environment and config file.
    /// - Throws: `ConfigError` when the CurveZMQ key file cannot be read.
    public init(resolved: ResolvedOptions) throws {
        self.init(endpoint: resolved.endpoint,
                  services: Dictionary(uniqueKeysWithValues: Self.serviceNames.map { ($0, resolved.endpoint(of: $0)) }))
        eventSources = Dictionary(uniqueKeysWithValues: Self.publisherNames.map { ($0, resolved.eventEndpoint(of: $0)) })
        let section = resolved.config.gateway
        if let rate = section?.requestsPerSecond { requestsPerSecond = rate }
        if let burst = section?.burst { self.burst = burst }
        if let seconds = section?.sessionCacheSeconds { sessionCacheTTL = .milliseconds(Int(seconds * 1000)) }
        if let file = section?.curveSecretKeyFile ?? resolved.environment["FRIENSO_GATEWAY_CURVE_SECRET_FILE"] {
            guard let key = try? String(contentsOfFile: file, encoding: .utf8) else {
                throw ConfigError("cannot read the gateway's CurveZMQ secret key file \(file)")
            }
            curveSecretKey = key.trimmingCharacters(in: .whitespacesAndNewlines)
        }
    }
}
