import CZeroMQ
import FriensoProto
public import Logging
public import ServiceLifecycle
import Synchronization

/// A PUB socket that numbers its events. Frames are `[topic][Envelope(kind: event)]`.
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
    private let outbox = Mailbox<Outgoing>()
    private let sequences = Mutex<[String: UInt64]>([:])
    private let bound = OneShot<Result<String, ZMQError>>()

    private enum Outgoing: Sendable {
        case event(topic: [UInt8], envelope: [UInt8])
        case stop
    }

    /// - Parameter highWaterMark: events queued per subscriber before PUB drops (silently, by design).
    public init(name: String, endpoint: String, logger: Logger, highWaterMark: Int32 = 100_000, context: ZMQContext = .shared) {
        self.name = name
        self.endpoint = endpoint
        self.logger = logger
        self.highWaterMark = highWaterMark
        self.context = context
        epoch = UInt64.random(in: 1...UInt64.max)
    }

    public static func stream(of topic: String) -> String {
        topic.split(separator: ".", maxSplits: 1).first.map(String.init) ?? topic
    }

    /// Numbers and queues an event. - Returns: its sequence number in its stream.
    @discardableResult
    public func publish(topic: String, method: String, payload: [UInt8]) -> UInt64 {
        let stream = Self.stream(of: topic)
        return sequences.withLock { sequences in
            let sequence = (sequences[stream] ?? 0) + 1
            sequences[stream] = sequence
            let envelope = Envelope(version: WireProtocol.version, kind: .event, method: method, payload: payload,
                                    sequence: sequence, epoch: epoch)
            // Posted under the lock, so the socket sends in sequence order.
            outbox.post(.event(topic: Array(topic.utf8), envelope: envelope.serializedBytes()))
            return sequence
        }
    }

    /// The last number given in `stream` (0 before the first event): a snapshot taken together
    /// with it lets a consumer drop the events it already contains.
    public func lastSequence(stream: String) -> UInt64 {
        sequences.withLock { $0[stream] ?? 0 }
    }

    public func boundEndpoint() async throws(ZMQError) -> String {
        try await bound.value.get()
    }

    public func run() async throws {
        let outbox = outbox, bound = bound, context = context, endpoint = endpoint, hwm = highWaterMark, logger = logger
        await withGracefulShutdownHandler {
            await SocketThread.run(name: "pub-\(name)") {
                let socket: ZMQSocket
                do throws(ZMQError) {
                    socket = try ZMQSocket(context, .pub)
                    try socket.configure(highWaterMark: hwm)
                    bound.fulfil(.success(try socket.bind(endpoint)))
                } catch {
                    bound.fulfil(.failure(error))
                    return
                }
                var items = [outbox.pollItem]
                while true {
                    _ = try? ZMQPoller.poll(&items, timeoutMilliseconds: 1_000)
                    for item in outbox.drain() {
                        switch item {
                        case .event(let topic, let envelope):
                            do {
                                try socket.send([topic, envelope], dontWait: true)
                            } catch {
                                logger.warning("publish failed", metadata: ["error": "\(error)"])
                            }
                        case .stop:
                            return
                        }
                    }
                }
            }
        } onGracefulShutdown: {
            outbox.post(.stop)
        }
        _ = try await boundEndpoint()
    }

    public func stop() {
        outbox.post(.stop)
    }
}
