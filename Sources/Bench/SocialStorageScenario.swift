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
        try await EngineComparison.run(options, schema: "social", logger: logger, measure)
    }

    private static func measure(engine: String, storage: StorageEngine, options: Options, logger: Logger) async throws -> [LatencyStats] {
        // These methods never ask accounts: a client with no server behind it.
        let accounts = WireClient(endpoint: "tcp://127.0.0.1:9", logger: logger)
        let rows = try await EngineComparison.behindHost("social", engine: engine, logger: logger) { events, context, reactor in
            try await SocialService.open(storage, accounts: accounts, publisher: events).makeHost(
                options: HostOptions(name: "social", endpoint: "tcp://127.0.0.1:*"), logger: logger, context: context, reactor: reactor)
        } load: { client, clientReactor in
            var rows: [LatencyStats] = []
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
            return rows
        }
        await accounts.close()
        return rows
    }
}
