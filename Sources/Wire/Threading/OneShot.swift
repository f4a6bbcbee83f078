import Foundation
import Synchronization

/// A one-shot value handed from a socket thread to async code (e.g. "bound to this endpoint").
/// Any number of tasks may await it.
public final class OneShot<Value: Sendable>: Sendable {
    private enum State {
        case waiting([CheckedContinuation<Value, Never>])
        case done(Value)
    }

    private let state = Mutex<State>(.waiting([]))

    public init() {}

    /// Sets the value once; later calls are ignored.
    public func fulfil(_ value: Value) {
        let waiters: [CheckedContinuation<Value, Never>] = state.withLock { state in
            guard case .waiting(let waiters) = state else { return [] }
            state = .done(value)
            return waiters
        }
        for waiter in waiters { waiter.resume(returning: value) }
    }

    public var value: Value {
        get async {
            await withCheckedContinuation { continuation in
                let ready: Value? = state.withLock { state in
                    switch state {
                    case .waiting(let waiters):
                        state = .waiting(waiters + [continuation])
                        return nil
                    case .done(let value):
                        return value
                    }
                }
                if let ready { continuation.resume(returning: ready) }
            }
        }
    }

    /// The value if it has arrived.
    public var current: Value? {
        state.withLock { if case .done(let value) = $0 { value } else { nil } }
    }
}
