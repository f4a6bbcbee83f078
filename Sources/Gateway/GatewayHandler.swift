import Foundation
import FriensoProto
import Logging
import Wire

/// The gateway's request path: allow-list, session, rate limit, forward, relay.
///
/// A class, so that nothing holding it copies its fields: as a struct (the configuration's
/// strings and tables, the clients) it was copied into every forwarded request's completion, a
/// dozen retains and releases per request. That completion now keeps only the session cache and
/// what the reply does to it (`take`).
final class GatewayHandler: ReactorRequestHandler, Sendable {
    static let subscribe = CommonMethods.subscribe
    static let unsubscribe = CommonMethods.unsubscribe
    static let validate = AccountsV1.AccountsService.validateSession

    /// Every method a client may name, from the contracts, plus each service's Ping and the
    /// gateway's own methods.
    static let methodTable: [String: AnyRPCMethod] = {
        var table = Dictionary(uniqueKeysWithValues: ProtoIndex.methods.map { ($0.fullName, $0) })
        for service in Set(ProtoIndex.methods.map(\.service)).union(GatewayConfig.serviceNames) {
            table["\(service).Ping"] = CommonMethods.ping(service).erased
        }
        table[subscribe.fullName] = subscribe.erased
        table[unsubscribe.fullName] = unsubscribe.erased
        return table
    }()

    let config: GatewayConfig
    let clients: [String: WireClient]
    /// Each method a client may name, with the client of the service that answers it (nil: the
    /// gateway's own methods, or a service not deployed here): `route` finds both with one lookup
    /// of the method's name, for the reactor path and the task path alike, where the method and
    /// then its service's client were two (issue 16, item 63 of `docs/benchmarks.md`); by the
    /// method's `KnownMethod` ordinal, its name unhashed (item 110).
    private let routes: MethodTable<Route>

    /// A class: the lookup on every request hands out one reference. A struct was copied out of
    /// the table whole, its method's strings and its client retained and released again, then
    /// the method copied once more out of it (about 370 instructions a forwarded request, item 108).
    private final class Route: Sendable {
        let method: AnyRPCMethod
        let client: WireClient?

        init(method: AnyRPCMethod, client: WireClient?) {
            self.method = method
            self.client = client
        }

        /// Whether the service's client may send `request` again when its reply is lost (the
        /// service went silent, or its instance died and another answers): a read by contract,
        /// or a mutation under an idempotency key, which the service answers once.
        func resendable(_ request: borrowing Envelope) -> Bool {
            method.readOnly || !request.idempotencyKey.isEmpty
        }
    }
    let sessions: SessionCache
    let limiter: RateLimiter
    let subscriptions: Subscriptions
    let nowMs: @Sendable () -> Int64

    init(config: GatewayConfig, clients: [String: WireClient], sessions: SessionCache, limiter: RateLimiter,
         subscriptions: Subscriptions, nowMs: @escaping @Sendable () -> Int64) {
        self.config = config
        self.clients = clients
        var routes = MethodTable<Route>()
        for (name, method) in Self.methodTable { routes[name] = Route(method: method, client: clients[method.service]) }
        self.routes = routes
        self.sessions = sessions
        self.limiter = limiter
        self.subscriptions = subscriptions
        self.nowMs = nowMs
    }

    func handle(_ request: IncomingRequest, logger: Logger) async -> Envelope {
        let envelope = request.envelope
        do {
            let route = try route(request)
            let method = route.method
            var session: ResolvedSession?
            if method.access == .authenticated {
                session = try await resolve(envelope.sessionToken, budget: request.downstreamBudget)
            } else if !envelope.sessionToken.isEmpty {
                // A public method called with a session (alerts.ResolveHelpNow: the initiator, or an
                // operator's key without one): the caller is stamped when the session is valid, and
                // the call goes on anonymously when it is not (a stale token must not block a login).
                // Only "not valid" goes on anonymously: accounts unreachable is that error, to retry
                // (anonymously, the initiator's resolve was refused for good while accounts restarted).
                session = try await resolveUnlessInvalid(envelope.sessionToken, budget: request.downstreamBudget)
            }
            let clientHost = Self.host(of: request.peerAddress)
            try limit(clientHost, session)
            if method.service == "gateway" {
                return try local(method, envelope, request.peer, session)
            }
            guard let client = route.client else { throw RPCError.unavailable("\(method.service) is not deployed here") }
            let outgoing = try forwarding(request, to: route, session: session, clientHost: clientHost)
            let reply = await client.send(outgoing, deadline: request.downstreamBudget, retryable: route.resendable(envelope))
            SessionEffect(request, session).apply(after: reply.status, to: sessions)
            return envelope.reply(status: reply.status, message: reply.statusMessage, payload: reply.payload)
        } catch let error as RPCError {
            return envelope.reply(error: error)
        } catch {
            logger.error("gateway error", metadata: ["error": "\(error)"])
            return envelope.reply(error: .internal("gateway error"))
        }
    }

    /// The same path on the socket's thread, for a request whose session (if it names one) is
    /// cached: the rules above, in the same functions, then `relayOnReactor` to the service and
    /// the reply straight back, with no task. A session to resolve, the gateway's own methods and
    /// any refusal go to `handle` instead (they are not the path every request takes).
    func take(_ request: IncomingRequest, reply: ReactorReply) -> Bool {
        // Anything refused (an unknown or internal method, a service not deployed here, the
        // gateway's own methods) is declined, for `handle` to answer.
        guard let route = try? route(request), let client = route.client else { return false }
        var session: ResolvedSession?
        if !request.envelope.sessionToken.isEmpty {
            guard let cached = sessions.get(request.envelope.sessionToken, nowMs: nowMs()) else { return false }
            session = cached
        } else if route.method.access == .authenticated {
            return false
        }
        // The client's host (its address without the port) is found once, for the rate limit and
        // the forwarded envelope: twice, it was 1% of a forwarded request's instructions.
        let clientHost = Self.host(of: request.peerAddress)
        guard let outgoing = try? forwarding(request, to: route, session: session, clientHost: clientHost), client.canSendOnReactor else {
            return false
        }
        // The bucket is charged only once the request stays here: one declined to `handle` is
        // charged there, once.
        do {
            try limit(clientHost, session)
        } catch {
            reply(request.envelope.reply(error: error))
            return true
        }
        // The completion keeps what the reply needs, not the request's envelope.
        let effect = SessionEffect(request, session)
        // The service's status, message and payload go back as they came, copied once from its
        // reply into the one sent, which the host stamps with the request's id and method.
        return client.relayOnReactor(outgoing, deadline: request.downstreamBudget, retryable: route.resendable(request.envelope)) {
            [sessions] forwarded in
            effect.apply(after: forwarded.status, to: sessions)
            reply.relay(forwarded)
        }
    }

    /// The method a client's request names, if clients may call it, and its service's client.
    private func route(_ request: IncomingRequest) throws(RPCError) -> Route {
        guard let route = routes[request: request] else {
            throw RPCError.invalidArgument("unknown method \"\(request.envelope.method)\"")
        }
        guard route.method.access != .internal else {
            throw RPCError.permissionDenied("\(route.method.fullName) is internal and cannot be called by clients")
        }
        return route
    }

    /// The rate limit: per session when there is one, else per client host (`host(of:)` of the
    /// request's peer address).
    private func limit(_ clientHost: String, _ session: ResolvedSession?) throws(RPCError) {
        let now = RateLimiter.now
        // A resolved session brings its bucket; only a request without one looks its key up.
        let allowed = if let bucket = session?.bucket {
            bucket.take(now: now)
        } else {
            limiter.allow(session.map { RateKey.session(userID: $0.userID, sessionID: $0.sessionID) } ?? .address(clientHost), now: now)
        }
        guard allowed else {
            throw RPCError.resourceExhausted("rate limit: at most \(Int(config.requestsPerSecond)) requests a second (burst \(Int(config.burst)))")
        }
    }

    /// The client's host (its IP), for the rate limit and the forwarded envelope. libzmq's
    /// `Peer-Address` is the bare IP ("127.0.0.1"; "2001:db8::1" were IPv6 enabled); the edge
    /// passes "ip:port", IPv6 in brackets ("[2001:db8::1]:443"). Both give the bare IP, so a
    /// client is one key whichever door and connection it comes by: cutting at the last colon
    /// made "2001:db8:" of a bare IPv6 address.
    /// Scans the UTF-8 bytes: `String.lastIndex(of:)` walked grapheme clusters (about 5% of the
    /// gateway's reactor thread per forwarded request), and `utf8.lastIndex(of:)` still stepped
    /// one checked index at a time (338 instructions a request, item 100).
    static func host(of address: String) -> String {
        var address = address
        let host: String? = address.withUTF8 { bytes in
            if bytes.first == UInt8(ascii: "[") {
                // "[v6]:port" (or "[v6]"): what is inside the brackets.
                guard let close = bytes.lastIndex(of: UInt8(ascii: "]")) else { return nil }
                return String(decoding: UnsafeBufferPointer(rebasing: bytes[1..<close]), as: UTF8.self)
            }
            // "v4:port": one colon. None (a bare IPv4) or several (a bare IPv6): the address as is.
            guard let colon = bytes.firstIndex(of: UInt8(ascii: ":")), bytes.lastIndex(of: UInt8(ascii: ":")) == colon else { return nil }
            // Cut at an ASCII byte: the prefix is valid UTF-8, nothing to repair.
            return String(decoding: UnsafeBufferPointer(rebasing: bytes[..<colon]), as: UTF8.self)
        }
        return host ?? address
    }

    /// The session, or nil when accounts says it is not valid; any other failure (accounts
    /// unreachable, a deadline) is thrown, for the client to retry.
    func resolveUnlessInvalid(_ token: String, budget: Duration) async throws(RPCError) -> ResolvedSession? {
        do {
            return try await resolve(token, budget: budget)
        } catch {
            guard error.code == .unauthenticated else { throw error }
            return nil
        }
    }

    func resolve(_ token: String, budget: Duration) async throws(RPCError) -> ResolvedSession {
        guard !token.isEmpty else { throw .unauthenticated("no session: log in first") }
        if let cached = sessions.get(token, nowMs: nowMs()) { return cached }
        guard let accounts = clients["accounts"] else { throw .unavailable("accounts is not deployed") }
        let reply = try await accounts.call(Self.validate, AccountsV1.ValidateSessionRequest(sessionToken: token),
                                            options: CallOptions(deadline: budget))
        var session = ResolvedSession(userID: reply.userId, sessionID: reply.sessionId, expiresAtMs: reply.expiresAtMs)
        session.bucket = limiter.bucket(for: .session(userID: session.userID, sessionID: session.sessionID),
                                        now: RateLimiter.now)
        sessions.put(token, session)
        return session
    }

    /// The envelope sent to the service: the caller the session names stamped, the client's token
    /// left out, and the size checked against what the service accepts.
    /// - Parameter route: read in place (its method passed by value was copied whole, its strings
    ///   and callers retained and released: about 230 instructions a forwarded request, item 111).
    private func forwarding(_ request: IncomingRequest, to route: Route, session: ResolvedSession?,
                            clientHost: String) throws(RPCError) -> Envelope {
        let outgoing = Envelope(
            method: request.envelope.method, callerUserId: session?.userID ?? 0, idempotencyKey: request.envelope.idempotencyKey,
            payload: request.envelope.payload, clientAddress: clientHost, sessionId: session?.sessionID ?? [])
        // Checked on the payload first (cheap), then exactly when close: the envelope adds a few
        // dozen bytes of header.
        let payloadSize = request.envelope.payload.count
        if Int64(payloadSize) + 1_024 > config.serviceMaxMessageSize,
           Int64(outgoing.serializedBytes().count) > config.serviceMaxMessageSize {
            throw RPCError.invalidArgument("the request is \(payloadSize) bytes; \(route.method.service) accepts at most \(config.serviceMaxMessageSize) bytes (\(config.serviceMaxMessageSize >> 20) MiB) a request")
        }
        return outgoing
    }

    /// What a successful call does to the gateway's cached sessions: a logout ends the session it
    /// was made with, a password change every session of its user.
    enum SessionEffect {
        case none
        case logout(token: String)
        case passwordChanged(userID: UInt64)

        /// - Parameter incoming: borrowed: an initializer's parameters are otherwise taken, and
        ///   `SessionEffect(request.envelope, …)` copied the request's envelope whole (item 104).
        ///   Its method compared by number (two string comparisons every request with a session
        ///   before, item 111).
        init(_ incoming: borrowing IncomingRequest, _ session: ResolvedSession?) {
            guard let session, let method = incoming.knownMethod else { self = .none; return }
            switch method {
            case Self.logoutMethod: self = .logout(token: incoming.envelope.sessionToken)
            case Self.changePasswordMethod: self = .passwordChanged(userID: session.userID)
            default: self = .none
            }
        }

        private static let logoutMethod = KnownMethod(AccountsV1.AccountsService.logout.fullName)
        private static let changePasswordMethod = KnownMethod(AccountsV1.AccountsService.changePassword.fullName)

        func apply(after status: StatusCode, to sessions: SessionCache) {
            guard status == .ok else { return }
            switch self {
            case .none: break
            case .logout(let token): sessions.invalidate(token: token)
            case .passwordChanged(let userID): sessions.invalidate(userID: userID)
            }
        }
    }

    private func local(_ method: AnyRPCMethod, _ envelope: Envelope, _ peer: PeerIdentity, _ session: ResolvedSession?) throws -> Envelope {
        guard let session else { throw RPCError.unauthenticated("no session: log in first") }
        switch method.fullName {
        case Self.subscribe.fullName:
            subscriptions.subscribe(peer, user: session.userID)
            let response = CommonV1.SubscribeResponse(heartbeatIntervalMs: UInt32(clamping: config.subscriptionRenewal.wholeMilliseconds))
            return envelope.reply(payload: response.serializedBytes())
        case Self.unsubscribe.fullName:
            subscriptions.unsubscribe(peer, user: session.userID)
            return envelope.reply(payload: CommonV1.UnsubscribeResponse().serializedBytes())
        default:
            throw RPCError.invalidArgument("unknown method \"\(method.fullName)\"")
        }
    }
}
