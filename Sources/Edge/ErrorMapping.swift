public import FriensoProto
public import Wire

/// How the edge answers a `StatusCode`: one HTTP status per code, and the body `{code, name,
/// message}` (documented in docs/protocol.md § HTTP edge). A pure table, so the mapping is one
/// place and its test names every code.
public enum ErrorMapping {
    public static func httpStatus(_ code: StatusCode) -> Int {
        switch code {
        case .ok: 200
        case .invalidArgument: 400
        case .unauthenticated: 401
        case .permissionDenied: 403
        case .notFound: 404
        case .alreadyExists: 409
        case .failedPrecondition: 412
        case .resourceExhausted: 429
        case .unavailable: 503
        case .deadlineExceeded: 504
        case .internal, .unspecified, .unrecognized: 500
        }
    }

    /// The error body: the code's number, its name (`NOT_FOUND`) and the message.
    public static func body(_ code: StatusCode, _ message: String) -> JSONValue {
        let known: StatusCode = switch code {
        case .unspecified, .unrecognized: .internal
        default: code
        }
        return .object([("code", .number(Double(known.rawValue))), ("name", .string(known.name)), ("message", .string(message))])
    }
}
