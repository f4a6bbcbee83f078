public import FriensoProto
public import Logging
public import ServiceLifecycle
import Synchronization

/// Serves one ROUTER endpoint: decodes envelopes, enforces deadlines, answers `<name>.Ping` and
/// heartbeats, replays idempotent replies, and hands every other request to a `RequestHandler`
/// in a structured task group. On graceful shutdown it stops taking requests (new ones get
/// UNAVAILABLE), lets the running ones finish, sends their replies and closes.
public final class ServiceHost: Service, Sendable {
    public let options: HostOptions
    public let counters = HostCounters()
    private let handler: any RequestHandler
    /// nil: requests are handed over whatever key they carry (the gateway: the services keep the replies).
    private let replyCache: ReplyCache?
    private let logger: Logger
    private let context: ZMQContext
    public let reactor: Reactor
    private let commands: CommandQueue<HostCommand>
    private let bound = OneShot<Result<String, ZMQError>>()
    private let loopFinished = OneShot<Void>()
    private let started = ContinuousClock.now

    /// - Parameters:
    ///   - replyCache: where replies to idempotent requests are kept; pass one with a durable store
    ///     for mutations that must not happen twice across a restart, or nil for a host that only
    ///     forwards (the gateway: it has no caller to key replies by, the services do).
    ///   - reactor: the event loop that owns the socket (and runs handlers, see `HostOptions.handlerExecution`).
    public init(
        options: HostOptions, handler: some RequestHandler, logger: Logger,
        replyCache: ReplyCache? = ReplyCache(), context: ZMQContext = .shared, reactor: Reactor = .shared
    ) {
        self.options = options
        self.reactor = reactor
        commands = CommandQueue(reactor: reactor)
        self.handler = handler
        self.replyCache = replyCache
        self.context = context
        var logger = RequestScope.attach(to: logger)
        logger[metadataKey: "service"] = "\(options.name)"
        self.logger = logger
    }

    /// The endpoint actually bound (ephemeral port resolved), once `run` has bound it.
    /// - Throws: the bind error if binding failed.
    public func boundEndpoint() async throws(ZMQError) -> String {
        try await bound.value.get()
    }

    /// Sends an unsolicited envelope (an event) to a peer that reached this host.
    public func push(_ envelope: Envelope, to peer: PeerIdentity) {
        commands.post(.push(peer, envelope.serializedBytes()))
    }

    public func run() async throws {
        let (requests, continuation) = AsyncStream.makeStream(of: IncomingRequest.self)
        let options = options, commands = commands, counters = counters, logger = logger
        let context = context, bound = bound, reactor = reactor, loopFinished = loopFinished
        reactor.execute {
            do throws(ZMQError) {
                let loop = try HostLoop(options: options, context: context, commands: commands, requests: continuation,
                                        counters: counters, logger: logger, finished: loopFinished)
                bound.fulfil(.success(try loop.bind()))
                reactor.register(loop)
            } catch {
                continuation.finish()
                loopFinished.fulfil(())
                bound.fulfil(.failure(error))
            }
        }
        let endpoint = try await bound.value.get()
        logger.info("listening", metadata: ["endpoint": "\(endpoint)"])
        let draining = OneShot<Void>()
        await withTaskExecutorPreference(reactor) {
            await withGracefulShutdownHandler {
                await self.dispatch(requests, draining: draining)
            } onGracefulShutdown: {
                commands.post(.drain)
                draining.fulfil(())
            }
        }
        commands.post(.stop)
        await loopFinished.value
        logger.info("stopped", metadata: ["served": "\(counters.replied.load(ordering: .relaxed))"])
    }

    /// Runs a handler task per request until the request stream ends; once draining has begun,
    /// handlers still running after `drainTimeout` are cancelled.
    private func dispatch(_ requests: AsyncStream<IncomingRequest>, draining: OneShot<Void>) async {
        let drainTimeout = options.drainTimeout
        await withTaskGroup(of: Void.self) { race in
            race.addTask {
                let onPool = self.options.handlerExecution == .pool
                await withDiscardingTaskGroup { group in
                    for await request in requests {
                        if onPool {
                            group.addTask(executorPreference: globalConcurrentExecutor) { await self.serve(request) }
                        } else {
                            group.addTask { await self.serve(request) }
                        }
                    }
                }
            }
            race.addTask {
                await draining.value
                try? await Task.sleep(for: drainTimeout)
            }
            _ = await race.next()
            draining.fulfil(())
            race.cancelAll()
        }
    }

    private func serve(_ request: IncomingRequest) async {
        let label = RequestScope.Label(requestID: request.envelope.requestId, method: request.envelope.method)
        await RequestScope.$current.withValue(label) { await serveInScope(request) }
    }

    private func serveInScope(_ request: IncomingRequest) async {
        let envelope = request.envelope
        logger.trace("request")
        if envelope.method == "\(options.name).Ping" {
            return reply(request.key, ping(envelope))
        }
        guard !envelope.idempotencyKey.isEmpty, let replyCache else {
            return reply(request.key, await handler.handle(request, logger: logger))
        }
        let (key, digest) = ReplyCache.key(for: envelope)
        switch await replyCache.begin(key, digest: digest, waiter: request.key) {
        case .mismatch:
            logger.notice("refused an idempotency key reused for a different request")
            reply(request.key, envelope.reply(error: .invalidArgument(
                "idempotency key \"\(envelope.idempotencyKey)\" was already used for a different \(envelope.method) request: use a new key for a new request")))
        case .replay(let stored):
            logger.debug("replayed an idempotent reply")
            reply(request.key, stored)
        case .wait:
            logger.debug("waiting for the same idempotent request in flight")
        case .execute(let previous):
            let result: Envelope
            if let previous {
                result = previous
            } else {
                result = await handle(request, scope: IdempotencyScope(key: key, digest: digest, dryRun: false))
            }
            for waiter in await replyCache.finish(key, digest: digest, result) { reply(waiter, result) }
            reply(request.key, result)
        case .recover:
            logger.notice("answering a request applied before a crash that lost its reply (a dry run: nothing is written again)")
            let result = await handle(request, scope: IdempotencyScope(key: key, digest: digest, dryRun: true))
            for waiter in await replyCache.finish(key, digest: digest, result) { reply(waiter, result) }
            reply(request.key, result)
        }
    }

    /// Runs the handler with the request's idempotency scope bound, when replies are durable (the
    /// service's database then writes the claim with the mutation).
    private func handle(_ request: IncomingRequest, scope: IdempotencyScope) async -> Envelope {
        guard replyCache?.isDurable == true else { return await handler.handle(request, logger: logger) }
        return await IdempotencyScope.$current.withValue(scope) { await handler.handle(request, logger: logger) }
    }

    private func reply(_ key: UInt64, _ envelope: Envelope) {
        commands.post(.reply(key: key, envelope: envelope))
    }

    private func ping(_ request: Envelope) -> Envelope {
        let echo = (try? CommonV1.PingRequest(serializedBytes: request.payload))?.echo ?? []
        let response = CommonV1.PingResponse(
            service: options.name, echo: echo, version: options.version,
            uptimeMs: UInt64(max(0, started.duration(to: .now).wholeMilliseconds)))
        return request.reply(payload: response.serializedBytes())
    }
}
