import FriensoProto

/// What a member of the deployment may ask of a service, decided for every request from the
/// member name its CurveZMQ key was admitted under (the ZAP handler's `User-Id`):
/// - `<service>.Ping`: any member (the launcher's readiness probe, the gateway's `frienso ping`);
/// - `<service>.Metrics`: the launcher only (which also proves it with the scrape token);
/// - an internal method: only the members its contract names (`// frienso:internal(geo, alerts)`);
/// - a client method (public or authenticated): only the front doors (the ZeroMQ gateway and the
///   HTTP edge), the members that stamp a client's user id, session and address after checking
///   them, by the same rules (`GatewayCore`).
/// A request the policy refuses is answered PERMISSION_DENIED and never reaches a handler.
public struct PlanePolicy: Sendable {
    /// The member that serves ZeroMQ clients.
    public static let gateway = "gateway"
    /// The member that serves HTTP/JSON and WebSocket clients.
    public static let edge = "edge"
    /// The members that serve clients.
    public static let frontDoors: [String] = [gateway, edge]

    /// Every contract method by its `KnownMethod` ordinal (nil: a member's `Ping` or `Metrics`,
    /// or the gateway's own): found without hashing the name (item 110).
    static let methods: [AnyRPCMethod?] = {
        var methods = [AnyRPCMethod?](repeating: nil, count: KnownMethod.count)
        for method in ProtoIndex.methods {
            guard let known = KnownMethod(method.fullName) else { preconditionFailure("\(method.fullName) is not in KnownMethod's index") }
            methods[known.ordinal] = method
        }
        return methods
    }()

    /// The host's service name (whose Ping any member may call).
    public let service: String
    private let ping: OwnMethod, metrics: OwnMethod
    /// The member that reads every member's metrics.
    public static let launcher = "launcher"

    public init(service: String) {
        self.service = service
        ping = OwnMethod("\(service).Ping")
        metrics = OwnMethod("\(service).Metrics")
    }

    /// - Returns: nil when `member` may call `method`, else the error to answer.
    public func check(member: String, method: String) -> RPCError? {
        check(member: member, method: method, known: KnownMethod(method))
    }

    /// The same, `method` found in `KnownMethod`'s index already (`known`, nil when it is not there).
    func check(member: String, method: String, known: KnownMethod?) -> RPCError? {
        if ping.matches(known, method) { return nil }
        if metrics.matches(known, method) {
            return member == Self.launcher ? nil : .permissionDenied("\(method) answers the launcher only, not \(member)")
        }
        // A method no contract names: the router answers INVALID_ARGUMENT, as to anyone.
        guard let known, let rpc = Self.methods[known.ordinal] else { return nil }
        switch rpc.access {
        case .internal:
            if rpc.callers.contains(member) { return nil }
            return .permissionDenied("\(method) is internal; \(member) may not call it")
        case .public, .authenticated:
            // Compared one by one: two names, where a set hashed the member's.
            if Self.frontDoors.contains(member) { return nil }
            return .permissionDenied("\(method) is a client method: only the gateway and the edge call it, not \(member)")
        }
    }
}
