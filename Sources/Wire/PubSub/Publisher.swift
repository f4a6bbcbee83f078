import CZeroMQ
import FriensoProto
public import Logging
public import ServiceLifecycle
import Synchronization

/// A PUB socket that numbers its events. Frames are `[topic][Envelope(kind: event)]`.
///
/// It is an XPUB socket, so it also hears what its subscribers subscribe (libzmq passes each
/// topic prefix up when its first subscriber asks for it, and down when its last one leaves or
/// disconnects): `listens(to:)` says whether anyone would receive a topic, so a service can skip
/// an event nobody is connected to hear, and not count it as seen (geo's live locations).
///
/// Numbering is per *stream*, the topic's first dot-separated segment (`graph`, `grants`,
/// `viewer`), so a consumer of one stream sees 1, 2, 3… with no gaps from the others. Every start
/// draws a random `epoch`: a consumer that sees a new epoch must resync (Clone pattern).
public final class Publisher: Service, Sendable {
    public let name: String
    public let endpoint: String
    public let epoch: UInt64
    private let logger: Logger
    private let context: ZMQContext
    private let highWaterMark: Int32
    private let security: ServerSecurity
    private let outbox: CommandQueue<Outgoing>
    private let reactor: Reactor
    private let finished = OneShot<Void>()
    private let sequences = Mutex<[String: UInt64]>([:])
    private let listened = ListenedTopics()
    private let bound = OneShot<Result<String, ZMQError>>()

    enum Outgoing: Sendable {
        /// `base` (an encoded envelope without its sequence) is shared by every topic of one
        /// post; the socket writes it with `sequence` appended straight into the libzmq message.
        case event(topic: String, base: [UInt8], sequence: UInt64)
        case stop
    }

    /// - Parameters:
    ///   - highWaterMark: events queued per subscriber before PUB drops (silently, by design).
    ///   - security: who may subscribe (`Keyring.server(admitting:)`: the members that consume
    ///     these streams); a refused peer never completes its handshake, so it gets no event.
    public init(name: String, endpoint: String, logger: Logger, highWaterMark: Int32 = 100_000,
                security: ServerSecurity = .plaintext, context: ZMQContext = .shared, reactor: Reactor = .shared) {
        self.name = name
        self.security = security
        self.reactor = reactor
        outbox = CommandQueue(reactor: reactor)
        self.endpoint = endpoint
        self.logger = logger
        self.highWaterMark = highWaterMark
        self.context = context
        epoch = UInt64.random(in: 1...UInt64.max)
    }

    public static func stream(of topic: String) -> String {
        guard let dot = topic.utf8.firstIndex(of: UInt8(ascii: ".")) else { return topic }
        return String(topic[..<dot])
    }

    /// Numbers and queues an event. - Returns: its sequence number in its stream.
    @discardableResult
    public func publish(topic: String, method: String, payload: [UInt8]) -> UInt64 {
        post(topics: [topic], method: method, payload: payload)
    }

    /// Encodes the envelope once and gives each topic its own copy with its sequence number
    /// appended as a field of its own (protobuf takes fields in any order), instead of encoding
    /// a whole envelope per topic. - Returns: the last topic's sequence number.
    @discardableResult
    func post(topics: [String], method: String, payload: [UInt8]) -> UInt64 {
        let base = Envelope(version: WireProtocol.version, kind: .event, method: method, payload: payload, epoch: epoch).wireBytes
        return sequences.withLock { sequences in
            var sequence: UInt64 = 0
            for topic in topics {
                let stream = Self.stream(of: topic)
                sequence = (sequences[stream] ?? 0) + 1
                sequences[stream] = sequence
                // Posted under the lock, so the socket sends in sequence order.
                outbox.post(.event(topic: topic, base: base, sequence: sequence))
            }
            return sequence
        }
    }

    /// The last number given in `stream` (0 before the first event): a snapshot taken together
    /// with it lets a consumer drop the events it already contains.
    public func lastSequence(stream: String) -> UInt64 {
        sequences.withLock { $0[stream] ?? 0 }
    }

    /// The largest frame a subscriber may send (its subscriptions).
    public static let maxInboundMessageSize: Int64 = 64 << 10

    public func boundEndpoint() async throws(ZMQError) -> String {
        try await bound.value.get()
    }

    public func run() async throws {
        let outbox = outbox, bound = bound, context = context, endpoint = endpoint, hwm = highWaterMark
        let logger = logger, reactor = reactor, finished = finished, security = security, listened = listened
        reactor.execute {
            do throws(ZMQError) {
                let socket = try ZMQSocket(context, .xpub)
                // Subscribers only ever send subscriptions (a topic prefix): a bigger frame is a
                // misbehaving peer, refused by libzmq (it drops that connection) before it is buffered.
                try socket.configure(highWaterMark: hwm, maxMessageSize: Publisher.maxInboundMessageSize)
                try socket.secure(security)
                bound.fulfil(.success(try socket.bind(endpoint)))
                reactor.register(PublisherLoop(socket: socket, outbox: outbox, listened: listened, logger: logger, finished: finished))
            } catch {
                bound.fulfil(.failure(error))
                finished.fulfil(())
            }
        }
        _ = try await boundEndpoint()
        await withGracefulShutdownHandler {
            await finished.value
        } onGracefulShutdown: {
            outbox.post(.stop)
        }
    }

    public func stop() {
        outbox.post(.stop)
    }

    /// Whether a subscriber of this socket would receive `topic` (one of its subscriptions is a
    /// prefix of it). False before anyone subscribed, and shortly after a subscription was made
    /// (it reaches the socket asynchronously, as it reaches libzmq's own filter).
    public func listens(to topic: String) -> Bool {
        listened.matches(topic)
    }

    public func listens(toViewer user: UInt64) -> Bool {
        listened.matches(viewer: user)
    }
}

/// The topic prefixes a publisher's subscribers asked for, as its XPUB socket tells them. A
/// gateway subscribes one exact viewer topic per user connected to it (thousands): those are
/// kept as ids, so asking about a viewer is one set lookup; the few other prefixes (whole
/// streams) are compared byte by byte.
final class ListenedTopics: Sendable {
    private struct State {
        var viewers: Set<UInt64> = []
        var others: Set<[UInt8]> = []
        /// Derived from `others` when it changes, for `matches(viewer:)`, which geo asks for
        /// every friend of every located user: whether one of them is a prefix of every viewer
        /// topic (`viewer.` or shorter: a whole-stream subscription), and those that start
        /// with `viewer.` and go on (part of an id), the only ones left to compare with a
        /// viewer's topic. It was spelled out and compared with every other prefix on each
        /// call: 3% of geo's samples (`docs/benchmarks.md`, issue 16, item 82).
        var everyViewer = false
        var partlyViewers: [[UInt8]] = []

        mutating func othersChanged() {
            let prefix = ViewerTopic.prefix.utf8
            everyViewer = others.contains { prefix.starts(with: $0) }
            partlyViewers = others.filter { $0.count > prefix.count && $0.starts(with: prefix) }
        }
    }
    private let state = Mutex(State())

    /// Applies one subscription message: `1` + prefix (subscribe) or `0` + prefix (unsubscribe).
    func apply(_ message: UnsafeRawBufferPointer) {
        guard let kind = message.first, kind <= 1 else { return }
        let prefix = message.dropFirst()
        let viewer = ViewerTopic.user(in: prefix)
        let bytes = viewer == nil ? [UInt8](prefix) : []
        state.withLock { s in
            switch (kind, viewer) {
            case (1, let id?): s.viewers.insert(id)
            case (_, let id?): s.viewers.remove(id)
            case (1, nil): if s.others.insert(bytes).inserted { s.othersChanged() }
            default: if s.others.remove(bytes) != nil { s.othersChanged() }
            }
        }
    }

    func matches(_ topic: String) -> Bool {
        if let viewer = ViewerTopic.user(in: topic.utf8) { return matches(viewer: viewer) }
        return state.withLock { $0.others.contains { topic.utf8.starts(with: $0) } }
    }

    func matches(viewer: UInt64) -> Bool {
        state.withLock { s in
            if s.everyViewer || s.viewers.contains(viewer) { return true }
            if s.partlyViewers.isEmpty { return false }
            let topic = ViewerTopic.of(viewer).utf8
            return s.partlyViewers.contains { topic.starts(with: $0) }
        }
    }
}

/// The PUB socket on its reactor.
private final class PublisherLoop: ReactorComponent {
    private let socket: ZMQSocket
    private let outbox: CommandQueue<Publisher.Outgoing>
    private let listened: ListenedTopics
    private let logger: Logger
    private let finished: OneShot<Void>
    private(set) var isFinished = false

    init(socket: ZMQSocket, outbox: CommandQueue<Publisher.Outgoing>, listened: ListenedTopics, logger: Logger, finished: OneShot<Void>) {
        self.socket = socket
        self.outbox = outbox
        self.listened = listened
        self.logger = logger
        self.finished = finished
    }

    func pollSockets() -> [ZMQSocket] { polled }
    /// Made once: the reactor asks on every loop turn.
    private lazy var polled = [socket]

    /// Subscriptions and unsubscriptions from the subscribers (all the XPUB socket receives).
    func readable(_ index: Int) {
        for _ in 0..<1_024 {
            let received: Bool
            do {
                received = try socket.receive(dontWait: true) { message in listened.apply(message.bytes) }
            } catch {
                logger.debug("cannot read a subscription", metadata: ["error": "\(error)"])
                return
            }
            if !received { return }
        }
    }
    func nextWakeup() -> Moment? { nil }

    /// The outbox's other array (`CommandQueue.drain(keeping:_:)`, item 148).
    private var spareOutgoing: [Publisher.Outgoing] = []

    func tick(now: Moment) {
        outbox.drain(keeping: &spareOutgoing) { items in
            for item in items {
                switch item {
                case .event(let topic, let base, let sequence):
                    do {
                        try socket.send(topic: topic, bodySize: Publisher.numberedSize(base, sequence: sequence)) { body in
                            Publisher.writeNumbered(base, sequence: sequence, into: body)
                        }
                    } catch {
                        logger.warning("publish failed", metadata: ["error": "\(error)"])
                    }
                case .stop:
                    isFinished = true
                    return
                }
            }
        }
    }

    func close() {
        try? socket.set(ZMQ_LINGER, Int32(500)) // let the last events go out
        finished.fulfil(())
    }
}

/// Where a service's events go: the PUB socket in production, a recorder in tests.
public protocol EventSink: Sendable {
    /// Whether anyone would receive an event to `topic` now: false lets a service skip an event
    /// nobody is connected to hear (and not count it as seen). A sink that cannot tell says true.
    func listens(to topic: String) -> Bool
    /// `listens(to: ViewerTopic.of(user))`, without making the topic when the sink can tell.
    func listens(toViewer user: UInt64) -> Bool
    func emit(topic: String, method: String, payload: [UInt8])
    /// The same event to several topics (a fix for every viewer allowed to see it).
    func emit(topics: [String], method: String, payload: [UInt8])
    /// An event about one person (`subject`, a user id): a sink that keeps events (a database's
    /// event log) deletes it when that person is erased. Others ignore the subject.
    func emit(topic: String, method: String, payload: [UInt8], subject: UInt64)
}

extension EventSink {
    public func listens(to topic: String) -> Bool { true }

    public func listens(toViewer user: UInt64) -> Bool { listens(to: ViewerTopic.of(user)) }

    public func emit(topics: [String], method: String, payload: [UInt8]) {
        for topic in topics { emit(topic: topic, method: method, payload: payload) }
    }

    public func emit(topic: String, method: String, payload: [UInt8], subject: UInt64) {
        emit(topic: topic, method: method, payload: payload)
    }
}

/// A sink that also sends events numbered elsewhere (a database's event log, whose numbers and
/// epoch every instance of a service shares) as they are: the PUB socket of one instance.
public protocol RelayingEventSink: EventSink {
    func relay(topic: String, method: String, payload: [UInt8], epoch: UInt64, sequence: UInt64)
}

extension Publisher: RelayingEventSink {
    public func emit(topic: String, method: String, payload: [UInt8]) {
        publish(topic: topic, method: method, payload: payload)
    }

    /// Sends an event numbered by the database's event log, under its epoch (not this
    /// publisher's), leaving this publisher's own numbering alone. Relayed events must be
    /// given in number order per stream.
    public func relay(topic: String, method: String, payload: [UInt8], epoch: UInt64, sequence: UInt64) {
        let base = Envelope(version: WireProtocol.version, kind: .event, method: method, payload: payload, epoch: epoch).wireBytes
        outbox.post(.event(topic: topic, base: base, sequence: sequence))
    }

    public func emit(topics: [String], method: String, payload: [UInt8]) {
        post(topics: topics, method: method, payload: payload)
    }

    /// An encoded envelope without a sequence, with `sequence` appended as its field 12 (a
    /// varint: key (12 << 3) | 0, then the value seven bits at a time): its size, then
    /// `writeNumbered` writes it (into the libzmq message that goes out).
    static func numberedSize(_ base: [UInt8], sequence: UInt64) -> Int {
        base.count + 1 + WireWriter.varintSize(sequence)
    }

    /// Writes `base` with `sequence` appended into `buffer`, of exactly `numberedSize` bytes.
    static func writeNumbered(_ base: [UInt8], sequence: UInt64, into buffer: UnsafeMutableRawBufferPointer) {
        var writer = WireWriter(buffer)
        base.withUnsafeBytes { writer.raw($0) }
        writer.varintField(12, sequence)
    }
}

/// An event sink that numbers its events per stream under one epoch (as `Publisher` does), so a
/// snapshot can say which events it already contains (Clone pattern).
public protocol NumberedEventSink: EventSink {
    /// Drawn at each start; a consumer that sees a new one must resync.
    var epoch: UInt64 { get }
    /// The last number given in `stream` (0 before the first event).
    func lastSequence(stream: String) -> UInt64
    /// Sends every event committed so far before returning (a snapshot's head then covers them).
    /// A sink that sends as events are emitted has nothing to do.
    func catchUp() async
}

extension NumberedEventSink {
    public func catchUp() async {}
}

extension Publisher: NumberedEventSink {}

/// What a service is given to announce its events: numbered by itself on one instance (SQLite),
/// or relayed from its database's event log (PostgreSQL, any number of instances).
public typealias ServiceEventSink = NumberedEventSink & RelayingEventSink
