public import Logging
public import Wire

/// How one member of the deployment talks to the others: CurveZMQ with its keyring (every
/// internal socket authenticated, `PlanePolicy` per request), or plaintext, which only the
/// explicit `--insecure-plaintext` flag (and tests) choose.
public struct InternalPlane: Sendable {
    /// nil: plaintext.
    public let keyring: Keyring?

    public init(keyring: Keyring?) {
        self.keyring = keyring
    }

    public static let plaintext = InternalPlane(keyring: nil)

    /// Who subscribes to whose events: a publisher admits only these members.
    public static let subscribers: [String: Set<String>] = [
        "accounts": ["gateway", "edge", "social", "alerts"],
        "social": ["accounts", "geo", "alerts", "media", "gateway", "edge"],
        "geo": ["gateway", "edge", "alerts"],
        "alerts": ["geo", "gateway", "edge"],
    ]

    /// The security of `member`'s request socket: every member of the deployment may connect;
    /// the policy then decides per method.
    public var requests: ServerSecurity { keyring?.server() ?? .plaintext }

    /// The security of `member`'s PUB socket: only its subscribers may connect.
    public func events(of member: String) -> ServerSecurity {
        keyring?.server(admitting: Self.subscribers[member] ?? []) ?? .plaintext
    }

    /// How to connect to `peer`'s sockets.
    /// - Throws: `ConfigError` when the keyring has no key for `peer`.
    public func client(of peer: String) throws -> ClientSecurity {
        guard let keyring else { return .plaintext }
        do {
            return try keyring.client(of: peer)
        } catch {
            throw ConfigError(error.description)
        }
    }

    /// A client of `peer`'s request socket at `endpoint`.
    public func client(_ peer: String, at endpoint: String, logger: Logger, options: ClientOptions = ClientOptions()) throws -> WireClient {
        var options = options
        options.security = try client(of: peer)
        return WireClient(endpoint: endpoint, options: options, logger: logger)
    }

    /// Host options binding `endpoint` for `name`'s requests on this plane.
    public func hostOptions(name: String, endpoint: String) -> HostOptions {
        var options = HostOptions(name: name, endpoint: endpoint)
        options.security = requests
        options.metrics = ServiceMetrics.exposition(for: name, plane: self)
        return options
    }

    /// `name`'s PUB socket on this plane.
    public func publisher(name: String, endpoint: String, logger: Logger) -> Publisher {
        Publisher(name: name, endpoint: endpoint, logger: logger, security: events(of: name))
    }
}
