import CZeroMQ
public import FriensoProto
public import Logging
import Foundation

/// One event as a subscriber receives it.
public struct PublishedEvent: Sendable {
    public var topic: String
    public var envelope: Envelope
}

/// A SUB socket on its own thread, delivering decoded events in order.
/// Undecodable frames are dropped and counted, never fatal.
public final class Subscriber: Sendable {
    public let endpoint: String
    public let events: AsyncStream<PublishedEvent>
    private let control = Mailbox<Bool>()
    private let finished = OneShot<Void>()

    /// - Parameter prefixes: topic prefixes to receive (`""` for all).
    public init(endpoint: String, prefixes: [String], logger: Logger, highWaterMark: Int32 = 100_000, context: ZMQContext = .shared) {
        self.endpoint = endpoint
        let (events, continuation) = AsyncStream.makeStream(of: PublishedEvent.self, bufferingPolicy: .unbounded)
        self.events = events
        let control = control, finished = finished
        let thread = Thread {
            defer {
                continuation.finish()
                finished.fulfil(())
            }
            let socket: ZMQSocket
            do {
                socket = try ZMQSocket(context, .sub)
                try socket.configure(highWaterMark: highWaterMark, maxMessageSize: 16 << 20)
                for prefix in prefixes { try socket.subscribe(prefix) }
                try socket.connect(endpoint)
            } catch {
                logger.error("cannot subscribe", metadata: ["endpoint": "\(endpoint)", "error": "\(error)"])
                return
            }
            var items = [socket.pollItem(), control.pollItem]
            while true {
                _ = try? ZMQPoller.poll(&items, timeoutMilliseconds: 1_000)
                if items[1].revents != 0, control.drain().contains(true) { return }
                while let message = try? socket.receive(dontWait: true) {
                    guard message.frames.count == 2,
                          let envelope = try? Envelope(serializedBytes: message.frames[1]),
                          envelope.kind == .event
                    else {
                        logger.debug("dropped a malformed event frame")
                        continue
                    }
                    continuation.yield(PublishedEvent(topic: String(decoding: message.frames[0], as: UTF8.self), envelope: envelope))
                }
            }
        }
        thread.name = "sub-\(endpoint)"
        thread.start()
    }

    deinit {
        control.post(true)
    }

    /// Asks the socket thread to stop; `events` then finishes.
    public func stop() {
        control.post(true)
    }

    public func close() async {
        control.post(true)
        await finished.value
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
