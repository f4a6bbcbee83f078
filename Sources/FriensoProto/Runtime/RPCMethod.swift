/// Who may call a method, as declared in the contract (`// frienso:public`, `// frienso:internal(…)`).
public enum MethodAccess: String, Sendable, Hashable {
    /// Callable by a client without a session (register, login, ping).
    case `public`
    /// Callable by a client with a valid session.
    case authenticated
    /// Callable only on internal sockets; the gateway refuses it from clients.
    case `internal`
}

/// A typed handle on one rpc: its wire name (`accounts.Login`) and its request and response types.
public struct RPCMethod<Request: ProtoMessage, Response: ProtoMessage>: Sendable, Hashable {
    public let service: String
    public let name: String
    public let access: MethodAccess
    /// For internal methods: the deployment members that may call it (`frienso:internal(geo, alerts)`).
    public let callers: [String]
    /// A read (`frienso:read`): it changes nothing a caller sees, so a try whose reply was lost
    /// (a peer gone silent, an instance that died) may be sent again without an idempotency
    /// key. An audited read (a friend's location) is logged for each try its service answers.
    public let readOnly: Bool

    public init(service: String, name: String, access: MethodAccess, callers: [String] = [], readOnly: Bool = false) {
        self.service = service
        self.name = name
        self.access = access
        self.callers = callers
        self.readOnly = readOnly
        fullName = "\(service).\(name)"
    }

    /// The method string carried in `Envelope.method`: made once (every call sends it; built
    /// per call it was a `String` allocation on the gateway's path for each request).
    public let fullName: String

    public var erased: AnyRPCMethod { AnyRPCMethod(service: service, name: name, access: access, callers: callers, readOnly: readOnly) }
}

/// An rpc without its types, for tables (the gateway's allow-list, the internal plane's policy, docs).
public struct AnyRPCMethod: Sendable, Hashable {
    public let service: String
    public let name: String
    public let access: MethodAccess
    /// For internal methods: the deployment members that may call it.
    public let callers: [String]
    /// A read, safe to send again (`RPCMethod.readOnly`).
    public let readOnly: Bool

    public init(service: String, name: String, access: MethodAccess, callers: [String] = [], readOnly: Bool = false) {
        self.service = service
        self.name = name
        self.access = access
        self.callers = callers
        self.readOnly = readOnly
        fullName = "\(service).\(name)"
    }

    public let fullName: String
}

/// Methods outside the service contracts: every host's Ping, and the gateway's own.
public enum CommonMethods {
    public static func ping(_ service: String) -> RPCMethod<CommonV1.PingRequest, CommonV1.PingResponse> {
        RPCMethod(service: service, name: "Ping", access: .public, readOnly: true)
    }

    /// The member's metrics in Prometheus's text format, for the launcher (its scrape token in the request).
    public static func metrics(_ service: String) -> RPCMethod<CommonV1.MetricsRequest, CommonV1.MetricsResponse> {
        RPCMethod(service: service, name: "Metrics", access: .public, readOnly: true)
    }

    /// Push this connection the caller's live events (renew as the reply says).
    public static let subscribe = RPCMethod<CommonV1.SubscribeRequest, CommonV1.SubscribeResponse>(
        service: "gateway", name: "Subscribe", access: .authenticated)
    public static let unsubscribe = RPCMethod<CommonV1.UnsubscribeRequest, CommonV1.UnsubscribeResponse>(
        service: "gateway", name: "Unsubscribe", access: .authenticated)
}
