public import ServiceKit

extension GatewayConfig {
    /// A front door's configuration (the gateway's, or the edge's core) from flags, environment and config file.
    /// - Throws: `ConfigError` when the CurveZMQ key file cannot be read.
    public init(resolved: ResolvedOptions) throws {
        // Only the services this deployment names (frienso-launch names every one it starts);
        // another is "not deployed here", never reached at a default port.
        self.init(endpoint: resolved.endpoint,
                  services: Dictionary(uniqueKeysWithValues: Self.serviceNames.compactMap { name in resolved.configuredPeer(name).map { (name, $0) } }))
        eventSources = Dictionary(uniqueKeysWithValues: Self.publisherNames.compactMap { name in resolved.configuredPeerEvents(name).map { (name, $0) } })
        sessionEvents = resolved.configuredPeerEvents("accounts")
        let section = resolved.config.gateway
        if let rate = section?.requestsPerSecond { requestsPerSecond = rate }
        if let burst = section?.burst { self.burst = burst }
        if let seconds = section?.sessionCacheSeconds { sessionCacheTTL = .milliseconds(Int(seconds * 1000)) }
        curveSecretKey = try resolved.gatewayClientSecretKey()
    }
}
