import Foundation
public import FriensoProto
public import Logging
import Synchronization
public import Wire

/// A client of the Frienso gateway: typed calls with the session token attached, and live events.
public final class FriensoClient: Sendable {
    public static let defaultGateway = "tcp://127.0.0.1:7100"

    public let gateway: String
    private let wire: WireClient
    private let tokenBox: Mutex<String>
    private let retryUnavailable: Bool
    private let defaultDeadline: Duration

    /// - Parameters:
    ///   - token: a session token from an earlier login, if any.
    ///   - retryUnavailable: a call that is safe to send again (a mutation with its idempotency
    ///     key, or an idempotent call) answered UNAVAILABLE is sent again, with backoff, until
    ///     its deadline: the gateway says UNAVAILABLE for a moment when a service is restarting
    ///     or was too busy to answer its heartbeats, and a person at the CLI should not see that.
    ///     Off by default: programs that count transient errors (tests, benchmarks) see each one.
    public init(gateway: String = FriensoClient.defaultGateway, token: String = "", options: ClientOptions = ClientOptions(),
                retryUnavailable: Bool = false, logger: Logger, context: ZMQContext = .shared, reactor: Reactor = .shared) {
        self.gateway = gateway
        wire = WireClient(endpoint: gateway, options: options, logger: logger, context: context, reactor: reactor)
        tokenBox = Mutex(token)
        self.retryUnavailable = retryUnavailable
        defaultDeadline = options.defaultDeadline
    }

    public var token: String {
        get { tokenBox.withLock { $0 } }
        set { tokenBox.withLock { $0 = newValue } }
    }

    /// Calls a method through the gateway.
    /// - Parameter mutation: attach a fresh idempotency key, so a resend after a reconnect is
    ///   answered from the service's reply cache instead of being applied twice.
    /// - Parameter idempotent: safe to send again as it is (a chunk at a fixed offset, a logout);
    ///   a read by contract (`method.readOnly`, `frienso:read`) is, without saying so.
    public func call<Request, Response>(
        _ method: RPCMethod<Request, Response>, _ request: Request,
        mutation: Bool = false, idempotencyKey: String? = nil, deadline: Duration? = nil, idempotent: Bool = false
    ) async throws(RPCError) -> Response {
        let key = idempotencyKey ?? (mutation ? UUID().uuidString : "")
        var options = CallOptions(deadline: deadline, sessionToken: token, idempotencyKey: key, idempotent: idempotent)
        guard retryUnavailable && options.mayResend(method) else { return try await wire.call(method, request, options: options) }
        // The same key each time: a try that was applied is answered from the reply cache.
        let until = ContinuousClock.now.advanced(by: deadline ?? defaultDeadline)
        var pause = Duration.milliseconds(50)
        while true {
            options.deadline = ContinuousClock.now.duration(to: until)
            do throws(RPCError) {
                return try await wire.call(method, request, options: options)
            } catch {
                guard error.code == .unavailable, ContinuousClock.now.advanced(by: pause) < until, !Task.isCancelled else { throw error }
                try? await Task.sleep(for: pause) // backoff before the next try
                pause = min(pause * 2, .seconds(1))
            }
        }
    }

    /// Pings `<service>.Ping` through the gateway (`gateway` pings the gateway itself).
    public func ping(_ service: String, deadline: Duration? = nil) async throws(RPCError) -> CommonV1.PingResponse {
        try await wire.ping(service: service, deadline: deadline)
    }

    /// Logs in and keeps the token for later calls.
    public func login(_ login: String, password: String) async throws(RPCError) -> AccountsV1.LoginResponse {
        let response = try await call(AccountsV1.AccountsService.login, AccountsV1.LoginRequest(login: login, password: password))
        token = response.sessionToken
        return response
    }

    /// Live events for the logged-in user, until the task is cancelled. Subscribes, renews the
    /// subscription as the gateway asks, and subscribes again after a reconnect.
    /// - Throws: the subscription's error (e.g. UNAUTHENTICATED) if the first subscribe fails.
    public func events() async throws(RPCError) -> AsyncStream<Envelope> {
        let first = try await subscribe()
        let (stream, continuation) = AsyncStream.makeStream(of: Envelope.self, bufferingPolicy: .bufferingNewest(10_000))
        let renewal = Duration.milliseconds(Int(max(1_000, first.heartbeatIntervalMs)))
        let renewing = Task {
            while !Task.isCancelled {
                try? await Task.sleep(for: renewal)
                _ = try? await self.subscribe()
            }
        }
        let forwarding = Task {
            for await event in wire.events {
                switch event {
                case .event(let envelope): continuation.yield(envelope)
                case .reconnected: _ = try? await self.subscribe()
                }
            }
            continuation.finish()
        }
        continuation.onTermination = { _ in
            renewing.cancel()
            forwarding.cancel()
            // Tell the gateway at once (it would otherwise send events here until the lapse).
            Task { _ = try? await self.call(CommonMethods.unsubscribe, CommonV1.UnsubscribeRequest()) }
        }
        return stream
    }

    private func subscribe() async throws(RPCError) -> CommonV1.SubscribeResponse {
        try await call(CommonMethods.subscribe, CommonV1.SubscribeRequest())
    }

    public func close() async {
        await wire.close()
    }
}
