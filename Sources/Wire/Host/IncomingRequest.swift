public import FriensoProto
public import Logging

/// Where a request came from on a ROUTER socket: enough to address the reply or a later push.
public struct PeerIdentity: Sendable, Hashable {
    public var routingID: [UInt8]
    /// REQ peers put an empty frame between identity and payload; the reply must carry it too.
    public var hasDelimiter: Bool

    public init(routingID: [UInt8], hasDelimiter: Bool) {
        self.routingID = routingID
        self.hasDelimiter = hasDelimiter
    }

    func frames(_ payload: [UInt8]) -> [[UInt8]] {
        prefix + [payload]
    }

    /// The frames before the payload.
    var prefix: [[UInt8]] { hasDelimiter ? [routingID, []] : [routingID] }
}

/// A decoded request as the socket thread hands it to the handlers.
public struct IncomingRequest: Sendable {
    /// Set once, with `knownMethod` (so that the two always agree).
    public internal(set) var envelope: Envelope
    /// The envelope's method as `KnownMethod` numbers it (nil: a name this build does not know),
    /// for the tables it is looked up in (`MethodTable`).
    public internal(set) var knownMethod: KnownMethod?
    public var peer: PeerIdentity
    /// The TCP peer's address as libzmq reports it (the bare IP); empty for inproc/ipc, and on a
    /// host whose options do not keep it (`HostOptions.keepsPeerAddress`: only the gateway does).
    public var peerAddress: String
    /// The deployment member whose key the peer authenticated with (empty on a plaintext socket
    /// or a socket open to any client).
    public var peerMember: String
    public var deadline: Moment
    /// The host's own key for this request (unique per host run).
    var key: UInt64

    /// A request made in process (a test's `RouterClient`): no socket, no peer; `key` names it to
    /// `RequestDispatcher.dispatch`'s `deliver`.
    public init(local envelope: Envelope, key: UInt64, deadline: Moment) {
        self.init(envelope: envelope, peer: PeerIdentity(routingID: [], hasDelimiter: false), peerAddress: "", deadline: deadline, key: key)
    }

    /// A request that reached another front door (the HTTP edge): `peer` names its connection
    /// (for live events), `peerAddress` its client as "host:port" (for per-address limits).
    public init(frontDoor envelope: Envelope, peer: PeerIdentity, peerAddress: String, deadline: Moment) {
        self.init(envelope: envelope, peer: peer, peerAddress: peerAddress, deadline: deadline, key: 0)
    }

    /// What `Array.forEachMovedOut` leaves in a batch's slots: empty strings and arrays, nothing
    /// to retain; never handled.
    static var filler: IncomingRequest {
        IncomingRequest(envelope: Envelope(), knownMethod: nil, peer: PeerIdentity(routingID: [], hasDelimiter: false), peerAddress: "",
                        deadline: fillerMoment, key: 0)
    }

    private static let fillerMoment = Moment(nanoseconds: 0)

    /// A request whose method is looked up in `KnownMethod`'s index here (the tests' and the
    /// front doors' requests; a host's come with it found by decoding).
    init(envelope: Envelope, peer: PeerIdentity, peerAddress: String, peerMember: String = "",
         deadline: Moment, key: UInt64) {
        self.init(envelope: envelope, knownMethod: KnownMethod(envelope.method), peer: peer, peerAddress: peerAddress,
                  peerMember: peerMember, deadline: deadline, key: key)
    }

    /// - Parameter knownMethod: `envelope`'s method as decoding found it (`Envelope.decoded(_:knownMethod:)`).
    init(envelope: Envelope, knownMethod: KnownMethod?, peer: PeerIdentity, peerAddress: String, peerMember: String = "",
         deadline: Moment, key: UInt64) {
        self.envelope = envelope
        self.knownMethod = knownMethod
        self.peer = peer
        self.peerAddress = peerAddress
        self.peerMember = peerMember
        self.deadline = deadline
        self.key = key
    }

    /// The deadline to give a call this request makes to another service: what is left, less a
    /// margin (a tenth, at most 100 ms) so that the downstream outcome (UNAVAILABLE, say) reaches
    /// this host before its own deadline fires and answers DEADLINE_EXCEEDED instead.
    public var downstreamBudget: Duration { Deadlines.downstreamBudget(until: deadline) }
}

enum Deadlines {
    static func downstreamBudget(until deadline: Moment) -> Duration {
        // In whole nanoseconds: `Duration / Int` divides 128-bit integers in the runtime, about
        // 560 instructions of every request the gateway forwards (issue 16, item 68).
        let left = Moment.now.nanoseconds(to: deadline)
        return .nanoseconds(max(1_000_000, left - min(left / 10, 100_000_000)))
    }
}

/// What a handler sees of a request besides its payload.
public struct RequestContext: Sendable {
    public var requestID: UInt64
    public var method: String
    /// The authenticated caller, stamped by the gateway; 0 when there is none.
    public var callerUserID: UInt64
    public var idempotencyKey: String
    public var deadline: Moment
    /// The client's address as the gateway saw it, for throttling.
    public var clientAddress: String
    /// The caller's session as the gateway resolved it (empty when there is none).
    public var sessionID: [UInt8]
    /// A logger carrying `request-id` and `method` metadata.
    public var logger: Logger
    /// The idempotent request being served, when the host keeps replies and the request has a
    /// key: the same `IdempotencyScope.current` binds on a task. A handler started on the host's
    /// reactor (`MethodRouter.startOnReactor(_:keyed:_:)`) has no task to bind it to, and hands
    /// it to the storage layer itself.
    public var idempotency: IdempotencyScope?

    public var isExpired: Bool { Moment.now >= deadline }

    /// The deadline for a call this handler makes to another service (see `IncomingRequest.downstreamBudget`).
    public var downstreamBudget: Duration { Deadlines.downstreamBudget(until: deadline) }

    /// The caller's id, or UNAUTHENTICATED when the request carries none.
    public func requireCaller() throws(RPCError) -> UInt64 {
        guard callerUserID != 0 else { throw RPCError.unauthenticated("this method needs a session") }
        return callerUserID
    }
}

/// Turns a request into a reply. `MethodRouter` is the usual one; the gateway has its own.
public protocol RequestHandler: Sendable {
    /// - Returns: the reply envelope (its request id and method are set by the host).
    func handle(_ request: IncomingRequest, logger: Logger) async -> Envelope
    /// Whether a keyed request for `method` may run before the reply cache reads the durable
    /// store (`MethodRouter.claimFirst`). Default: no.
    func claimsFirst(_ method: String) -> Bool
}

extension RequestHandler {
    public func claimsFirst(_ method: String) -> Bool { false }
}
