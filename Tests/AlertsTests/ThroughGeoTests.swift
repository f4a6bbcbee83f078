@testable import Alerts
import Foundation
import FriensoProto
import FriensoTesting
import Geo
import Testing
import Wire

extension AlertsTestGroup {
    @Suite("alerts: grants through geo", .serialized, .timeLimit(.minutes(2)))
    struct ThroughGeoTests {
        /// Alerts publishes grants on a real PUB socket; geo follows them with its GrantConsumer.
        /// Ivy (40) is friends with nobody, so only a grant lets anyone see her.
        @Test func aWatchersView_onlyForAcceptedWatchers_andOnlyUntilTheWatchEnds() async throws {
            let logs = CapturedLogs()
            let temp = try TemporaryDirectory("frienso-alerts-geo")
            defer { temp.remove() }
            for d in ["geo", "alerts"] { try FileManager.default.createDirectory(atPath: "\(temp.path)/\(d)", withIntermediateDirectories: true) }
            let peers = FakePeers()
            peers.state.withLock { $0.circles[40] = [.user(41), .user(42)] }
            let publisher = Publisher(name: "alerts", endpoint: "tcp://127.0.0.1:*", logger: logs.logger("alerts-pub"))
            var config = testConfig()
            config.grantRepublishInterval = .milliseconds(200) // a late subscriber converges quickly
            let alerts = try AlertsService(directory: "\(temp.path)/alerts", peers: peers, events: publisher, config: config, logger: logs.logger("alerts"))
            let alertsHost = alerts.makeHost(options: HostOptions(name: "alerts", endpoint: "tcp://127.0.0.1:*"), logger: logs.logger("alerts-host"))
            let worker = AlertsWorker(service: alerts, socialEvents: nil, logger: logs.logger("worker"))
            let geo = try GeoService(directory: "\(temp.path)/geo", graph: StaticGraph(), publisher: nil, logger: logs.logger("geo"))
            let geoHost = geo.makeHost(options: HostOptions(name: "geo", endpoint: "tcp://127.0.0.1:*"), logger: logs.logger("geo-host"))
            try await withRunningServices([publisher, alertsHost, worker, geoHost], logger: logs.logger("group")) {
                let grants = GrantConsumer(service: geo, endpoint: try await publisher.boundEndpoint(), logger: logs.logger("grants"))
                try await withRunningServices([grants], logger: logs.logger("group")) {
                    let toAlerts = WireClient(endpoint: try await alertsHost.boundEndpoint(), options: .patient, logger: logs.logger("client"))
                    let toGeo = WireClient(endpoint: try await geoHost.boundEndpoint(), options: .patient, logger: logs.logger("client"))
                    @Sendable func sees(_ viewer: UInt64) async throws -> Bool {
                        try await toGeo.call(GeoV1.GeoService.friendsLocations, GeoV1.FriendsLocationsRequest(), options: CallOptions(callerUserID: viewer))
                            .friends.contains { $0.userId == 40 }
                    }
                    _ = try await toGeo.call(GeoV1.GeoService.updateLocation, GeoV1.UpdateLocationRequest(
                        latitude: 33.78, longitude: -118.11, accuracyM: 5, deviceTimeMs: WallClock.milliseconds()), options: CallOptions(callerUserID: 40))
                    let session = try #require(try await toAlerts.call(AlertsV1.AlertsService.startWatch, AlertsV1.StartWatchRequest(durationSeconds: 4),
                                                                       options: CallOptions(callerUserID: 40)).session)
                    _ = try await toAlerts.call(AlertsV1.AlertsService.respondInbox, AlertsV1.RespondInboxRequest(
                        kind: .watch, requestId: session.sessionId, action: .accept), options: CallOptions(callerUserID: 41))
                    _ = try await toAlerts.call(AlertsV1.AlertsService.respondInbox, AlertsV1.RespondInboxRequest(
                        kind: .watch, requestId: session.sessionId, action: .reject), options: CallOptions(callerUserID: 42))
                    try await eventually("the accepted watcher sees Ivy") { try await sees(41) }
                    #expect(try await !sees(42), "the watcher who declined does not")
                    #expect(try await !sees(43), "nor does anyone else")
                    // The watch runs out with nobody calling: the view goes.
                    try await eventually("the view to end with the watch", timeout: .seconds(15)) { try await !sees(41) }
                    #expect(WallClock.milliseconds() >= session.endsAtMs)
                    await toAlerts.close()
                    await toGeo.close()
                }
            }
        }
    }
}
