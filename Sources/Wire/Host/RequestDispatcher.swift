import Foundation
public import FriensoProto
public import Logging

/// What a host does with a request between the socket and the handler: answers `<name>.Ping`,
/// and for a request with an idempotency key runs the reply cache (replay a kept reply, let a
/// duplicate wait for the one in flight, refuse a key reused for another request, recover a
/// request applied before a crash) with the request's `IdempotencyScope` bound for the storage
/// layer. `ServiceHost` uses it behind its socket; a test calls it in process through the same
/// code (`FriensoTesting.RouterClient`), so both paths share one behaviour.
public struct RequestDispatcher: Sendable {
    public let name: String
    public let version: String
    private let handler: any RequestHandler
    /// nil: requests are handed over whatever key they carry (the gateway: the services keep the replies).
    private let replyCache: ReplyCache?
    private let started = Moment.now
    /// `<name>.Ping` and `<name>.Metrics`, made once rather than per request, with their place in
    /// `KnownMethod`'s index when it has them (a test's host may be named outside it).
    private let pingMethod: OwnMethod, metricsMethod: OwnMethod
    private let metrics: MetricsExposition?

    public init(name: String, version: String = FriensoVersion.current, handler: some RequestHandler, replyCache: ReplyCache?,
                metrics: MetricsExposition? = nil) {
        self.name = name
        pingMethod = OwnMethod("\(name).Ping")
        metricsMethod = OwnMethod("\(name).Metrics")
        self.metrics = metrics
        self.version = version
        self.handler = handler
        self.replyCache = replyCache
    }

    /// The handler, when it takes requests on the host's reactor thread.
    var reactorHandler: (any ReactorRequestHandler)? {
        (handler as? any ReactorRequestHandler).flatMap { $0.takesRequestsOnReactor ? $0 : nil }
    }

    /// `FRIENSO_PING=task` answers Ping on a task, as before, for A/B runs.
    private static let pingOnReactor = ProcessInfo.processInfo.environment["FRIENSO_PING"] != "task"

    /// Whether the host answers a request for `method` (`known`: in `KnownMethod`'s index)
    /// itself on its reactor thread (`ping`): a Ping, which reads nothing but the host's name,
    /// version and clock.
    func answersOnReactor(_ known: KnownMethod?, _ method: String) -> Bool {
        Self.pingOnReactor && pingMethod.matches(known, method)
    }

    /// Whether the reactor handler may take `envelope`: when `dispatch` would hand it straight to
    /// the handler (not a Ping, no reply to replay or keep), or when it is keyed and its method
    /// starts keyed requests there (`takeKeyed`).
    /// - Parameter known: `envelope`'s method in `KnownMethod`'s index.
    func offersToReactor(_ envelope: Envelope, _ known: KnownMethod?, _ reactorHandler: any ReactorRequestHandler) -> Bool {
        guard !pingMethod.matches(known, envelope.method), !metricsMethod.matches(known, envelope.method) else {
            return false
        }
        return envelope.idempotencyKey.isEmpty || replyCache == nil || reactorHandler.takesKeyedOnReactor(envelope.method)
    }

    /// Whether `takeKeyed`, not the handler's `take`, gets a request the reactor handler was offered.
    func runsKeyed(_ envelope: Envelope) -> Bool {
        !envelope.idempotencyKey.isEmpty && replyCache != nil
    }

    /// `dispatch` for a keyed request of a method that starts them on the reactor
    /// (`MethodRouter.startOnReactor(_:keyed:_:)`), on the host's reactor thread: the reply cache's
    /// steps that need no store read happen here (a kept reply, a duplicate in flight, a key
    /// reused); a run starts the handler with the request's scope; its reply is kept and given
    /// to the duplicates that waited, from the thread that answered. A run whose write met an
    /// earlier run's claim goes on on a task, as `dispatch` goes on (the store read, the dry run);
    /// so does a run the handler declines (`startKeyed` false), through its registered handler.
    /// - Returns: false only without a reply cache (the host then queues the request for `dispatch`).
    func takeKeyed(_ request: IncomingRequest, reply: ReactorReply, handler: any ReactorRequestHandler, logger: Logger) -> Bool {
        guard let replyCache else { return false }
        let envelope = request.envelope
        let (key, digest) = ReplyCache.key(for: envelope)
        switch replyCache.beginInMemory(key, digest: digest, waiter: request.key) {
        case .replay(let stored):
            logger.debug("replayed an idempotent reply")
            reply(stored)
        case .mismatch:
            logger.notice("refused an idempotency key reused for a different request")
            reply(Self.keyReused(envelope))
        case .wait:
            logger.debug("waiting for the same idempotent request in flight")
        case .execute, .recover: // memory alone never says `.recover` (that takes the store)
            let scope = IdempotencyScope(key: key, digest: digest, dryRun: false, storeHolds: { await replyCache.storeHolds(key) },
                                         request: replyCache.isDurable ? envelope : nil)
            let loop = reply.fromAnyThread
            replyCache.runStarted()
            let done = LaterReply(loop: loop, taker: { result in
                defer { replyCache.runEnded() }
                guard scope.claims.hasCollided else {
                    // A reply its transaction wrote (`IdempotencyScope.reply(payload:)`) is not saved again.
                    let durable = result.status == .ok && scope.claims.keptReply != nil
                    for waiter in replyCache.finish(key, digest: digest, result, durable: durable) { loop.send(result, to: waiter) }
                    return loop(result)
                }
                // Rare (a retry after a restart, or on another instance): the store is read on a task.
                Self.onTask(counted: replyCache) {
                    await self.afterCollision(request, key: key, digest: digest, result, logger: logger) { loop.send($1, to: $0) }
                }
            })
            if !handler.startKeyed(request, scope: scope, done: done) {
                Self.onTask(counted: replyCache) { done(await handle(request, scope: scope, cache: replyCache, logger: logger)) }
            }
        }
        return true
    }

    /// Runs `work` on a task that a graceful stop's `flush` waits for (`ReplyCache.runStarted`).
    private static func onTask(counted cache: ReplyCache, _ work: @escaping @Sendable () async -> Void) {
        cache.runStarted()
        Task {
            defer { cache.runEnded() }
            await work()
        }
    }

    /// Answers `request`. `deliver` is called with the key of each request the reply is for: this
    /// one (`request.key`), and any duplicates that waited for it; a duplicate that waits is
    /// answered later, when the request it waits for finishes.
    ///
    /// The request's envelope is read where the request keeps it, and each reply handed to
    /// `deliver` (`consuming`): a copy of an envelope held across this function's suspensions, and
    /// one of each reply, cost about 400 instructions each (issue 16, item 106).
    public func dispatch(_ request: IncomingRequest, logger: Logger, deliver: @Sendable (UInt64, consuming Envelope) -> Void) async {
        logger.trace("request")
        if pingMethod.matches(request.knownMethod, request.envelope.method) {
            return deliver(request.key, ping(request.envelope))
        }
        if metricsMethod.matches(request.knownMethod, request.envelope.method) {
            return deliver(request.key, await exposition(request.envelope, logger: logger))
        }
        guard !request.envelope.idempotencyKey.isEmpty, let replyCache else {
            return deliver(request.key, await handler.handle(request, logger: logger))
        }
        let (key, digest) = ReplyCache.key(for: request.envelope)
        let claimsFirst = handler.claimsFirst(request.envelope.method)
        let begun = await replyCache.begin(key, digest: digest, waiter: request.key, claimsFirst: claimsFirst)
        if claimsFirst, case .execute(previous: nil) = begun {
            // Run at once; the store is read only if the claim finds this request applied before.
            let scope = IdempotencyScope(key: key, digest: digest, dryRun: false,
                                         storeHolds: { await replyCache.storeHolds(key) })
            let result = await handle(request, scope: scope, cache: replyCache, logger: logger)
            guard scope.claims.hasCollided else {
                for waiter in replyCache.finish(key, digest: digest, result) { deliver(waiter, result) }
                return deliver(request.key, result)
            }
            return await afterCollision(request, key: key, digest: digest, result, logger: logger, deliver: deliver)
        }
        await conclude(begun, request, key: key, digest: digest, logger: logger, deliver: deliver)
    }

    /// A run of a claims-first request whose write met an earlier run's claim: answered as the
    /// durable store says (`ReplyCache.afterCollision`), or with `result` (the refusal) when it has nothing.
    private func afterCollision(_ request: IncomingRequest, key: String, digest: UInt64, _ result: Envelope, logger: Logger,
                                deliver: @Sendable (UInt64, consuming Envelope) -> Void) async {
        guard let replyCache else { return deliver(request.key, result) }
        guard let stored = await replyCache.afterCollision(key, digest: digest) else {
            for waiter in replyCache.finish(key, digest: digest, result) { deliver(waiter, result) }
            return deliver(request.key, result)
        }
        logger.debug("a request that claims first met its earlier run's claim: answered from the store")
        await conclude(stored, request, key: key, digest: digest, logger: logger, deliver: deliver)
    }

    private static func keyReused(_ envelope: Envelope) -> Envelope {
        envelope.reply(error: .invalidArgument(
            "idempotency key \"\(envelope.idempotencyKey)\" was already used for a different \(envelope.method) request: use a new key for a new request"))
    }

    /// What `begun` says of a keyed request, once nothing remains to read.
    private func conclude(_ begun: ReplyCache.Begin, _ request: IncomingRequest, key: String, digest: UInt64, logger: Logger,
                          deliver: @Sendable (UInt64, consuming Envelope) -> Void) async {
        guard let replyCache else { return }
        let envelope = request.envelope
        switch begun {
        case .mismatch(let waiters):
            logger.notice("refused an idempotency key reused for a different request")
            let refusal = Self.keyReused(envelope)
            for waiter in waiters { deliver(waiter, refusal) }
            deliver(request.key, refusal)
        case .replay(let stored):
            logger.debug("replayed an idempotent reply")
            deliver(request.key, stored)
        case .wait:
            logger.debug("waiting for the same idempotent request in flight")
        case .execute(let previous):
            let result: Envelope
            if let previous {
                result = previous
            } else {
                result = await handle(request, scope: IdempotencyScope(key: key, digest: digest, dryRun: false), cache: replyCache, logger: logger)
            }
            for waiter in replyCache.finish(key, digest: digest, result) { deliver(waiter, result) }
            deliver(request.key, result)
        case .recover:
            logger.notice("answering a request applied before a crash that lost its reply (a dry run: nothing is written again)")
            let scope = IdempotencyScope(key: key, digest: digest, dryRun: true)
            var result = await handle(request, scope: scope, cache: replyCache, logger: logger)
            // The claim says the first run committed: a refusal now is the dry run meeting the
            // first run's own rows (a registration finds its username taken), not the answer.
            // Transient failures stay as they are, for the client to retry.
            if result.status != .ok, !ReplyCache.isTransient(result.status) {
                result = envelope.reply(error: scope.appliedOnceAlready)
            }
            for waiter in replyCache.finish(key, digest: digest, result) { deliver(waiter, result) }
            deliver(request.key, result)
        }
    }

    /// Runs the handler with the request's idempotency scope bound, when replies are durable (the
    /// service's database then writes the claim with the mutation).
    private func handle(_ request: IncomingRequest, scope: IdempotencyScope, cache: ReplyCache, logger: Logger) async -> Envelope {
        guard cache.isDurable else { return await handler.handle(request, logger: logger) }
        return await IdempotencyScope.$current.withValue(scope) { await handler.handle(request, logger: logger) }
    }

    /// Waits until every reply handed to the durable store is saved (a graceful stop).
    public func flush() async {
        await replyCache?.flush()
    }

    /// `<name>.Metrics`: the process's metrics, to a caller whose token matches.
    private func exposition(_ request: Envelope, logger: Logger) async -> Envelope {
        guard let metrics else {
            return request.reply(error: RPCError(.notFound, "\(name) exports no metrics"))
        }
        if let token = metrics.token {
            let given = (try? CommonV1.MetricsRequest(serializedBytes: request.payload))?.token ?? []
            guard ScrapeToken.equal(given, token) else {
                logger.warning("refused a metrics scrape without the launcher's token")
                return request.reply(error: .permissionDenied("\(name).Metrics answers the launcher only: the scrape token does not match"))
            }
        }
        return request.reply(payload: CommonV1.MetricsResponse(exposition: await metrics.render()).serializedBytes())
    }

    func ping(_ request: Envelope) -> Envelope {
        let echo = (try? CommonV1.PingRequest(serializedBytes: request.payload))?.echo ?? []
        let response = CommonV1.PingResponse(
            service: name, echo: echo, version: version,
            uptimeMs: UInt64(max(0, started.duration(to: .now).wholeMilliseconds)))
        return request.reply(payload: response.serializedBytes())
    }
}
