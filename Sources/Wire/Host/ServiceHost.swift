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
    private let dispatcher: RequestDispatcher
    private let logger: Logger
    private let context: ZMQContext
    public let reactor: Reactor
    private let commands: CommandQueue<HostCommand>
    private let bound = OneShot<Result<String, ZMQError>>()
    private let loopFinished = OneShot<Void>()

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
        dispatcher = RequestDispatcher(name: options.name, version: options.version, handler: handler, replyCache: replyCache,
                                       metrics: options.metrics)
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
        commands.post(.push(peer, envelope.wireBytes))
    }

    public func run() async throws {
        let (requests, continuation) = AsyncStream.makeStream(of: [IncomingRequest].self)
        let options = options, commands = commands, counters = counters, logger = logger
        let context = context, bound = bound, reactor = reactor, loopFinished = loopFinished, dispatcher = dispatcher
        reactor.execute {
            do throws(ZMQError) {
                let loop = try HostLoop(options: options, context: context, commands: commands, requests: continuation,
                                        counters: counters, logger: logger, finished: loopFinished, dispatcher: dispatcher)
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
        await dispatcher.flush() // replies still being saved: a restart must find them
        commands.post(.stop)
        await loopFinished.value
        logger.info("stopped", metadata: ["served": "\(counters.replied.load(ordering: .relaxed))"])
    }

    /// Runs each request on a handler task (one parked in `HandlerTasks` when one waits, else a
    /// new one) until the request stream ends; once draining has begun, handlers still running
    /// after `drainTimeout` are cancelled.
    private func dispatch(_ requests: AsyncStream<[IncomingRequest]>, draining: OneShot<Void>) async {
        let drainTimeout = options.drainTimeout
        await withTaskGroup(of: Void.self) { race in
            race.addTask {
                let onPool = self.options.handlerExecution == .pool
                let tasks = HandlerTasks.kept ? HandlerTasks(keepParked: self.options.parkedHandlerTasks) : nil
                await withDiscardingTaskGroup { group in
                    for await batch in requests {
                        // Each request moved out of the batch into its task, in arrival order
                        // (`for request in batch` copied it out: item 106): a parked one's when
                        // one waits (item 114), else a new one.
                        var batch = batch
                        batch.forEachMovedOut(leaving: { IncomingRequest.filler }) { request in
                            if let parked = tasks?.takeParked() {
                                parked.resume(returning: request)
                                return
                            }
                            self.counters.handlerTasks.add(1, ordering: .relaxed)
                            if onPool {
                                group.addTask(executorPreference: globalConcurrentExecutor) { await self.serve(request, then: tasks) }
                            } else {
                                group.addTask { await self.serve(request, then: tasks) }
                            }
                        }
                    }
                    // The stream has ended (or this task was cancelled): the parked tasks end,
                    // and the busy ones when their handlers return, for the group to finish.
                    tasks?.close()
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

    /// Serves `first`, then, with `tasks`, every request handed to this task while it is parked
    /// there, until it is told to end.
    private func serve(_ first: IncomingRequest, then tasks: HandlerTasks?) async {
        await serve(first)
        guard let tasks else { return }
        while let request = await tasks.next() {
            await serve(request)
        }
    }

    private func serve(_ request: IncomingRequest) async {
        let label = RequestScope.Label(requestID: request.envelope.requestId, method: request.envelope.method,
                                       callerUserID: request.envelope.callerUserId)
        await RequestScope.$current.withValue(label) { await serveInScope(request) }
    }

    private func serveInScope(_ request: IncomingRequest) async {
        await dispatcher.dispatch(request, logger: logger) { key, envelope in self.reply(key, consume envelope) }
    }

    private func reply(_ key: UInt64, _ envelope: consuming Envelope) {
        commands.post(.reply(key: key, envelope: consume envelope))
    }
}
