public import ServiceLifecycle

/// Keeps the providers' HTTP client for the life of the service and closes its connections at
/// a graceful stop (after the delivery loop, which the service group stops first).
public struct ProviderClientLifecycle: Service {
    let http: ProviderHTTP

    public init(_ http: ProviderHTTP) {
        self.http = http
    }

    public func run() async throws {
        try? await gracefulShutdown()
        await http.shutdown()
    }
}
