import Foundation
import Testing
import GRDB
import FriensoProto
import FriensoTesting
@testable import Geo
import Logging
import SocialReplica
import Synchronization
import Wire

typealias Recorder = EventRecorder

extension EventRecorder {
    func nearby() -> [(viewer: String, event: GeoV1.FriendNearbyEvent)] {
        take().filter { $0.method == "geo.FriendNearby" }.compactMap { e in
            (try? GeoV1.FriendNearbyEvent(serializedBytes: e.payload)).map { (e.topic, $0) }
        }
    }
}

/// A clock the test moves.
final class TestClock: Sendable {
    private let ms = Atomic<Int64>(1_800_000_000_000)
    var now: Int64 { ms.load(ordering: .relaxed) }
    func advance(_ by: Int64) { ms.add(by, ordering: .relaxed) }
}

/// The media service as geo's check-ins use it: records attaches; "bad" ids are refused.
final class FakePhotos: CheckInPhotos {
    let attached = Mutex<[(user: UInt64, mediaID: String)]>([])
    let down = Atomic<Bool>(false)

    func attach(user: UInt64, mediaID: String, deadline: Duration) async throws {
        if down.load(ordering: .relaxed) { throw RPCError.unavailable("media is down (test)") }
        if mediaID.hasPrefix("bad") { throw RPCError.notFound("no photo \(mediaID) of yours") }
        attached.withLock { $0.append((user, mediaID)) }
    }
}

struct GeoHarness: Sendable {
    let service: GeoService
    let photos: FakePhotos
    let client: RouterClient
    let graph: StaticGraph
    let recorder: Recorder
    let clock: TestClock
    let logs: CapturedLogs
    let storage: TestStorage

    func call<Q, R>(_ user: UInt64, _ method: RPCMethod<Q, R>, _ request: Q) async throws -> R {
        try await client.call(method, request, options: CallOptions(callerUserID: user))
    }

    /// A location update at the test clock's time (minus `ago` ms).
    @discardableResult
    func locate(_ user: UInt64, _ lat: Double, _ lon: Double, ago: Int64 = 0, status: String? = nil) async throws -> Bool {
        try await call(user, GeoV1.GeoService.updateLocation, GeoV1.UpdateLocationRequest(
            latitude: lat, longitude: lon, accuracyM: 5, deviceTimeMs: clock.now - ago, setStatus: status != nil, status: status ?? "")).becameLatest
    }

    func befriend(_ a: UInt64, _ b: UInt64) { graph.apply(SocialV1.GraphEvent(change: .friendshipAdded, userA: min(a, b), userB: max(a, b))) }
    func findable(_ users: UInt64...) { for u in users { graph.apply(SocialV1.GraphEvent(change: .findableOn, userA: u)) } }
}

/// Runs geo in process on `storage` (a fresh one of `engine` unless given: a test that
/// "restarts" geo passes the same storage to each run) with a graph the test controls.
func withGeo<T: Sendable>(engine: Engine = .sqlite, storage given: TestStorage? = nil, graph: StaticGraph = StaticGraph(),
                          clock: TestClock = TestClock(), operatorKey: String = "", instance: Int = 1, instances: Int = 1,
                          _ body: @Sendable (GeoHarness) async throws -> T) async throws -> T {
    let logs = CapturedLogs()
    return try await TestStorage.withOpen(engine, given: given, service: "geo") { storage, opened in
        var config = GeoConfig()
        config.operatorKey = operatorKey
        let (recorder, photos) = (Recorder(), FakePhotos())
        let service = try await GeoService.open(opened, instance: instance, instances: instances, graph: graph, publisher: recorder, config: config,
                                                photos: photos, logger: logs.logger("geo"), now: { clock.now })
        // In process: the router and the durable reply cache, as the host runs them (no socket).
        let client = RouterClient(service, name: "geo", logger: logs.logger("geo-host"))
        let outcome: Result<T, any Error>
        do {
            outcome = .success(try await body(GeoHarness(service: service, photos: photos, client: client, graph: graph, recorder: recorder,
                                                         clock: clock, logs: logs, storage: storage)))
        } catch {
            print("geo test failed (\(storage.engine)); logs:\n\(logs.dump().suffix(6000))")
            outcome = .failure(error)
        }
        await client.flush() // a graceful stop: replies being saved are in before a "restart"
        return try outcome.get()
    }
}

extension GeoHarness {
    /// The rows `sql` selects from geo's tables, each value as text (numbers as Swift prints
    /// them on SQLite, as PostgreSQL does on PostgreSQL: compare them as numbers).
    func rows(_ sql: String) async throws -> [[String]] {
        switch storage.engine {
        case .sqlite:
            let store = service.store as! SQLiteGeoStore
            return try await store.database.read { db in
                try Row.fetchAll(db, sql: sql).map { row in
                    (0..<row.count).map { i -> String in
                        switch (row[i] as DatabaseValue).storage {
                        case .null: ""
                        case .int64(let v): "\(v)"
                        case .double(let v): "\(v)"
                        case .string(let v): v
                        case .blob(let v): v.map { String(format: "%02x", $0) }.joined()
                        }
                    }
                }
            }
        case .postgres:
            return try await storage.psql(sql).split(separator: "\n", omittingEmptySubsequences: true)
                .map { $0.split(separator: "|", omittingEmptySubsequences: false).map(String.init) }
        }
    }

    /// One number `sql` selects.
    func number(_ sql: String) async throws -> Double {
        Double(try await rows(sql).first?.first ?? "") ?? .nan
    }
}

/// Every geo suite that runs the service runs inside this one, one test at a time (see
/// `AlertsTestGroup`): on two cores, some thirty PostgreSQL databases and services made at once
/// starved the other modules' reactors (missed heartbeats in Wire's instance tests).
@Suite("geo", .serialized) struct GeoTestGroup {}
