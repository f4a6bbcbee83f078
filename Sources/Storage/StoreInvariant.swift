/// A store found its own data in a state its code rules out (a row it just wrote is missing): a
/// bug, answered INTERNAL by the router like any other unexpected error, with the detail in the log.
public struct StoreInvariant: Error, CustomStringConvertible {
    public var description: String
    public init(_ description: String) { self.description = description }
}
