public import FriensoProto

/// How a `WireClient` times out, retries and watches its peer.
public struct ClientOptions: Sendable {
    /// Deadline for a call that names none.
    public var defaultDeadline: Duration = .seconds(5)
    /// A heartbeat goes out when nothing else was sent for this long.
    public var heartbeatInterval: Duration = .milliseconds(500)
    /// The peer is dead after this many intervals without hearing anything from it; the socket is
    /// then closed and reopened, and retryable requests are sent again.
    public var liveness: Int = 3
    /// How many times a retryable request is sent at most (first send included).
    public var maxAttempts: Int = 3
    public var highWaterMark: Int32 = 10_000
    /// Frames larger than this from the peer are refused.
    public var maxMessageSize: Int64 = 64 << 20
    /// When the peer is known to be down, fail new calls at once with UNAVAILABLE instead of
    /// waiting for the deadline.
    public var failFastWhenPeerDown = true
    /// How the client authenticates to its server: plain TCP, or CurveZMQ trusting the server's
    /// public key (Z85) with this client's key pair (a deployment member's, or a fresh anonymous one).
    public var security: ClientSecurity = .plaintext
    /// Where the client's typed calls are recorded (`WireClient.call`): the process's metrics,
    /// or a test's own.
    public var metrics: PeerCallMetrics = .shared

    public init() {}

    /// Options that connect with `security`.
    public init(security: ClientSecurity) {
        self.security = security
    }

    var deadAfter: Duration { heartbeatInterval * liveness }
}

/// Per-call choices.
public struct CallOptions: Sendable {
    public var deadline: Duration?
    public var sessionToken: String = ""
    /// Set on mutations: the server replays its stored reply on a retry, so the call may be resent.
    public var idempotencyKey: String = ""
    /// Internal hops only.
    public var callerUserID: UInt64 = 0
    public var clientAddress: String = ""
    /// Internal hops only: the caller's session as resolved by the gateway.
    public var sessionID: [UInt8] = []
    /// A call that is not a read by contract and may still safely be sent again after a
    /// reconnect (a chunk at a fixed offset). Implied by an idempotency key and by
    /// `RPCMethod.readOnly` (`mayResend`).
    public var idempotent = false

    public init(deadline: Duration? = nil, sessionToken: String = "", idempotencyKey: String = "",
                callerUserID: UInt64 = 0, clientAddress: String = "", sessionID: [UInt8] = [], idempotent: Bool = false) {
        self.sessionID = sessionID
        self.deadline = deadline
        self.sessionToken = sessionToken
        self.idempotencyKey = idempotencyKey
        self.callerUserID = callerUserID
        self.clientAddress = clientAddress
        self.idempotent = idempotent
    }

    /// Whether a call of `method` with these options may be sent again when its reply is lost:
    /// a read by contract, a call marked idempotent, or one under an idempotency key (which its
    /// service answers once).
    public func mayResend<Request, Response>(_ method: RPCMethod<Request, Response>) -> Bool {
        method.readOnly || idempotent || !idempotencyKey.isEmpty
    }
}
