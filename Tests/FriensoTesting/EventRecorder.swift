import Synchronization
public import Wire

/// An `EventSink` that keeps what a service publishes, for tests to inspect.
public final class EventRecorder: EventSink {
    public typealias Event = (topic: String, method: String, payload: [UInt8])
    private let events = Mutex<[Event]>([])

    public init() {}

    public func emit(topic: String, method: String, payload: [UInt8]) { events.withLock { $0.append((topic, method, payload)) } }

    /// Everything published so far.
    public var all: [Event] { events.withLock { $0 } }

    /// Everything published since the last `take`, and forgets it.
    public func take() -> [Event] { events.withLock { e in defer { e.removeAll() }; return e } }
}
