import Synchronization
public import Wire

/// An `EventSink` that keeps what a service publishes, for tests to inspect. It numbers events
/// per stream as `Publisher` does, so services that report their position (snapshots) run on it.
public final class EventRecorder: ServiceEventSink {
    public typealias Event = (topic: String, method: String, payload: [UInt8])
    private struct State {
        var events: [Event] = []
        var sequences: [String: UInt64] = [:]
        var relayed: [(topic: String, sequence: UInt64)] = []
        var relayedEpoch: UInt64?
        /// The topics someone listens to (nil: every topic), as a publisher's subscribers would say.
        var heard: Set<String>?
    }
    private let state = Mutex(State())
    public let epoch = UInt64.random(in: 1...UInt64.max)

    public init() {}

    public func emit(topic: String, method: String, payload: [UInt8]) {
        state.withLock { s in
            s.events.append((topic, method, payload))
            s.sequences[Publisher.stream(of: topic), default: 0] += 1
        }
    }

    public func lastSequence(stream: String) -> UInt64 { state.withLock { $0.sequences[stream] ?? 0 } }

    public func listens(to topic: String) -> Bool { state.withLock { $0.heard?.contains(topic) ?? true } }

    /// From now on only `topics` are listened to (nil: every topic again): the subscribers a test
    /// pretends are connected.
    public func hear(only topics: Set<String>?) { state.withLock { $0.heard = topics } }

    /// An event numbered by a database's event log: kept with its number (`relayed`).
    public func relay(topic: String, method: String, payload: [UInt8], epoch: UInt64, sequence: UInt64) {
        state.withLock { s in
            s.events.append((topic, method, payload))
            s.relayed.append((topic, sequence))
            s.relayedEpoch = epoch
        }
    }

    /// The epoch consumers see: the event log's when events were relayed, else this recorder's.
    public var announcedEpoch: UInt64 { state.withLock { $0.relayedEpoch } ?? epoch }

    /// The relayed events' topics and numbers, in the order they came.
    public var relayed: [(topic: String, sequence: UInt64)] { state.withLock { $0.relayed } }

    /// Everything published so far.
    public var all: [Event] { state.withLock { $0.events } }

    /// Everything published since the last `take`, and forgets it.
    public func take() -> [Event] { state.withLock { s in defer { s.events.removeAll() }; return s.events } }
}
