import Gateway
public import ServiceKit

extension EdgeConfig {
    /// The edge's configuration from flags, environment and config file: its listen address is
    /// its endpoint (`--endpoint`, `FRIENSO_EDGE_ENDPOINT`, `endpoints.edge`), its core the
    /// gateway's settings (rate limits, session cache) reaching the same deployment.
    /// - Throws: `ConfigError` for unreadable files.
    public init(resolved: ResolvedOptions) throws {
        var core = try GatewayConfig(resolved: resolved)
        // The edge's ZeroMQ side is a client only: the gateway's CurveZMQ server key is not its.
        core.curveSecretKey = nil
        core.endpoint = ""
        self.init(core: core, listen: resolved.endpoint)
        let section = resolved.config.edge
        tlsCertificateFile = section?.tlsCertificateFile
        tlsKeyFile = section?.tlsKeyFile
        corsOrigins = section?.corsOrigins ?? []
        if let bytes = section?.maxJSONBytes { maxJSONBytes = bytes }
        if let bytes = section?.maxPhotoBytes { maxPhotoBytes = bytes }
        if let seconds = section?.heartbeatSeconds { heartbeat = .milliseconds(Int(seconds * 1000)) }
        if let folder = section?.webRoot { webRoot = folder.isEmpty ? nil : folder }
        if listen.hasPrefix("https://"), tlsCertificateFile == nil || tlsKeyFile == nil {
            throw ConfigError("the edge listens at \(listen) but edge.tlsCertificateFile and edge.tlsKeyFile are not both set")
        }
    }
}
