import FriensoProto
import FriensoTesting
@testable import Geo
import Testing
import Wire

extension GeoTestGroup {
    /// Location updates through a real host start on its reactor thread and are answered from
    /// their commit's thread (`MethodRouter.startOnReactor`, issue 16, item 70): the same checks,
    /// the same answers and the same rows as the task path the other geo tests take in process.
    @Suite("geo: location updates started on the host's reactor", .timeLimit(.minutes(2)))
    struct UpdatesOnReactorTests {
        @Test(arguments: Engine.allCases) func updatesThroughAHost_areCheckedWritten_andAnsweredOnce(engine: Engine) async throws {
            try await withGeo(engine: engine) { geo async throws in
                let logs = CapturedLogs()
                let host = ServiceHost(options: HostOptions(name: "geo", endpoint: "tcp://127.0.0.1:*"), handler: geo.service.router(),
                                       logger: logs.logger("geo-host"))
                try await withRunningServices([host], logger: logs.logger("group")) {
                    let client = WireClient(endpoint: try await host.boundEndpoint(), options: .patient, logger: logs.logger("client"))
                    defer { Task { await client.close() } }
                    func update(_ user: UInt64, _ request: GeoV1.UpdateLocationRequest) async -> Result<GeoV1.UpdateLocationResponse, RPCError> {
                        do {
                            return .success(try await client.call(API.updateLocation, request, options: CallOptions(callerUserID: user)))
                        } catch {
                            return .failure(error)
                        }
                    }
                    let now = geo.clock.now
                    // Many at once: each answered with its own outcome once durable.
                    try await withThrowingTaskGroup(of: Void.self) { group in
                        for user in 1...40 as ClosedRange<UInt64> {
                            group.addTask {
                                let reply = await update(user, GeoV1.UpdateLocationRequest(latitude: 40 + Double(user) / 1_000, longitude: -73,
                                                                                          accuracyM: 5, deviceTimeMs: now))
                                #expect((try? reply.get())?.becameLatest == true, "user \(user): \(reply)")
                            }
                        }
                        try await group.waitForAll()
                    }
                    #expect(host.counters.onReactor.load(ordering: .relaxed) == 40)
                    let rows = try await geo.rows("SELECT count(*) FROM history")
                    #expect(rows.first?.first == "40", "each acknowledged update has its history row")
                    // An older fix goes to history only; the same fix again is answered without a row.
                    #expect((try? await update(1, GeoV1.UpdateLocationRequest(latitude: 41, longitude: -74, accuracyM: 5,
                                                                              deviceTimeMs: now - 60_000)).get())?.becameLatest == false)
                    #expect((try? await update(2, GeoV1.UpdateLocationRequest(latitude: 40.002, longitude: -73, accuracyM: 5,
                                                                              deviceTimeMs: now)).get())?.becameLatest == true)
                    #expect(try await geo.rows("SELECT count(*) FROM history").first?.first == "41")
                    // Refusals keep their stable codes.
                    let bad = await update(1, GeoV1.UpdateLocationRequest(latitude: 91, longitude: 0, accuracyM: 5, deviceTimeMs: now))
                    #expect(bad.failure?.code == .invalidArgument)
                    let anonymous = await update(0, GeoV1.UpdateLocationRequest(latitude: 1, longitude: 1, accuracyM: 5, deviceTimeMs: now))
                    #expect(anonymous.failure?.code == .unauthenticated)
                    #expect(try await geo.call(3, API.latestLocation, GeoV1.LatestLocationRequest(userId: 3)).fix?.latitude == 40.003)
                }
            }
        }
    }
}

extension Result {
    fileprivate var failure: Failure? {
        if case .failure(let error) = self { return error }
        return nil
    }
}
