public import Wire

/// How the gateway binds, where the services are, and how hard it limits clients.
public struct GatewayConfig: Sendable {
    /// The client-facing endpoint.
    public var endpoint: String
    /// Request endpoints of the services, by name (`accounts`, `social`, …). A service missing
    /// here answers UNAVAILABLE.
    public var services: [String: String]
    /// PUB endpoints whose `viewer.<id>` events are relayed to connected clients.
    public var eventSources: [String: String] = [:]
    /// Accounts' PUB endpoint: session revocations drop cached sessions at once (nil: only the
    /// cache's TTL and this gateway's own logouts do).
    public var sessionEvents: String?
    /// Sustained requests per second per session (or per client address before login), and burst.
    public var requestsPerSecond: Double = 50
    public var burst: Double = 100
    /// How long a resolved session is trusted before accounts is asked again.
    public var sessionCacheTTL: Duration = .seconds(5)
    /// A subscription lapses when the client has not renewed it for this long.
    public var subscriptionTTL: Duration = .seconds(30)
    /// How often clients are told to renew.
    public var subscriptionRenewal: Duration = .seconds(10)
    /// Largest frame a client may send (libzmq drops that client's connection past it, only theirs).
    public var maxMessageSize: Int64 = 16 << 20
    /// Largest request a service accepts (its host's frame cap, `HostOptions.maxMessageSize`).
    /// The gateway answers a bigger one INVALID_ARGUMENT itself: forwarded, it would make the
    /// service drop the gateway's connection, and every other client's request on it.
    public var serviceMaxMessageSize: Int64 = 4 << 20
    /// CurveZMQ secret key for the client socket (Z85); nil for plain TCP.
    public var curveSecretKey: String?
    /// The internal plane: the gateway's member keys, used for every connection to a service and
    /// every event subscription. nil is plaintext (tests, and the explicit debugging flag).
    public var keyring: Keyring?
    /// What `gateway.Metrics` answers the launcher (nil: no metrics).
    public var metrics: MetricsExposition?

    public init(endpoint: String, services: [String: String]) {
        self.endpoint = endpoint
        self.services = services
    }
}

extension GatewayConfig {
    /// How the gateway connects to `member`'s sockets: its member key when it has a keyring,
    /// plaintext without one; nil when the keyring lacks that member (it cannot be reached securely,
    /// so it is "not deployed here").
    func security(toward member: String) -> ClientSecurity? {
        guard let keyring else { return .plaintext }
        return try? keyring.client(of: member)
    }

    /// The services and event sources every deployment may have; each is reached only if it exists.
    public static let serviceNames = ["accounts", "social", "geo", "alerts", "media"]
    public static let publisherNames = ["social", "geo", "alerts"]
}
