public enum HandlerExecution: Sendable {
    case reactor
    case pool
}

/// How a `ServiceHost` binds and behaves.
public struct HostOptions: Sendable {
    /// The service name: `Ping` is answered as `<name>.Ping`, and logs carry it.
    public var name: String
    /// e.g. `tcp://127.0.0.1:7101`, or `tcp://127.0.0.1:*` for an ephemeral port.
    public var endpoint: String
    public var highWaterMark: Int32 = 10_000
    /// Frames larger than this are refused by libzmq (the peer is disconnected).
    public var maxMessageSize: Int64 = 4 << 20
    /// Requests being handled at once; past it new requests get RESOURCE_EXHAUSTED.
    public var maxInFlight: Int = 4_096
    /// How many handler tasks wait between requests for the next one (`HandlerTasks`): a request
    /// that finds one waiting runs on it rather than on a new task. More requests than this at
    /// once still get a task each; those past this number end when their handlers return.
    public var parkedHandlerTasks: Int = 256
    /// How long a graceful shutdown waits for handlers before it stops anyway.
    public var drainTimeout: Duration = .seconds(10)
    /// How long the closed socket may keep sending replies still queued in libzmq (LINGER on
    /// close; every socket runs with LINGER 0 otherwise, which would drop the last replies).
    public var closeLinger: Duration = .seconds(1)
    /// How long a stopping host keeps its socket open after its last reply before closing it.
    /// The client's DEALER (`ZMQ_IMMEDIATE`) drops what it has received but not yet read when its
    /// peer disconnects, so a reply sent just before the close could be lost to a client whose
    /// thread had not got to it; found by `ReactorHandlerTests` (one run in a few lost it). Peers
    /// answered after draining began are asked instead (`KIND_GOODBYE`, `farewellTimeout`): a
    /// grace is a guess at how late a busy peer reads, which a loaded machine can outlast.
    public var closeGrace: Duration = .milliseconds(100)
    /// How long a stopping host waits for the peers it answered while draining to answer its
    /// goodbye (each proves it read its replies); a peer that does not is logged and given up.
    public var farewellTimeout: Duration = .seconds(3)
    public var version: String = FriensoVersion.current
    /// Where handlers run. `.reactor` (the default) runs them on the host's reactor thread: no
    /// thread hop per request, but handlers share that one thread, so they must not block it.
    /// `.pool` runs them on Swift's global pool: for CPU-heavy handlers that should use every core.
    public var handlerExecution: HandlerExecution = .reactor
    /// Who may connect. With CurveZMQ admitting deployment members (`Keyring.server()`), every
    /// request is also checked against `PlanePolicy` for the member that sent it. `.plaintext`
    /// believes whoever reaches the port: only for tests and an explicit debugging flag.
    public var security: ServerSecurity = .plaintext
    /// Whether each request carries its TCP peer's address (`IncomingRequest.peerAddress`). It is
    /// read from libzmq per request (a property lookup and a string: about 400 instructions), so
    /// only a host that limits by address asks (the gateway's front door); elsewhere it is empty.
    public var keepsPeerAddress = false
    /// Whether the host takes several requests in one message (`WireBatch`) and says so in its
    /// heartbeat replies, so that clients of this build send them. A front door for clients of
    /// any build (the gateway's client socket) keeps to one envelope a message.
    public var takesBatches = WireBatch.enabledByEnvironment
    /// What `<name>.Metrics` answers the launcher; nil: the host has no metrics to give (NOT_FOUND).
    public var metrics: MetricsExposition?

    public init(name: String, endpoint: String) {
        self.name = name
        self.endpoint = endpoint
    }
}
