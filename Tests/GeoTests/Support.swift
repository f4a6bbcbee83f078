import Foundation
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

/// Runs geo in process on `directory` (a new one unless given) with a graph the test controls.
func withGeo<T: Sendable>(directory: String? = nil, graph: StaticGraph = StaticGraph(), clock: TestClock = TestClock(),
                          operatorKey: String = "", _ body: @Sendable (GeoHarness) async throws -> T) async throws -> T {
    let logs = CapturedLogs()
    let temp = try TemporaryDirectory("frienso-geo")
    defer { temp.remove() }
    let dir = directory ?? temp.path
    let recorder = Recorder()
    var config = GeoConfig()
    config.operatorKey = operatorKey
    let photos = FakePhotos()
    let service = try GeoService(directory: dir, graph: graph, publisher: recorder, config: config, photos: photos,
                                 logger: logs.logger("geo"), now: { clock.now })
    // In process: the router and the durable reply cache, as the host runs them (no socket).
    let client = RouterClient(service, name: "geo", logger: logs.logger("geo-host"))
    let result = try await body(GeoHarness(service: service, photos: photos, client: client, graph: graph, recorder: recorder, clock: clock, logs: logs))
    await client.flush() // a graceful stop: replies being saved are in before a "restart"
    return result
}

extension GeoService {
    /// Its SQLite store, for tests that read the file's rows (geo runs on SQLite only so far).
    var sqlite: SQLiteGeoStore { store as! SQLiteGeoStore }
}
