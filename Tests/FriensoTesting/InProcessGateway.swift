import Foundation
public import FriensoProto
public import Wire

/// What the gateway does for a client, in process and with no socket: it refuses internal
/// methods, asks for a session on authenticated ones, routes the call to its service and stamps
/// the caller's user id and session. For domain tests that need more than one service (social
/// asks accounts for profiles); the gateway's own behaviour is tested in the gateway suite.
public struct InProcessGateway: Sendable {
    private let services: [String: any RPCCalling]

    /// - Parameter services: by contract service name (`accounts`, `social`, …), usually
    ///   `RouterClient`s.
    public init(_ services: [String: any RPCCalling]) {
        self.services = services
    }

    /// Someone signed in as `userID` (0: no session).
    public func person(_ userID: UInt64, sessionID: [UInt8] = []) -> Person {
        Person(id: userID, sessionID: sessionID, gateway: self)
    }

    /// Logs in through accounts, as `frienso login` does, and returns the person it signed in.
    public func login(_ login: String, password: String) async throws(RPCError) -> Person {
        let anonymous = person(0)
        let token = try await anonymous.call(AccountsV1.AccountsService.login, AccountsV1.LoginRequest(login: login, password: password)).sessionToken
        let session = try await route(AccountsV1.AccountsService.validateSession.erased)
            .call(AccountsV1.AccountsService.validateSession, AccountsV1.ValidateSessionRequest(sessionToken: token), options: CallOptions())
        return person(session.userId, sessionID: session.sessionId)
    }

    fileprivate func route(_ method: AnyRPCMethod) throws(RPCError) -> any RPCCalling {
        guard let service = services[method.service] else { throw .unavailable("\(method.service) is not part of this test") }
        return service
    }

    fileprivate func forward<Request, Response>(
        _ method: RPCMethod<Request, Response>, _ request: Request, as person: Person, idempotencyKey: String
    ) async throws(RPCError) -> Response {
        guard method.access != .internal else { throw .permissionDenied("\(method.fullName) is internal and cannot be called by clients") }
        if method.access == .authenticated && person.id == 0 { throw .unauthenticated("no session: log in first") }
        let options = CallOptions(idempotencyKey: idempotencyKey, callerUserID: person.id, clientAddress: "127.0.0.1",
                                  sessionID: person.sessionID)
        return try await route(method.erased).call(method, request, options: options)
    }
}

/// One signed-in user as the gateway forwards them.
public struct Person: Sendable {
    public let id: UInt64
    let sessionID: [UInt8]
    let gateway: InProcessGateway

    /// Calls a client method as this person.
    /// - Parameter mutation: attach a fresh idempotency key, as `FriensoClient` does.
    public func call<Request, Response>(
        _ method: RPCMethod<Request, Response>, _ request: Request, mutation: Bool = false, idempotencyKey: String? = nil
    ) async throws(RPCError) -> Response {
        try await gateway.forward(method, request, as: self, idempotencyKey: idempotencyKey ?? (mutation ? UUID().uuidString : ""))
    }
}
