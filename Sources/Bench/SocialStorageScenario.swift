import Foundation
import FriensoProto
public import Logging
import ServiceLifecycle
import Social
import Storage
import Synchronization
import Wire

/// `social-storage`: the same social service on SQLite and on PostgreSQL, in one run, behind its
/// own ZeroMQ host (no gateway, callers stamped as the gateway does): a one-row read
/// (GetDiscoverySettings), a read of both request lists (ListFriendRequests: SQLite, two queries
/// in one read transaction; PostgreSQL, one statement), and a durable write with its graph event
/// (SetFindable, flipped each time so every call writes), at 1 and 64 in flight. None of them
/// asks accounts: the engine is what differs.
public enum SocialStorageScenario {
    public typealias Options = EngineScenarioOptions

    public static func run(_ options: Options, logger: Logger) async throws -> String {
        var quiet = logger
        quiet.logLevel = .warning
        let rows = try await EngineComparison.each(options.engines, schema: "social", logger: quiet) { engine, storage in
            try await measure(engine: engine, storage: storage, options: options, logger: quiet)
        }
        return EngineComparison.report(rows, inFlight: options.inFlight)
    }

    private static func measure(engine: String, storage: StorageEngine, options: Options, logger: Logger) async throws -> [LatencyStats] {
        let context = ZMQContext(), reactor = Reactor(name: "bench-social-\(engine)")
        let events = Publisher(name: "social", endpoint: "tcp://127.0.0.1:*", logger: logger, context: context, reactor: reactor)
        // These methods never ask accounts: a client with no server behind it.
        let accounts = WireClient(endpoint: "tcp://127.0.0.1:9", logger: logger, context: context, reactor: reactor)
        let service = try await SocialService.open(storage, accounts: accounts, publisher: events)
        let host = service.makeHost(options: HostOptions(name: "social", endpoint: "tcp://127.0.0.1:*"), logger: logger,
                                    context: context, reactor: reactor)
        let group = ServiceGroup(configuration: .init(services: [.init(service: events), .init(service: host)], logger: logger))
        let clientContext = ZMQContext(), clientReactor = Reactor(name: "bench-client-\(engine)")
        var rows: [LatencyStats] = []
        try await withThrowingTaskGroup(of: Void.self) { tasks in
            tasks.addTask { try await group.run() }
            let client = WireClient(endpoint: try await host.boundEndpoint(), logger: logger, context: clientContext, reactor: clientReactor)
            let users = UInt64(options.users)
            let counter = Counter()
            await withTaskExecutorPreference(clientReactor) {
                for n in options.inFlight {
                    rows.append(await drive(name: "\(engine): GetDiscoverySettings (1 read)", inFlight: n, count: options.requests,
                                            warmup: options.warmup) {
                        let caller = UInt64(counter.next()) % users + 1
                        return (try? await client.call(SocialV1.SocialService.getDiscoverySettings, SocialV1.GetDiscoverySettingsRequest(),
                                                       options: CallOptions(callerUserID: caller))) != nil
                    })
                    rows.append(await drive(name: "\(engine): ListFriendRequests (incoming and outgoing)", inFlight: n, count: options.requests,
                                            warmup: options.warmup) {
                        let caller = UInt64(counter.next()) % users + 1
                        return (try? await client.call(SocialV1.SocialService.listFriendRequests, SocialV1.ListFriendRequestsRequest(),
                                                       options: CallOptions(callerUserID: caller))) != nil
                    })
                    rows.append(await drive(name: "\(engine): SetFindable (durable write + graph event)", inFlight: n,
                                            count: options.requests / 4, warmup: options.warmup / 4) {
                        let i = UInt64(counter.next())
                        let caller = i % users + 1
                        return (try? await client.call(SocialV1.SocialService.setFindable, SocialV1.SetFindableRequest(findable: (i / users) % 2 == 0),
                                                       options: CallOptions(callerUserID: caller))) != nil
                    })
                }
            }
            await client.close()
            await accounts.close()
            await group.triggerGracefulShutdown()
            try await tasks.waitForAll()
        }
        return rows
    }
}
