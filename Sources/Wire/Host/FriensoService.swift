public import Logging

/// The one shape of a Frienso service: its handlers (one per rpc of its contract: conform to the
/// contract's generated `Handler` too, and `router()` comes with it), where it keeps replies to
/// idempotent requests, and where its handlers run. The host comes with the shape, so a service
/// writes no socket or routing code of its own.
public protocol FriensoService: Sendable {
    associatedtype Replies: ReplyStore

    /// Every rpc of the service's contract, as a router (generated for each contract's `Handler`).
    func router() -> MethodRouter
    /// Where replies to idempotent requests outlive the process (the service's own database).
    var replyStore: Replies { get }
    /// Where handlers run: `.reactor` (the default) or `.pool` for handlers that read and write
    /// files or compute (see `HostOptions.handlerExecution`).
    static var handlerExecution: HandlerExecution { get }
}

extension FriensoService {
    public static var handlerExecution: HandlerExecution { .reactor }

    /// A host serving this service on `options.endpoint` with its durable reply cache.
    public func makeHost(options: HostOptions, logger: Logger, context: ZMQContext = .shared, reactor: Reactor = .shared) -> ServiceHost {
        var options = options
        if Self.handlerExecution == .pool { options.handlerExecution = .pool }
        return ServiceHost(options: options, handler: router(), logger: logger, replyCache: ReplyCache(store: replyStore),
                           context: context, reactor: reactor)
    }
}
