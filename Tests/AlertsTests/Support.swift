@testable import Alerts
import Foundation
import FriensoProto
import FriensoTesting
import GRDB
import Logging
import ServiceLifecycle
import Places
import SocialReplica
import Storage
import Synchronization
import Testing
import Wire

/// The other services as alerts sees them, under the test's control. A service named in `down`
/// answers UNAVAILABLE.
final class FakePeers: AlertsPeers {
    struct State {
        var circles: [UInt64: [CircleContact]] = [:]
        var circleRequests: [UInt64: [(owner: UInt64, atMs: Int64)]] = [:]
        var responses: [(member: UInt64, owner: UInt64, accept: Bool)] = []
        var notices: [SocialV1.Notice] = []
        var placeEvents: [(event: GeoV1.PlaceAlertEvent, viewer: UInt64)] = []
        var locations: [UInt64: AlertsV1.AlertLocation] = [:]
        /// Geo's place names at exact points ("lat,lon"), for a phone's fix.
        var placeNames: [String: String] = [:]
        /// Every location question alerts asked: whose, with which phone fix.
        var locationLookups: [(user: UInt64, phoneFix: AlertsV1.AlertLocation?)] = []
        var phones: [UInt64: String] = [:]
        var passwords: [UInt64: String] = [:]
        var down: Set<String> = []
        /// Owners whose circle alerts asked social for (`circleFromSocial`), in order.
        var socialAsked: [UInt64] = []
        var snapshotPages = 0
        var replica: Replica?
        /// Geo's places (`PlacesSnapshot`).
        var places: [PlaceRecord] = []
    }
    let state = Mutex(State())

    private func check(_ service: String) throws {
        if state.withLock({ $0.down.contains(service) }) { throw RPCError.unavailable("\(service) is down (test)") }
    }

    func circleFromSocial(of owner: UInt64) async throws -> [CircleContact] {
        try check("social")
        return state.withLock { s in
            s.socialAsked.append(owner)
            return s.circles[owner] ?? []
        }
    }
    func circleFromReplica(of owner: UInt64) -> [CircleContact] {
        state.withLock { ($0.circles[owner] ?? []).filter { $0.user != nil } }
    }
    func circles(afterOwner: UInt64, owners: Int) async throws -> (circles: [(owner: UInt64, contacts: [CircleContact])], next: UInt64) {
        try check("social")
        return state.withLock { s in
            s.snapshotPages += 1
            let page = s.circles.filter { $0.key > afterOwner && !$0.value.isEmpty }.sorted { $0.key < $1.key }.prefix(owners).map { (owner: $0.key, contacts: $0.value) }
            return (page, page.count == owners ? page.last!.owner : 0)
        }
    }
    func circleClock(of owner: UInt64) -> CircleClock? {
        state.withLock { s in
            s.replica.map { CircleClock(generation: $0.generation, changes: $0.changes, ownerChangedAt: $0.changedAt[owner] ?? 0) }
        }
    }

    func places(afterID: UInt64, limit: Int) async throws -> (places: [PlaceRecord], next: UInt64, within: Double) {
        try check("geo")
        return state.withLock { s in
            let page = Array(s.places.filter { $0.id > afterID }.sorted { $0.id < $1.id }.prefix(limit))
            return (page, page.count == limit ? page.last!.id : 0, 150)
        }
    }

    /// The graph replica as alerts' copy of the circles sees it (nil: none loaded).
    struct Replica {
        var generation: UInt64 = 1
        var changes: UInt64 = 0
        var changedAt: [UInt64: UInt64] = [:]
    }

    /// Changes `owner`'s circle in social; with `applied`, the replica has applied the change too.
    func changeCircle(of owner: UInt64, to contacts: [CircleContact], applied: Bool = true) {
        state.withLock { s in
            s.circles[owner] = contacts
            guard applied, s.replica != nil else { return }
            s.replica!.changes += 1
            s.replica!.changedAt[owner] = s.replica!.changes
        }
    }
    func circleRequests(for member: UInt64) async throws -> [(owner: UInt64, atMs: Int64)] {
        try check("social")
        return state.withLock { $0.circleRequests[member] ?? [] }
    }
    func respondToCircleRequest(member: UInt64, owner: UInt64, accept: Bool) async throws {
        try check("social")
        try state.withLock { s in
            guard let i = s.circleRequests[member]?.firstIndex(where: { $0.owner == owner }) else {
                throw RPCError.notFound("no pending core circle request from user \(owner)")
            }
            s.circleRequests[member]?.remove(at: i)
            s.responses.append((member, owner, accept))
        }
    }
    func notices(after id: UInt64, limit: Int) async throws -> [SocialV1.Notice] {
        try check("social")
        return state.withLock { Array($0.notices.filter { $0.noticeId > id }.prefix(limit)) }
    }
    func placeEvents(after id: UInt64, limit: Int) async throws -> [(event: GeoV1.PlaceAlertEvent, viewer: UInt64)] {
        try check("geo")
        return state.withLock { Array($0.placeEvents.filter { $0.event.eventId > id }.prefix(limit)) }
    }
    func latestLocation(of user: UInt64, phoneFix: AlertsV1.AlertLocation?) async throws -> AlertsV1.AlertLocation {
        try check("geo")
        return state.withLock { s in
            s.locationLookups.append((user, phoneFix))
            guard var phoneFix else { return s.locations[user] ?? AlertsV1.AlertLocation() }
            phoneFix.placeName = s.placeNames["\(phoneFix.latitude),\(phoneFix.longitude)"] ?? ""
            return phoneFix
        }
    }
    func people(_ ids: Set<UInt64>) async throws -> [UInt64: AlertsV1.Person] {
        try check("accounts")
        return Dictionary(uniqueKeysWithValues: ids.map { ($0, AlertsV1.Person(userId: $0, username: "user\($0)", firstName: "User", lastName: "\($0)")) })
    }
    func phones(_ ids: Set<UInt64>) async throws -> [UInt64: String] {
        try check("accounts")
        return state.withLock { s in s.phones.filter { ids.contains($0.key) } }
    }
    func verifyPassword(user: UInt64, password: String) async throws -> Bool {
        try check("accounts")
        return state.withLock { $0.passwords[user] == password }
    }
}

typealias Recorder = EventRecorder

extension EventRecorder {
    func grants() -> [GeoV1.LocationGrant] {
        all.filter { $0.method == "alerts.Grant" }.compactMap { try? GeoV1.LocationGrant(serializedBytes: $0.payload) }
    }
    func events(to user: UInt64) -> [AlertsV1.AlertEvent] {
        all.filter { $0.topic == ViewerTopic.of(user) && $0.method == "alerts.Event" }.compactMap { try? AlertsV1.AlertEvent(serializedBytes: $0.payload) }
    }
}

/// A provider that fails the first `failures` sends of each delivery (all of them when nil) and
/// counts what it was asked to send.
final class FlakyProvider: SMSProvider, PushProvider {
    let name = "flaky"
    private let failures: Int?
    private let tries = Mutex<[UInt64: Int]>([:])
    init(failures: Int?) { self.failures = failures }
    func send(_ batch: [OutgoingMessage]) async -> [DeliveryResult] {
        batch.map { m in
            let n = tries.withLock { t -> Int in t[m.deliveryID, default: 0] += 1; return t[m.deliveryID]! }
            if let failures, n > failures { return .delivered(reference: "ok-\(n)") }
            return .failed("gateway timeout (test)", retryable: true)
        }
    }
    func attempts(_ id: UInt64) -> Int { tries.withLock { $0[id] ?? 0 } }
}

struct AlertsHarness: Sendable {
    let service: AlertsService
    let client: RouterClient
    let peers: FakePeers
    let recorder: Recorder
    let storage: TestStorage
    let logs: CapturedLogs

    func call<Q, R>(_ user: UInt64, _ method: RPCMethod<Q, R>, _ request: Q, key: String = "") async throws -> R {
        try await client.call(method, request, options: CallOptions(idempotencyKey: key, callerUserID: user))
    }

    func operatorCall<Q, R>(_ method: RPCMethod<Q, R>, _ request: Q) async throws -> R {
        try await client.call(method, request, options: CallOptions())
    }

    /// Every outbox row.
    func outbox() async throws -> [AlertsV1.Delivery] {
        try await service.store.outbox(status: .unspecified, recipient: 0, beforeID: 0, limit: 1_000_000).reversed()
    }

    /// What the built-in providers sent: (channel, address, body).
    func sent() async throws -> [(channel: Int32, address: String, body: String)] {
        try await service.store.sentMessages()
    }

    /// Waits until nothing in the outbox is pending.
    func drained() async throws {
        try await eventually("the outbox to drain") { try await outbox().allSatisfy { $0.status != .pending } }
    }

    func device(_ user: UInt64, _ token: String) async throws {
        _ = try await call(user, AlertsV1.AlertsService.registerDevice, AlertsV1.RegisterDeviceRequest(token: token, platform: .android, appVersion: "1.0"))
    }
}

func testConfig() -> AlertsConfig {
    var config = AlertsConfig()
    config.operatorKey = "operator-secret"
    config.minWatch = .seconds(1)
    config.retry.firstDelay = .milliseconds(10)
    config.retry.maxDelay = .milliseconds(50)
    config.retry.lookupDelay = .milliseconds(20)
    config.retry.maxAttempts = 3
    config.grantRepublishInterval = .seconds(3600)
    config.noticePollInterval = .milliseconds(50)
    return config
}

/// Runs alerts in process and its worker on `storage` (a fresh one of `engine` unless given: a
/// test that "restarts" alerts passes the same storage to each run).
func withAlerts<T: Sendable>(engine: Engine = .sqlite, storage given: TestStorage? = nil, peers: FakePeers = FakePeers(),
                             config: AlertsConfig = testConfig(), sms: (any SMSProvider)? = nil, push: (any PushProvider)? = nil,
                             worker: Bool = true, now: (@Sendable () -> Int64)? = nil,
                             _ body: @Sendable (AlertsHarness) async throws -> T) async throws -> T {
    let logs = CapturedLogs()
    let storage: TestStorage
    if let given { storage = given } else { storage = try await TestStorage.fresh(engine, service: "alerts") }
    let opened = try await storage.open()
    let recorder = Recorder()
    let service: AlertsService
    do {
        service = try await AlertsService.open(opened, peers: peers, events: recorder, config: config, sms: sms, push: push,
                                               logger: logs.logger("alerts"), now: now)
    } catch {
        await opened.close()
        if given == nil { await storage.remove() }
        throw error
    }
    // In process: the router and the durable reply cache, as the host runs them (no socket);
    // the worker (deliveries, expiry) runs as in the service.
    let client = RouterClient(service, name: "alerts", logger: logs.logger("alerts-host"))
    let services: [any Service] = worker ? [AlertsWorker(service: service, socialEvents: nil, logger: logs.logger("worker"))] : []
    let harness = AlertsHarness(service: service, client: client, peers: peers, recorder: recorder, storage: storage, logs: logs)
    let outcome: Result<T, any Error>
    do {
        if services.isEmpty {
            outcome = .success(try await body(harness))
        } else {
            outcome = .success(try await withRunningServices(services, logger: logs.logger("group")) {
                // The worker's first pass republishes every grant: let it finish before the test's
                // first request, or a grant made meanwhile would be recorded twice.
                try await eventually("the worker's start-up pass") { service.maintenancePasses.load(ordering: .relaxed) > 0 }
                return try await body(harness)
            })
        }
    } catch {
        print("alerts test failed (\(storage.engine)); logs:\n\(logs.dump().suffix(6000))")
        outcome = .failure(error)
    }
    await client.flush() // a graceful stop: replies being saved are in before a "restart"
    await opened.close()
    if given == nil { await storage.remove() }
    return try outcome.get()
}

/// Another alerts process on `storage`: by default the same instance as `withAlerts`'s in an
/// earlier life (one that crashed mid-pass, whose claims its restart takes back at once).
func anotherAlerts(on storage: TestStorage, peers: FakePeers, config: AlertsConfig = testConfig(), sms: (any SMSProvider)? = nil,
                   push: (any PushProvider)? = nil, instance: String = "1", events: Recorder? = nil, now: (@Sendable () -> Int64)? = nil,
                   logger: Logger) async throws -> (AlertsService, StorageEngine) {
    let opened = try await storage.open()
    return (try await AlertsService.open(opened, instance: instance, peers: peers, events: events, config: config, sms: sms, push: push,
                                         logger: logger, now: now), opened)
}

/// A fresh storage of `engine` for a test that runs alerts more than once on it, removed after.
func withStorage<T: Sendable>(_ engine: Engine, _ body: (TestStorage) async throws -> T) async throws -> T {
    let storage = try await TestStorage.fresh(engine, service: "alerts")
    do {
        let result = try await body(storage)
        await storage.remove()
        return result
    } catch {
        await storage.remove()
        throw error
    }
}

/// Every alerts suite runs inside this one, one test at a time: on two cores, many in-process
/// stacks starting at once beside the other modules' suites starved the shared reactor in a
/// fresh-clone CI run (missed heartbeats in unrelated Wire and accounts tests).
@Suite("alerts", .serialized) struct AlertsTestGroup {}

/// Time the tests move by hand (milliseconds since 1970).
final class ManualClock: Sendable {
    private let ms = Atomic<Int64>(1_800_000_000_000)
    var now: Int64 { ms.load(ordering: .relaxed) }
    func advance(minutes: Double) { ms.add(Int64(minutes * 60_000), ordering: .relaxed) }
}
