public import FriensoProto

/// The reply to a request taken on the host's reactor thread (`ReactorRequestHandler`): call it
/// (or `relay`) once, on that thread.
public struct ReactorReply {
    /// Weak: a forwarded call may end after the host's loop closed (its client closes later).
    private weak var loop: HostLoop?
    private let key: UInt64

    init(loop: HostLoop, key: UInt64) {
        self.loop = loop
        self.key = key
    }

    public func callAsFunction(_ reply: consuming Envelope) {
        loop?.answer(key, reply)
    }

    /// Answers with a reply a `WireClient` relayed (`relayOnReactor`): its status, message and
    /// payload, copied straight from the peer's message into the one sent when the client read
    /// it in place. Call it inside the completion the reply was handed to.
    public func relay(_ reply: RelayedReply) {
        loop?.answer(key, relayed: reply)
    }

    /// The same reply, for an answer that comes later on another thread (a write that waits for
    /// its commit): posted to the host's loop, which sends it on its reactor thread.
    public var fromAnyThread: LaterReply { LaterReply(commands: loop?.commands, key: key) }
}

/// A reply to a request taken on the host's reactor thread, sent from any thread, once
/// (`ReactorReply.fromAnyThread`). It goes through the loop's command queue, as a task's reply
/// does; a request whose deadline the host answered meanwhile drops it, as it drops a task's.
public struct LaterReply: Sendable {
    let commands: CommandQueue<HostCommand>?
    let key: UInt64
    /// Takes the reply instead of the loop (a keyed request's run: the host's reply cache keeps
    /// it and answers the duplicates that waited for it).
    private let taker: (@Sendable (Envelope) -> Void)?

    init(commands: CommandQueue<HostCommand>?, key: UInt64) {
        self.commands = commands
        self.key = key
        taker = nil
    }

    /// A reply for `taker`, which sends it on (through `send(_:to:)`).
    init(loop reply: LaterReply, taker: @escaping @Sendable (Envelope) -> Void) {
        commands = reply.commands
        key = reply.key
        self.taker = taker
    }

    public func callAsFunction(_ reply: consuming Envelope) {
        if let taker { return taker(reply) }
        commands?.post(.reply(key: key, envelope: consume reply))
    }

    /// Posts `reply` to the loop for the request it knows as `key` (this one, or a duplicate that
    /// waited for it).
    func send(_ reply: consuming Envelope, to key: UInt64) {
        commands?.post(.reply(key: key, envelope: consume reply))
    }
}

/// A handler that can take requests on the host's reactor thread, as they come off the socket,
/// with no task, continuation or hand-over per request: for work that never blocks, such as the
/// gateway's forwarding (checks against in-memory state, then `WireClient.sendOnReactor` on the
/// same reactor). Whatever it declines goes to `handle` on a task, as for any handler.
///
/// The host offers it a request only when its own steps have nothing to do: not `<name>.Ping`,
/// and no idempotency key while the host keeps replies (`RequestDispatcher.offersToReactor`);
/// a keyed request of a method it starts keyed (`takesKeyedOnReactor`) goes through the reply
/// cache's in-memory steps first and then to `startKeyed` (`RequestDispatcher.takeKeyed`).
/// Deadlines and a graceful stop hold as on the task path: the host answers DEADLINE_EXCEEDED
/// when a taken request's deadline passes, and waits for taken requests before it closes.
public protocol ReactorRequestHandler: RequestHandler {
    /// - Returns: true when it took the request: `reply` is then called once, on this thread,
    ///   now or later (when a forwarded call's reply arrives); false leaves it to `handle`.
    func take(_ request: IncomingRequest, reply: ReactorReply) -> Bool
    /// Whether the host should offer it requests at all (a router with no reactor routes: no).
    var takesRequestsOnReactor: Bool { get }
    /// Whether keyed requests for `method` start on the reactor while the host keeps replies
    /// (`MethodRouter.startOnReactor(_:keyed:_:)`). Default: no.
    func takesKeyedOnReactor(_ method: String) -> Bool
    /// Starts a keyed request the host's reply cache let run (`RequestDispatcher.takeKeyed`),
    /// with its scope for the storage layer; `done` once, from any thread.
    /// - Returns: false when it does not start `method`'s keyed requests (the host then runs it on a task).
    func startKeyed(_ request: IncomingRequest, scope: IdempotencyScope, done: LaterReply) -> Bool
}

extension ReactorRequestHandler {
    public var takesRequestsOnReactor: Bool { true }
    public func takesKeyedOnReactor(_ method: String) -> Bool { false }
    public func startKeyed(_ request: IncomingRequest, scope: IdempotencyScope, done: LaterReply) -> Bool { false }
}
