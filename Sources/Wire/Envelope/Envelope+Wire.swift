public import FriensoProto

/// Protocol constants shared by every hop.
public enum WireProtocol {
    /// `Envelope.version` this build speaks.
    public static let version: UInt32 = 1
    /// Deadline applied when a request names none.
    public static let defaultDeadlineMilliseconds: UInt32 = 5_000
    /// No request may ask for more.
    public static let maxDeadlineMilliseconds: UInt32 = 120_000
}

extension Envelope {
    public static func request(
        method: String,
        payload: [UInt8],
        requestID: UInt64 = 0,
        sessionToken: String = "",
        idempotencyKey: String = "",
        deadlineMilliseconds: UInt32 = 0
    ) -> Envelope {
        Envelope(
            version: WireProtocol.version, kind: .request, requestId: requestID, method: method,
            sessionToken: sessionToken, idempotencyKey: idempotencyKey, deadlineMs: deadlineMilliseconds,
            payload: payload
        )
    }

    /// A reply to `self` with `status` and, for OK, the response payload.
    public func reply(status: StatusCode = .ok, message: String = "", payload: [UInt8] = []) -> Envelope {
        Envelope(
            version: WireProtocol.version, kind: .reply, requestId: requestId, method: method,
            status: status, statusMessage: message, payload: payload
        )
    }

    public func reply(error: RPCError) -> Envelope {
        reply(status: error.code, message: error.message)
    }

    /// The reply's outcome as an error, or `nil` for OK.
    public var error: RPCError? {
        switch status {
        case .ok: nil
        case .unspecified: RPCError(.internal, "reply carried no status")
        case .unrecognized(let code): RPCError(.internal, "unknown status code \(code): \(statusMessage)")
        default: RPCError(status, statusMessage)
        }
    }

    /// Decodes the payload of an OK reply, or throws the reply's error.
    public func decodeReply<Response: ProtoMessage>(_ type: Response.Type) throws(RPCError) -> Response {
        if let error { throw error }
        do {
            return try Response(serializedBytes: payload)
        } catch {
            throw RPCError(.internal, "malformed \(Response.protoName) in reply to \(method)")
        }
    }
}
