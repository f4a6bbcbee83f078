import CZeroMQ
import FriensoProto
import Logging
public import Synchronization

/// Messages from async code to the host's socket thread.
enum HostCommand: Sendable {
    /// The reply to the request the host knows as `key`.
    case reply(key: UInt64, envelope: Envelope)
    /// An unsolicited message to a peer (gateway events).
    case push(PeerIdentity, [UInt8])
    /// Stop taking requests: answer new ones UNAVAILABLE and end the request stream.
    case drain
    /// Send what is queued, close the socket and end the thread.
    case stop
}

/// Counters the socket thread keeps, readable from anywhere.
public final class HostCounters: Sendable {
    /// Every message off the socket: requests, heartbeats and whatever else arrives.
    public let received = Atomic<Int>(0)
    /// Requests only (envelopes of kind REQUEST, refused ones included): what a test counts to say
    /// "nobody called this service", which heartbeats must not disturb.
    public let requests = Atomic<Int>(0)
    public let replied = Atomic<Int>(0)
    /// Frames that were not a decodable envelope of a known version (answered when possible).
    public let malformed = Atomic<Int>(0)
    /// Messages dropped without a reply (no identity, wrong kind, reply after the deadline).
    public let dropped = Atomic<Int>(0)
    public let deadlineExceeded = Atomic<Int>(0)
    /// Requests a deployment member sent that the internal plane's policy does not allow it.
    public let refused = Atomic<Int>(0)
    /// Requests a `ReactorRequestHandler` took on the socket's thread (no task).
    public let onReactor = Atomic<Int>(0)
    /// Replies sent as relayed, their fields copied from a peer's reply read in place
    /// (`ReactorReply.relay`; one the relaying client decoded or made is not counted).
    public let relayed = Atomic<Int>(0)
    /// Messages that were batch frames (`WireBatch`), and the batches of replies sent.
    public let batchesReceived = Atomic<Int>(0), batchesSent = Atomic<Int>(0)
    /// Goodbyes a stopping host sent, each asking a peer it answered to confirm it read it.
    public let goodbyes = Atomic<Int>(0)
    /// Handler tasks started: a request that found a parked one ran on it instead (`HandlerTasks`).
    public let handlerTasks = Atomic<Int>(0)

    public init() {}
}

/// The ROUTER socket of a `ServiceHost`, as a component of its reactor: created on the reactor
/// thread and never leaving it.
final class HostLoop: ReactorComponent {
    struct InFlight {
        var peer: PeerIdentity
        var requestID: UInt64
        var method: String
        /// `method` in `KnownMethod`'s index, for the metrics.
        var knownMethod: KnownMethod?
        var deadline: Moment
        /// When it arrived (its reply's latency is measured from here).
        var arrived: Moment
        /// Taken by the reactor handler: the loop must not close before it is answered.
        var onReactor = false
        /// It came in a batch: its reply may go in one (`PendingReplies`).
        var coalesce = false
    }

    private let options: HostOptions
    let socket: ZMQSocket
    let commands: CommandQueue<HostCommand>
    private let finished: OneShot<Void>
    let requests: AsyncStream<[IncomingRequest]>.Continuation
    // `@exclusivity(unchecked)` on the state every request touches: this object lives on its
    // reactor's thread, no access to these properties encloses a call that could reach them
    // again (a reply is sent after its request left `inFlight`), and the dynamic checks cost
    // about 1,500 instructions of a Wire request (issue 16, item 62).
    /// Requests accepted in this turn, handed over together when the turn's reads are done
    /// (one stream element and one task wake-up per batch, not per request).
    @exclusivity(unchecked) private var accepted: [IncomingRequest] = []
    let counters: HostCounters
    let logger: Logger
    @exclusivity(unchecked) var inFlight = RequestTable<InFlight>()
    @exclusivity(unchecked) private var nextKey: UInt64 = 0
    @exclusivity(unchecked) var draining = false
    var stopping = false
    @exclusivity(unchecked) var nextDeadline: Moment?
    /// Set when the socket admits deployment members only: each request is checked for its sender.
    private let policy: PlanePolicy?
    private let dispatcher: RequestDispatcher
    private let reactorHandler: (any ReactorRequestHandler)?
    /// Requests the reactor handler took and has not answered yet.
    @exclusivity(unchecked) var takenOnReactor = 0
    /// When the last reply went out, and (once stopping with nothing left to answer) when to close.
    @exclusivity(unchecked) var lastReplyAt: Moment?
    private var closeAt: Moment?
    private var closing = false
    /// The command queue's other array (`handleCommands`; reactor thread only).
    @exclusivity(unchecked) var spareCommands: [HostCommand] = []
    /// The goodbyes of a stopping host: it closes once every peer it answered while draining has
    /// confirmed reading its replies, however late that peer's thread gets to them.
    var farewells = Farewells()
    let metrics = RequestMetrics()
    /// Replies made this turn for peers that send batches, one batch per peer, sent when the
    /// turn's work is done (`flushReplies`): the first `repliesPending` are in use, the rest kept
    /// for their storage.
    @exclusivity(unchecked) var pendingReplies: [PendingReplies] = []
    @exclusivity(unchecked) var repliesPending = 0

    /// Binds the ROUTER socket. - Returns: the loop and the bound endpoint.
    init(
        options: HostOptions, context: ZMQContext, commands: CommandQueue<HostCommand>,
        requests: AsyncStream<[IncomingRequest]>.Continuation, counters: HostCounters, logger: Logger,
        finished: OneShot<Void>, dispatcher: RequestDispatcher
    ) throws(ZMQError) {
        self.options = options
        self.dispatcher = dispatcher
        reactorHandler = dispatcher.reactorHandler
        self.commands = commands
        self.finished = finished
        self.requests = requests
        self.counters = counters
        self.logger = logger
        if case .curve(_, .members) = options.security {
            policy = PlanePolicy(service: options.name)
        } else {
            policy = nil
        }
        socket = try ZMQSocket(context, .router)
        try socket.configure(highWaterMark: options.highWaterMark, maxMessageSize: options.maxMessageSize)
        try socket.set(ZMQ_ROUTER_HANDOVER, 1)
        // A send to a peer that has gone fails (EHOSTUNREACH) instead of vanishing: a stopping
        // host does not wait for the answer to a goodbye nobody received.
        try socket.set(ZMQ_ROUTER_MANDATORY, 1)
        try socket.secure(options.security)
    }

    func bind() throws(ZMQError) -> String {
        try socket.bind(options.endpoint)
    }

    // MARK: ReactorComponent

    func pollSockets() -> [ZMQSocket] { polled }
    /// Made once: the reactor asks on every loop turn.
    private lazy var polled = [socket]

    func readable(_ index: Int) {
        do {
            try receiveBatch()
        } catch {
            logger.error("receive failed", metadata: ["error": "\(error)"])
        }
    }

    func tick(now: Moment) {
        handleCommands()
        expireDeadlines(now)
        // Before any goodbye: a peer's answer to one must come after the replies it asks about.
        flushReplies()
        if stopping, takenOnReactor == 0, closeAt == nil, farewellsAnswered(now) {
            // Replies to peers not asked (sent before draining began) get `closeGrace` to be read.
            closeAt = lastReplyAt.map { max(now, $0.advanced(by: options.closeGrace)) } ?? now
        }
        // Decided here, so that `isFinished` holds for the whole turn (a clock read there could
        // change its answer between the reactor's question and what it does with it).
        if let closeAt, now >= closeAt { closing = true }
    }

    func nextWakeup() -> Moment? {
        // Replies made after this turn's `tick` (another component's): sent on the next turn, at once.
        if repliesPending > 0 { return .now }
        let next = closeAt ?? farewells.nextRetry
        guard let next else { return nextDeadline }
        return min(next, nextDeadline ?? next)
    }

    /// Sends the goodbyes due. - Returns: whether every peer answered while draining has
    /// answered its goodbye (or `farewellTimeout` passed).
    private func farewellsAnswered(_ now: Moment) -> Bool {
        let (done, givenUp) = farewells.ask(now: now, timeout: options.farewellTimeout) { peer, token in
            let goodbye = Envelope(version: WireProtocol.version, kind: .goodbye, requestId: token)
            guard (try? socket.send(routingID: peer.routingID, delimited: peer.hasDelimiter, packing: goodbye, dontWait: true)) == true else {
                return false
            }
            counters.goodbyes.add(1, ordering: .relaxed)
            return true
        }
        if givenUp > 0 {
            logger.warning("closing with goodbyes unanswered: their last replies may be lost", metadata: ["peers": "\(givenUp)"])
        }
        return done
    }

    /// Stopped, every request taken on this thread answered (or expired), and the grace after
    /// the last reply over (as of this turn's `tick`).
    var isFinished: Bool { closing }

    func close() {
        flushReplies()
        // Replies sent in the last turn may still sit in libzmq's queue: let them go out.
        try? socket.set(ZMQ_LINGER, Int32(clamping: options.closeLinger.wholeMilliseconds))
        requests.finish()
        finished.fulfil(())
    }

    // MARK: Inbound

    private func receiveBatch() throws(ZMQError) {
        defer { handOver() }
        // Take what is queued, but yield to the command side now and then.
        for _ in 0..<256 {
            // The envelope is decoded in libzmq's memory: the request's bytes are not copied
            // first; of the frames before it, only the routing id is kept, and whether the
            // second (a REQ peer's delimiter) was empty.
            var routingID: [UInt8] = [], delimiterEmpty = true
            let received = try socket.receive(dontWait: true, prefixFrame: { index, bytes in
                if index == 0 { routingID = Array(bytes) } else if index == 1 { delimiterEmpty = bytes.isEmpty }
            }, lastFrame: { message in
                counters.received.add(1, ordering: .relaxed)
                handleInbound(routingID: routingID, prefixCount: message.prefixCount, delimiterEmpty: delimiterEmpty, message)
            })
            guard received else { return }
        }
    }

    private func handOver() {
        guard !accepted.isEmpty else { return }
        requests.yield(accepted)
        accepted = []
    }

    /// One message off the socket, in libzmq's memory (`message` is valid during this call only):
    /// an envelope, or a batch frame of them (`WireBatch`) when this host takes batches.
    private func handleInbound(routingID: [UInt8], prefixCount: Int, delimiterEmpty: Bool, _ message: ZMQSocket.Received) {
        guard prefixCount == 1 || (prefixCount == 2 && delimiterEmpty) else {
            // No way to tell identity from payload: nothing to answer.
            counters.malformed.add(1, ordering: .relaxed)
            counters.dropped.add(1, ordering: .relaxed)
            logger.debug("dropped a message with \(prefixCount + 1) frames")
            return
        }
        let peer = PeerIdentity(routingID: routingID, hasDelimiter: prefixCount == 2)
        guard options.takesBatches, WireBatch.isBatch(message.bytes) else {
            return handleEnvelope(message.bytes, from: peer, message, coalesce: false, member: nil)
        }
        // One sender for the whole batch: its member name read once, not per request.
        let member = policy == nil ? nil : message.userID
        guard WireBatch.forEachRecord(in: message.bytes, { handleEnvelope($0, from: peer, message, coalesce: true, member: member) }) else {
            counters.malformed.add(1, ordering: .relaxed)
            send(to: peer, Envelope(version: WireProtocol.version, kind: .reply, status: .invalidArgument,
                                    statusMessage: "malformed batch frame: not 1 to \(WireBatch.mostMembersTaken) length-delimited envelopes"))
            return
        }
        counters.batchesReceived.add(1, ordering: .relaxed)
        metrics.batchesIn.increment()
    }

    /// One envelope from `peer` (`bytes`: the message's, or one member of its batch).
    /// - Parameters:
    ///   - coalesce: it came in a batch: its reply may go in one.
    ///   - member: the sender's member name when the caller read it already (a batch's).
    private func handleEnvelope(_ bytes: UnsafeRawBufferPointer, from peer: PeerIdentity, _ message: ZMQSocket.Received, coalesce: Bool,
                                member knownMember: String?) {
        let envelope: Envelope
        var knownMethod: KnownMethod?
        do {
            envelope = try Envelope.decoded(bytes, knownMethod: &knownMethod)
        } catch {
            counters.malformed.add(1, ordering: .relaxed)
            send(to: peer, Envelope(version: WireProtocol.version, kind: .reply, status: .invalidArgument,
                                    statusMessage: "malformed envelope: not a frienso.common.v1.Envelope"), coalesce: coalesce)
            return
        }
        guard envelope.version == WireProtocol.version else {
            counters.malformed.add(1, ordering: .relaxed)
            send(to: peer, envelope.reply(status: .invalidArgument,
                                         message: "unsupported protocol version \(envelope.version); this host speaks \(WireProtocol.version)"),
                 coalesce: coalesce)
            return
        }
        switch envelope.kind {
        case .heartbeat:
            // Says whether this host takes batches: a client sends them only once told so.
            send(to: peer, Envelope(version: WireProtocol.version, kind: .heartbeat, requestId: envelope.requestId,
                                    features: options.takesBatches ? WireBatch.feature : 0))
        case .goodbye:
            // The peer read everything up to that goodbye; an older goodbye's answer proves less.
            farewells.answered(peer, token: envelope.requestId)
        case .request:
            counters.requests.add(1, ordering: .relaxed)
            // The message's properties are read when needed, and once: two strings per request
            // that a Ping answered on this thread never uses (the member here only for the policy).
            let member = policy == nil ? nil : knownMember ?? message.userID
            if let policy, let member, let refusal = policy.check(member: member, method: envelope.method, known: knownMethod) {
                counters.refused.add(1, ordering: .relaxed)
                logger.warning("refused a request the member may not make",
                               metadata: ["member": "\(member)", "method": "\(envelope.method)"])
                send(to: peer, envelope.reply(error: refusal), coalesce: coalesce)
                metrics.answered(method: envelope.method, known: knownMethod, status: refusal.code, afterNanoseconds: 0)
                return
            }
            accept(consume envelope, knownMethod, from: peer, message, member: member, coalesce: coalesce)
        default:
            // A reply, an event or a kind this build does not know: a host takes requests,
            // heartbeats and goodbyes' answers only, and says so rather than leaving the sender to
            // its deadline.
            counters.malformed.add(1, ordering: .relaxed)
            send(to: peer, envelope.reply(status: .invalidArgument,
                                         message: "envelope kind \(envelope.kind.protoName) is not a request: a host takes KIND_REQUEST, KIND_HEARTBEAT and the answer to its KIND_GOODBYE"),
                 coalesce: coalesce)
        }
    }

    /// - Parameters:
    ///   - envelope: taken (`consuming`): it moves into the `IncomingRequest` uncopied (item 104).
    ///   - knownMethod: its method in `KnownMethod`'s index, as decoding found it.
    ///   - member: the sender's member name when the policy check already read it.
    ///   - coalesce: it came in a batch: its reply may go in one.
    private func accept(_ envelope: consuming Envelope, _ knownMethod: KnownMethod?, from peer: PeerIdentity, _ message: ZMQSocket.Received,
                        member: String?, coalesce: Bool) {
        if draining {
            // Marked as never started: a client of several instances sends it to another one.
            var refusal = envelope.reply(status: .unavailable, message: "\(options.name) is shutting down")
            refusal.notStarted = true
            send(to: peer, refusal, coalesce: coalesce)
            metrics.answered(method: envelope.method, known: knownMethod, status: .unavailable, afterNanoseconds: 0)
            return
        }
        if dispatcher.answersOnReactor(knownMethod, envelope.method) {
            // `<name>.Ping` needs nothing but the host: answered as it arrives, with no task
            // (health probes, the launcher's readiness check, and the Wire benchmarks).
            send(to: peer, dispatcher.ping(envelope), coalesce: coalesce)
            lastReplyAt = Moment.now
            counters.replied.add(1, ordering: .relaxed)
            metrics.answered(method: envelope.method, known: knownMethod, status: .ok, afterNanoseconds: 0)
            return
        }
        if inFlight.count >= options.maxInFlight {
            send(to: peer, envelope.reply(status: .resourceExhausted, message: "\(options.name) is busy: \(inFlight.count) requests in flight"),
                 coalesce: coalesce)
            metrics.answered(method: envelope.method, known: knownMethod, status: .resourceExhausted, afterNanoseconds: 0)
            return
        }
        let budget = envelope.deadlineMs == 0 ? WireProtocol.defaultDeadlineMilliseconds : min(envelope.deadlineMs, WireProtocol.maxDeadlineMilliseconds)
        let arrived = Moment.now
        let deadline = arrived.advanced(byMilliseconds: Int64(budget))
        nextKey &+= 1
        let key = nextKey
        // Stored whole with `updateValue`, never changed through the dictionary's subscript: its
        // modify accessor (`inFlight[key]?.onReactor = true`) allocated a coroutine frame on
        // every request (a sixth of the gateway's mallocs).
        let offered = reactorHandler.map { dispatcher.offersToReactor(envelope, knownMethod, $0) } ?? false
        inFlight.updateValue(InFlight(peer: peer, requestID: envelope.requestId, method: envelope.method, knownMethod: knownMethod, deadline: deadline,
                                      arrived: arrived, onReactor: offered, coalesce: coalesce), forKey: key)
        metrics.inFlight(inFlight.count)
        if nextDeadline.map({ deadline < $0 }) ?? true { nextDeadline = deadline }
        let runsKeyed = offered && dispatcher.runsKeyed(envelope)
        // Only a socket that admits members by name has one (`member`, read for the policy); on
        // any other the ZAP handler names no one, so its `User-Id` is not read at all.
        let request = IncomingRequest(envelope: consume envelope, knownMethod: knownMethod, peer: peer, peerAddress: options.keepsPeerAddress ? message.peerAddress : "",
                                      peerMember: member ?? "",
                                      deadline: deadline, key: key)
        if offered, let reactorHandler {
            takenOnReactor += 1
            let reply = ReactorReply(loop: self, key: key)
            let taken = runsKeyed
                ? dispatcher.takeKeyed(request, reply: reply, handler: reactorHandler, logger: logger)
                : reactorHandler.take(request, reply: reply)
            if taken {
                counters.onReactor.add(1, ordering: .relaxed)
                return
            }
            if var entry = inFlight[key], entry.onReactor {
                entry.onReactor = false
                inFlight.updateValue(entry, forKey: key)
                takenOnReactor -= 1
            }
        }
        accepted.append(consume request)
    }
}
