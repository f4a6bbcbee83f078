public import FriensoProto

public typealias StatusCode = CommonV1.StatusCode
public typealias Envelope = CommonV1.Envelope

/// A non-OK outcome of a call: a stable status code and a message for people.
/// Handlers throw it; clients receive it.
public struct RPCError: Error, Hashable, CustomStringConvertible {
    public var code: StatusCode
    public var message: String

    public init(_ code: StatusCode, _ message: String) {
        self.code = code
        self.message = message
    }

    public var description: String { "\(code.name): \(message)" }

    public static func invalidArgument(_ message: String) -> RPCError { RPCError(.invalidArgument, message) }
    public static func unauthenticated(_ message: String) -> RPCError { RPCError(.unauthenticated, message) }
    public static func permissionDenied(_ message: String) -> RPCError { RPCError(.permissionDenied, message) }
    public static func notFound(_ message: String) -> RPCError { RPCError(.notFound, message) }
    public static func alreadyExists(_ message: String) -> RPCError { RPCError(.alreadyExists, message) }
    public static func failedPrecondition(_ message: String) -> RPCError { RPCError(.failedPrecondition, message) }
    public static func resourceExhausted(_ message: String) -> RPCError { RPCError(.resourceExhausted, message) }
    public static func unavailable(_ message: String) -> RPCError { RPCError(.unavailable, message) }
    public static func deadlineExceeded(_ message: String) -> RPCError { RPCError(.deadlineExceeded, message) }
    public static func `internal`(_ message: String) -> RPCError { RPCError(.internal, message) }
}

extension StatusCode {
    /// The short name people see: `NOT_FOUND`.
    public var name: String {
        let full = protoName
        return full.hasPrefix("STATUS_CODE_") ? String(full.dropFirst("STATUS_CODE_".count)) : "STATUS_\(full)"
    }

    /// The process exit code the CLI uses for this status: 0 for OK, 10 + number otherwise.
    public var exitCode: Int32 { self == .ok ? 0 : 10 + rawValue }
}
