/// A store found its own data in a state its code rules out (a row it just wrote is missing): a
/// bug, answered INTERNAL by the router like any other unexpected error, with the detail in the log.
public struct StoreInvariant: Error, CustomStringConvertible {
    public var description: String
    public init(_ description: String) { self.description = description }
}

/// Adapters for a write's `committed` action (`ServiceDatabase.write`, `PostgresServiceDatabase.write`).
public enum CommittedAction {
    /// `action`, whatever the mutation returned.
    public static func ignoringResult<T>(_ action: (@Sendable () -> Void)?) -> (@Sendable (T) -> Void)? {
        guard let action else { return nil }
        return { _ in action() }
    }

    /// `action`, when the mutation returned a value (nil: it changed nothing worth announcing).
    public static func whenSome<T>(_ action: (@Sendable () -> Void)?) -> (@Sendable (T?) -> Void)? {
        guard let action else { return nil }
        return { result in if result != nil { action() } }
    }
}
