import CZeroMQ
public import FriensoProto
import Logging
import Synchronization

enum ClientCommand: Sendable {
    case call(ClientLoop.Pending)
    case cancel(UInt64)
    case stop
}

/// Something the peer sent that was not a reply, or a change of connection.
public enum ClientEvent: Sendable {
    case event(Envelope)
    /// The socket was reopened after the peer went silent: subscriptions must be renewed.
    case reconnected
}

/// The DEALER socket of a `WireClient`, as a component of its reactor: created on the reactor
/// thread and never leaving it.
final class ClientLoop: ReactorComponent {
    let endpoint: String
    let options: ClientOptions
    private let context: ZMQContext
    private let commands: CommandQueue<ClientCommand>
    private let finished: OneShot<Void>
    let events: AsyncStream<ClientEvent>.Continuation
    let logger: Logger
    /// Where `WireClient` finds this loop from the reactor thread; emptied when the loop closes.
    private let slot: Slot
    var socket: ZMQSocket? { didSet { polled = Self.polled(socket, monitor) } }
    /// The socket's monitor: tells at once when the connection drops (the peer's process died,
    /// its host closed it), where heartbeats would take the dead window to notice.
    private var monitor: ZMQSocket? { didSet { polled = Self.polled(socket, monitor) } }
    /// What `pollSockets` answers, made when a socket changes rather than on every loop turn.
    private var polled: [ZMQSocket] = []
    // `@exclusivity(unchecked)` on the state every request touches: this object lives on its
    // reactor's thread, no access to these properties encloses a call that could reach them
    // again (a completion runs after its call left `pending`), and the dynamic checks cost
    // about 1,500 instructions of a Wire request (issue 16, item 62).
    /// The connection dropped and nothing was heard since (the peer may be restarting).
    @exclusivity(unchecked) var disconnected = false
    /// Whether the socket has a monitor: only a client of several instances, which gains a
    /// faster failover from it. A client of one peer has nowhere else to send a call, and
    /// keeps the path it had before monitors (one full end-to-end run of the CI stalled a
    /// service's reactor for seconds after they came in, unexplained: `docs/architecture.md`).
    private let watchesConnection: Bool
    @exclusivity(unchecked) var pending = RequestTable<Pending>()
    /// No call in `pending` has an earlier deadline (one that did may have left since); nil when
    /// none was taken since the last look. The timers look through the calls only once it is
    /// reached, not on every turn (item 107).
    @exclusivity(unchecked) var earliestDeadline: Moment?
    /// Ids of pending calls not yet handed to libzmq, oldest first.
    @exclusivity(unchecked) var unsent: [UInt64] = []
    @exclusivity(unchecked) var lastHeard: Moment
    /// Set by `noteHeard` while `receive` drains the socket; `receive` then stamps `lastHeard`
    /// once, at its end: a clock read a drain, not one a reply (issue 16, item 143).
    @exclusivity(unchecked) var heardInDrain = false
    /// The command queue's other array (`handleCommands`; reactor thread only).
    @exclusivity(unchecked) var spareCommands: [ClientCommand] = []
    @exclusivity(unchecked) var lastSent: Moment
    /// Liveness is counted in checks, one per heartbeat interval, as in Paranoid Pirate: the peer
    /// is dead after `deadWindow / heartbeatInterval` checks in a row heard nothing. Counting
    /// wall time alone would blame the peer for this process's own stall: a reactor held up for
    /// two seconds (page faults on a cold binary, a starved CPU) woke, saw two seconds of silence
    /// and dropped a healthy connection whose answers were waiting to be read.
    @exclusivity(unchecked) var lastCheck: Moment
    @exclusivity(unchecked) var silentChecks = 0
    @exclusivity(unchecked) var peerDown = false
    /// The peer went silent while a call that cannot be sent again waited for its reply: the
    /// socket is kept (closing it would lose that reply for certain, and a starved or paused
    /// peer does answer late), the peer counts as down for new calls, and the socket is
    /// reopened once no such call is left and the peer is still silent.
    @exclusivity(unchecked) var holding = false
    /// The peer is one of several instances and said it is stopping (it refused a call as not
    /// started): it is out of the turn until its connection drops (the process that comes back
    /// in its place is a new instance) or the socket is reopened after a silence. Neither its
    /// heartbeats nor its replies to calls it took before draining bring it back.
    @exclusivity(unchecked) var peerStopping = false
    /// Set once a call that relays its reply was taken (`WireClient.relayOnReactor`), when this
    /// build reads replies in place right (`ReplyFields.readsAsProtobufC`): from then on replies
    /// are first read in place (`relayed`), which a client that never relays skips.
    @exclusivity(unchecked) var relaying = false
    /// The peer's latest heartbeat reply said it takes batches (`WireBatch`): calls ready
    /// together go out in one message. Unset by a new socket or a dropped connection (whatever
    /// answers next may be an older build) until a heartbeat reply says so again.
    @exclusivity(unchecked) var peerTakesBatches = false
    /// A heartbeat (whose reply tells `peerTakesBatches`) went out on this connection. A busy
    /// client sends no heartbeat of its own (its calls keep the peer hearing from it), so the
    /// first flush asks with one.
    @exclusivity(unchecked) var askedForFeatures = false
    /// A call taken on the reactor's thread waits for this turn's `tick` to go out with the
    /// others taken in the turn (only while batching: `callNow`).
    @exclusivity(unchecked) var flushDue = false
    /// `flushInBatches`'s lists, kept between flushes (empty outside it).
    @exclusivity(unchecked) var ready: [Pending] = []
    @exclusivity(unchecked) var readySizes: [Int] = []
    @exclusivity(unchecked) private var relayChecked = false
    var deadWindow: Duration
    /// `options.heartbeatInterval` in nanoseconds, compared with on every turn.
    let heartbeatNanoseconds: Int64
    private var stopping = false

    /// Where a call goes when this loop's peer is not answering: another instance's loop of the
    /// same client (on the same reactor thread). Returns false when no other instance answers.
    var handOff: ((Pending) -> Bool)?
    let health: Health

    /// Whether this loop's peer answers (reactor thread).
    var isAnswering: Bool { socket != nil && !peerDown && !disconnected && !peerStopping }

    init(endpoint: String, options: ClientOptions, context: ZMQContext, commands: CommandQueue<ClientCommand>,
         events: AsyncStream<ClientEvent>.Continuation, logger: Logger, finished: OneShot<Void>, slot: Slot, health: Health = Health(),
         watchesConnection: Bool = false) {
        self.endpoint = endpoint
        self.health = health
        self.watchesConnection = watchesConnection
        self.slot = slot
        self.finished = finished
        self.options = options
        self.context = context
        self.commands = commands
        self.events = events
        self.logger = logger
        lastHeard = .now
        lastSent = .now
        lastCheck = .now
        deadWindow = options.deadAfter
        heartbeatNanoseconds = options.heartbeatInterval.wholeNanoseconds
        openSocket()
    }

    // MARK: ReactorComponent

    func pollSockets() -> [ZMQSocket] { polled }

    private static func polled(_ socket: ZMQSocket?, _ monitor: ZMQSocket?) -> [ZMQSocket] {
        guard let socket else { return [] }
        return [socket] + (monitor.map { [$0] } ?? [])
    }

    func readable(_ index: Int) {
        if index == 1 {
            readMonitor()
            return
        }
        guard let socket else { return }
        do {
            try receive(socket)
        } catch {
            logger.error("receive failed", metadata: ["error": "\(error)", "endpoint": "\(endpoint)"])
        }
    }

    func tick(now: Moment) {
        handleCommands()
        guard socket != nil else {
            // No socket could be made (e.g. a malformed endpoint): nothing can be sent.
            for (id, request) in pending {
                pending[id] = nil
                request.fail(.unavailable("cannot connect to \(endpoint)"))
            }
            return
        }
        timers(now)
    }

    var isFinished: Bool { stopping }

    func close() {
        slot.loop = nil
        for (id, request) in pending {
            request.fail(.unavailable("client closed"))
            pending[id] = nil
        }
        // Calls posted after the last turn: answered too, and later ones are refused by `post`.
        for case .call(let request) in commands.close() {
            request.fail(.unavailable("client closed"))
        }
        socket?.stopMonitor() // before its reader closes (see `ZMQSocket.monitor`)
        monitor = nil
        socket = nil
        events.finish()
        finished.fulfil(())
    }

    // MARK: Connection

    private func openSocket() {
        do {
            let socket = try ZMQSocket(context, .dealer)
            try socket.configure(highWaterMark: options.highWaterMark, maxMessageSize: options.maxMessageSize)
            try socket.set(ZMQ_IMMEDIATE, 1) // queue nothing for a peer that is not connected
            try socket.set(ZMQ_RECONNECT_IVL, 100)
            try socket.set(ZMQ_RECONNECT_IVL_MAX, 2_000)
            try socket.secure(options.security)
            if watchesConnection { monitor = try? socket.monitor(events: ZMQ_EVENT_DISCONNECTED) }
            try socket.connect(endpoint)
            self.socket = socket
        } catch {
            logger.error("cannot open a socket", metadata: ["endpoint": "\(endpoint)", "error": "\(error)"])
            socket = nil
        }
        lastHeard = .now
        lastCheck = .now
        silentChecks = 0
        peerTakesBatches = false // until this socket's peer says so: its first heartbeat's reply
        askedForFeatures = false
        sendHeartbeat()
    }

    func canResend(_ request: Pending) -> Bool {
        request.retryable && request.attempts < options.maxAttempts
    }

    /// The peer stayed silent for the dead window. With a call in flight that cannot be sent
    /// again, the socket is kept for its reply (`holding`); otherwise it is reopened.
    func peerWentSilent() {
        guard pending.values.contains(where: { $0.sent && !canResend($0) }) else {
            reconnect()
            return
        }
        guard !holding else { return }
        holding = true
        logger.info("peer silent, keeping the socket for calls that cannot be sent again",
                    metadata: ["endpoint": "\(endpoint)", "pending": "\(pending.count)"])
        setPeerDown(true)
        redistribute()
    }

    /// Lazy Pirate: the peer went silent. Close, reopen, and resend what may be resent.
    private func reconnect() {
        logger.info("peer silent, reopening the socket", metadata: ["endpoint": "\(endpoint)", "pending": "\(pending.count)"])
        socket?.stopMonitor() // before its reader closes (see `ZMQSocket.monitor`)
        monitor = nil
        socket = nil
        disconnected = false
        holding = false
        peerStopping = false
        setPeerDown(true)
        // Back off: each silent window is longer, up to 8 × the base.
        deadWindow = min(deadWindow * 2, options.deadAfter * 8)
        openSocket()
        redistribute()
        events.yield(.reconnected)
        flushUnsent()
    }

    /// The calls of a silent peer: the resendable ones to another instance, or again to this
    /// peer. The others stay: `peerWentSilent` reopens no socket while one is in flight.
    private func redistribute() {
        for (id, request) in pending where request.sent && canResend(request) {
            request.sent = false
            if handOff?(request) == true {
                pending[id] = nil // resent to another instance
            } else {
                unsent.append(id)
            }
        }
        // Calls that never reached the peer: to another instance, or (failing fast) answered
        // now, not at their deadline.
        for (id, request) in pending where !request.sent {
            if handOff?(request) == true {
                pending[id] = nil
            } else if options.failFastWhenPeerDown {
                pending[id] = nil
                request.fail(.unavailable("\(endpoint) is not answering"))
            }
        }
        unsent.removeAll { pending[$0] == nil }
    }

    // MARK: Outbound

    private func handleCommands() {
        // The array kept as the spare the queue takes in exchange next time (item 148).
        commands.drain(keeping: &spareCommands) { drained in
            for command in drained {
                switch command {
                case .call(let request):
                    take(request)
                case .cancel(let id):
                    if let request = pending.removeValue(forKey: id) {
                        request.fail(.unavailable("call cancelled"))
                    }
                case .stop:
                    stopping = true
                }
            }
        }
        flushUnsent()
    }

    /// A call from this reactor's own thread (`WireClient.sendOnReactor`, `relayOnReactor`): taken and sent now,
    /// without the command queue's hand-over to the next turn.
    /// While batching, it goes out at the end of the turn, with the turn's other calls.
    func callNow(_ request: Pending) {
        take(request)
        if batching, unsent.count < WireBatch.members {
            flushDue = true
        } else {
            flushUnsent()
        }
    }

    private func take(_ request: Pending) {
        if peerDown || disconnected || peerStopping {
            if handOff?(request) == true { return }
            if peerDown && options.failFastWhenPeerDown {
                request.fail(.unavailable("\(endpoint) is not answering"))
                return
            }
        }
        if request.relays, !relayChecked { startRelaying() }
        keep(request)
    }

    /// Adds a call to `pending`, to be sent by the next `flushUnsent`.
    private func keep(_ request: Pending) {
        pending[request.envelope.requestId] = request
        unsent.append(request.envelope.requestId)
        if earliestDeadline.map({ request.deadline < $0 }) ?? true { earliestDeadline = request.deadline }
    }

    /// The first call that relays: replies are read in place from now on, if this build reads
    /// them right; if not, they are decoded (as before relays) and the log says why.
    private func startRelaying() {
        relayChecked = true
        relaying = ReplyFields.readsAsProtobufC
        if !relaying {
            logger.error("this build does not read replies in place as protobuf-c does (a compiler fault): relayed replies are decoded instead",
                         metadata: ["endpoint": "\(endpoint)"])
        }
    }

    /// A call another instance's loop could not get answered (reactor thread): sent from here.
    func adopt(_ request: Pending) {
        request.sent = false
        if request.relays, !relayChecked { startRelaying() }
        keep(request)
        flushUnsent()
    }

    func setPeerDown(_ down: Bool) {
        peerDown = down
        health.answering.store(isAnswering, ordering: .relaxed)
    }

    /// The peer said it is stopping: out of the turn (`peerStopping`; the connection's drop or a
    /// reopened socket clears it).
    func peerSaidStopping() {
        guard !peerStopping else { return }
        peerStopping = true
        health.answering.store(isAnswering, ordering: .relaxed)
        logger.info("instance stopping: calls go to the other instances", metadata: ["endpoint": "\(endpoint)"])
    }

    /// Reads the monitor: a dropped connection loses every call sent on it. The resendable ones
    /// go to another instance, or wait to be sent again when the connection is back (libzmq
    /// reconnects by itself: a restarted peer answers them); the others fail now, UNAVAILABLE,
    /// not at their deadline. New calls go to another instance until the peer is heard again.
    private func readMonitor() {
        guard let monitor else { return }
        var dropped = false
        while let event = try? monitor.monitorEvent() {
            if event == ZMQ_EVENT_DISCONNECTED { dropped = true }
        }
        guard dropped else { return }
        logger.info("connection to the peer dropped", metadata: ["endpoint": "\(endpoint)", "pending": "\(pending.count)"])
        disconnected = true
        peerStopping = false // whatever answers here next is a new instance
        peerTakesBatches = false // and may be an older build: until its heartbeat reply says so
        askedForFeatures = false
        health.answering.store(isAnswering, ordering: .relaxed)
        for (id, request) in pending {
            if request.sent && !canResend(request) {
                pending[id] = nil
                request.fail(.unavailable("lost the connection to \(endpoint) while waiting for the reply"))
                continue
            }
            let wasSent = request.sent
            request.sent = false
            if handOff?(request) == true {
                pending[id] = nil
            } else if wasSent {
                unsent.append(id)
            }
        }
        unsent.removeAll { pending[$0] == nil }
        flushUnsent()
    }
}
