public import FriensoProto

/// Anything that answers typed calls: `WireClient` over a socket, or (in tests) a service's
/// router called in process. Domains take their peers as `any RPCCalling`, so a domain's tests
/// can wire its peers in process with no socket.
public protocol RPCCalling: Sendable {
    /// Calls a typed method. - Throws: the reply's status, or UNAVAILABLE / DEADLINE_EXCEEDED.
    func call<Request, Response>(
        _ method: RPCMethod<Request, Response>, _ request: Request, options: CallOptions
    ) async throws(RPCError) -> Response
}

extension WireClient: RPCCalling {}
