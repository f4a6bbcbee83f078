import CZeroMQ
public import FriensoProto
public import Logging
import Foundation

/// One event as a subscriber receives it.
public struct PublishedEvent: Sendable {
    public var topic: String
    public var envelope: Envelope

    public init(topic: String, envelope: Envelope) {
        self.topic = topic
        self.envelope = envelope
    }
}

/// What a subscriber's topic filter can be told while it runs (the gateway's `Subscriptions`
/// keeps it equal to the users connected there).
public protocol TopicFiltering: AnyObject, Sendable {
    /// Adds a prefix; libzmq counts them, so each `subscribe` needs its own `unsubscribe`.
    func subscribe(_ prefix: String)
    func unsubscribe(_ prefix: String)
}

/// A SUB socket on a reactor, delivering decoded events in order.
/// Undecodable frames are dropped and counted, never fatal.
public final class Subscriber: TopicFiltering {
    enum Control: Sendable {
        case subscribe(String)
        case unsubscribe(String)
        case stop
    }

    public let endpoint: String
    public let events: AsyncStream<PublishedEvent>
    private let control: CommandQueue<Control>
    private let finished = OneShot<Void>()

    /// - Parameters:
    ///   - endpoint: the publisher's PUB endpoint, or its instances' (an `EndpointList`: every
    ///     event comes once from each instance; the Clone numbering drops the copies).
    ///   - prefixes: topic prefixes to receive (`""` for all).
    ///   - security: how to authenticate to the publisher (`Keyring.client(of:)`).
    ///   - accept: asked on the socket's thread with each event's topic before it is decoded;
    ///     false drops the event there (the gateway drops events for users nobody listens to
    ///     without decoding them or waking a task).
    public init(endpoint: String, prefixes: [String], logger: Logger, highWaterMark: Int32 = 100_000,
                security: ClientSecurity = .plaintext, context: ZMQContext = .shared, reactor: Reactor = .shared,
                accept: (@Sendable ([UInt8]) -> Bool)? = nil) {
        self.endpoint = endpoint
        let (events, continuation) = AsyncStream.makeStream(of: PublishedEvent.self, bufferingPolicy: .unbounded)
        self.events = events
        let control = CommandQueue<Control>(reactor: reactor)
        self.control = control
        let finished = finished
        reactor.execute {
            do throws(ZMQError) {
                let socket = try ZMQSocket(context, .sub)
                try socket.configure(highWaterMark: highWaterMark, maxMessageSize: 16 << 20)
                try socket.secure(security)
                for prefix in prefixes { try socket.subscribe(prefix) }
                // Every instance of the publisher: one SUB socket takes them all (fair-queued).
                for instance in EndpointList.split(endpoint) { try socket.connect(instance) }
                reactor.register(SubscriberLoop(socket: socket, control: control, events: continuation, accept: accept,
                                                 logger: logger, finished: finished))
            } catch {
                logger.error("cannot subscribe", metadata: ["endpoint": "\(endpoint)", "error": "\(error)"])
                continuation.finish()
                finished.fulfil(())
            }
        }
    }

    deinit {
        control.post(.stop)
    }

    /// Adds a topic prefix to the socket's subscriptions (applied on its reactor, in order with
    /// `unsubscribe`); the publisher starts sending matching events once it has heard of it.
    public func subscribe(_ prefix: String) {
        control.post(.subscribe(prefix))
    }

    /// Removes one `subscribe` of the prefix.
    public func unsubscribe(_ prefix: String) {
        control.post(.unsubscribe(prefix))
    }

    /// Asks the reactor to close the socket; `events` then finishes.
    public func stop() {
        control.post(.stop)
    }

    public func close() async {
        control.post(.stop)
        await finished.value
    }
}

private final class SubscriberLoop: ReactorComponent {
    private let socket: ZMQSocket
    private let control: CommandQueue<Subscriber.Control>
    private let events: AsyncStream<PublishedEvent>.Continuation
    private let accept: (@Sendable ([UInt8]) -> Bool)?
    private let logger: Logger
    private let finished: OneShot<Void>
    private(set) var isFinished = false

    init(socket: ZMQSocket, control: CommandQueue<Subscriber.Control>, events: AsyncStream<PublishedEvent>.Continuation,
         accept: (@Sendable ([UInt8]) -> Bool)?, logger: Logger, finished: OneShot<Void>) {
        self.accept = accept
        self.socket = socket
        self.control = control
        self.events = events
        self.logger = logger
        self.finished = finished
    }

    func pollSockets() -> [ZMQSocket] { polled }
    /// Made once: the reactor asks on every loop turn.
    private lazy var polled = [socket]
    func nextWakeup() -> Moment? { nil }

    func tick(now: Moment) {
        for command in control.drain() {
            do throws(ZMQError) {
                switch command {
                case .subscribe(let prefix): try socket.subscribe(prefix)
                case .unsubscribe(let prefix): try socket.unsubscribe(prefix)
                case .stop: isFinished = true
                }
            } catch {
                logger.error("cannot change a subscription", metadata: ["error": "\(error)"])
            }
        }
    }

    func readable(_ index: Int) {
        for _ in 0..<1_024 {
            guard let message = try? socket.receive(dontWait: true) else { return }
            if let accept, message.frames.count == 2, !accept(message.frames[0]) { continue }
            guard message.frames.count == 2,
                  let envelope = try? Envelope.decoded(message.frames[1]),
                  envelope.kind == .event
            else {
                logger.debug("dropped a malformed event frame")
                continue
            }
            events.yield(PublishedEvent(topic: String(decoding: message.frames[0], as: UTF8.self), envelope: envelope))
        }
    }

    func close() {
        events.finish()
        finished.fulfil(())
    }
}

/// Follows the numbering of one publisher's streams, for Clone consumers.
public struct SequenceTracker: Sendable {
    public enum Verdict: Sendable, Equatable {
        /// The next event: apply it.
        case apply
        /// At or below what the consumer already has (e.g. covered by its snapshot): drop it.
        case stale
        /// Events were missed (or the publisher restarted): fetch a new snapshot.
        case resync
    }

    private var epoch: UInt64 = 0
    private var last: [String: UInt64] = [:]

    public init() {}

    /// Records that the consumer's state now reflects `stream` up to `sequence` of `epoch`
    /// (after loading a snapshot).
    public mutating func reset(epoch: UInt64, stream: String, sequence: UInt64) {
        if epoch != self.epoch { last.removeAll() }
        self.epoch = epoch
        last[stream] = sequence
    }

    public mutating func check(_ event: Envelope, stream: String) -> Verdict {
        guard event.epoch == epoch, let known = last[stream] else { return .resync }
        if event.sequence <= known { return .stale }
        guard event.sequence == known + 1 else { return .resync }
        last[stream] = event.sequence
        return .apply
    }
}
