import Foundation
public import FriensoProto
public import Logging
public import Storage
import Identity
import Places
public import Synchronization
public import Wire

public struct AlertsConfig: Sendable {
    /// Bounds of a watch session's length (and of how far an extension may reach from now).
    public var minWatch: Duration = .seconds(5 * 60)
    public var maxWatch: Duration = .seconds(12 * 3600)
    /// Check-in timers: how far ahead they may end, and how long before the end the warning goes.
    public var minTimer: Duration = .seconds(5 * 60)
    public var maxTimer: Duration = .seconds(24 * 3600)
    public var timerWarning: Duration = .seconds(2 * 60)
    /// A helpNow nobody accepted within this is sent again and escalated (`Escalation.swift`).
    public var helpEscalation: Duration = .seconds(5 * 60)
    /// The number a helpNow suggests calling, and when the caller's last fix is at a campus place
    /// and a campus police number is configured, that one instead.
    public var emergencyNumber = "911"
    public var emergencyLabel = "Emergency services"
    public var campusPoliceNumber = ""
    public var campusPoliceLabel = "Campus police"
    /// Authorises operator methods (outbox listing, resource imports, resolving anyone's alert).
    public var operatorKey = ""
    /// A helpNow grant lasts until the alert is resolved; geo is told it expires this far ahead,
    /// renewed at each republish, so a grant alerts can no longer revoke lapses by itself.
    public var helpNowGrantWindow: Duration = .seconds(24 * 3600)
    /// Every grant (and recent revocation) is published again this often, so geo converges after
    /// missing events (restart, slow joiner).
    public var grantRepublishInterval: Duration = .seconds(30)
    /// How often social's notices are pulled when no wake-up event arrives.
    public var noticePollInterval: Duration = .seconds(5)
    public var retry = RetryPolicy()
    /// Where an SMS invitation points a non-user.
    public var inviteLink = "https://frienso.app/join"
    /// How long a delivery pass holds the outbox rows it took (PostgreSQL, where several instances
    /// share them): longer than any provider's timeout, so another instance takes them only from
    /// a pass that died (the message may have gone: it is sent again with its idempotency key).
    /// An instance that restarts takes its own back at once.
    public var deliveryClaim: Duration = .seconds(120)
    /// How long a delivery that ended (with its attempt log) is kept in the outbox.
    public var outboxRetention: Duration = .seconds(90 * 86_400)
    public init() {}
}

/// watchMe, helpNow, the pending-request inbox, device registrations, the delivery outbox,
/// emergency-call prompts and campus resources.
public final class AlertsService: Sendable {
    public typealias API = AlertsV1.AlertsService

    let store: any AlertsStorage
    let peers: any AlertsPeers
    let events: (any EventSink)?
    let config: AlertsConfig
    let now: @Sendable () -> Int64
    let logger: Logger
    let sms: any SMSProvider
    let push: any PushProvider
    public let replyStore: AnyReplyStore
    /// Rung when the outbox has new rows, when a watch's end moved, when social has notices.
    let deliveryBell = Doorbell()
    let maintenanceBell = Doorbell()
    let noticeBell = Doorbell()
    /// Told about every delivery a pass finished (benchmarks, tests).
    let deliveryObserver: Mutex<(@Sendable ([AlertsV1.Delivery]) -> Void)?> = Mutex(nil)
    /// Maintenance passes finished (expiry and grant republishing): a sign the worker runs, and
    /// how a test knows its start-up pass is behind it.
    public let maintenancePasses = Atomic<Int>(0)
    /// When the maintenance loop will wake next (ms), or 0 while it runs a pass.
    let maintenanceWakeAt = Atomic<Int64>(0)
    /// Every core circle, so that a helpNow need not wait for social (`CircleCopy`; loaded by the
    /// worker once the graph replica has loaded).
    let circleCopy: CircleCopy
    /// Geo's places, so that a raise with the phone's own fix need not ask geo (`PlaceBook`).
    let placeBook = PlaceBook()
    /// Rung when geo announces an import (its "places" stream): the place book loads again.
    let placesBell = Doorbell()

    /// Opens `<directory>/alerts.sqlite`.
    /// - Parameters:
    ///   - sms, push: delivery providers; nil: the built-in ones, which record what they send.
    public convenience init(directory: String, peers: any AlertsPeers, events: (any EventSink)?, config: AlertsConfig = AlertsConfig(),
                            sms: (any SMSProvider)? = nil, push: (any PushProvider)? = nil, logger: Logger,
                            now: (@Sendable () -> Int64)? = nil) throws {
        self.init(store: try SQLiteAlertsStore(path: "\(directory)/alerts.sqlite"), peers: peers, events: events, config: config,
                  sms: sms, push: push, logger: logger, now: now)
    }

    /// Opens alerts' storage on `engine` (its migrations run first), as `init(directory:…)`.
    /// - Parameter instance: this instance's name among several sharing one PostgreSQL schema
    ///   (`--instance`), the same across its restarts: its outbox claims carry it.
    public static func open(_ engine: StorageEngine, instance: String = "1", peers: any AlertsPeers, events: (any EventSink)?, config: AlertsConfig = AlertsConfig(),
                            sms: (any SMSProvider)? = nil, push: (any PushProvider)? = nil, logger: Logger,
                            now: (@Sendable () -> Int64)? = nil) async throws -> AlertsService {
        switch engine {
        case .sqlite(let directory):
            return try AlertsService(directory: directory, peers: peers, events: events, config: config, sms: sms, push: push, logger: logger, now: now)
        case .postgres(let database):
            return AlertsService(store: try await PostgresAlertsStore.open(database, instance: instance), peers: peers, events: events, config: config,
                                 sms: sms, push: push, logger: logger, now: now)
        }
    }

    init(store: any AlertsStorage, peers: any AlertsPeers, events: (any EventSink)?, config: AlertsConfig,
         sms: (any SMSProvider)?, push: (any PushProvider)?, logger: Logger, now: (@Sendable () -> Int64)?) {
        let clock = now ?? { WallClock.milliseconds() }
        self.store = store
        self.peers = peers
        self.events = events
        self.config = config
        self.now = clock
        self.logger = logger
        self.sms = sms ?? RecordingProvider(name: "outbox-sms", store: store, logger: logger, now: clock)
        self.push = push ?? RecordingProvider(name: "outbox-push", store: store, logger: logger, now: clock)
        replyStore = AnyReplyStore(store.replies)
        circleCopy = CircleCopy { [peers] owner in peers.circleClock(of: owner) }
    }

    /// `owner`'s circle from social; when social does not answer, the graph replica's accepted
    /// members (invited numbers are not replicated), so a watch or a helpNow still reaches the
    /// circle while social restarts. `answered` gets social's own answer (what `CircleCopy` keeps).
    func circle(of owner: UInt64, answered: (([CircleContact]) -> Void)? = nil) async throws -> [CircleContact] {
        do {
            let circle = try await peers.circleFromSocial(of: owner)
            answered?(circle)
            return circle
        } catch {
            // A lookup its raise no longer needs (cancelled) is not social failing.
            guard let code = (error as? RPCError)?.code, code == .unavailable || code == .deadlineExceeded, !Task.isCancelled else { throw error }
            logger.warning("social did not answer: the circle comes from the replica (no invited phone numbers)", metadata: ["user": "\(owner)"])
            return peers.circleFromReplica(of: owner)
        }
    }

    /// Loads the copy of every circle (`CircleCopy`) from social's snapshot, a page of owners at
    /// a time. - Returns: the owners with someone in their circle; nil: no replica loaded yet.
    @discardableResult
    func loadCircleCopy(ownersPerPage: Int = 500) async throws -> Int? {
        guard let before = peers.circleClock(of: 0) else { return nil }
        var circles: [UInt64: [CircleContact]] = [:]
        var after: UInt64 = 0
        repeat {
            let page = try await peers.circles(afterOwner: after, owners: ownersPerPage)
            for circle in page.circles { circles[circle.owner] = circle.contacts }
            after = page.next
        } while after != 0
        circleCopy.replaceAll(circles, readAfter: before)
        return circles.count
    }

    /// Loads geo's places into the place book (`PlaceBook`). - Returns: how many.
    @discardableResult
    func loadPlaceBook(pageSize: Int = 1_000) async throws -> Int {
        var places: [PlaceRecord] = []
        var after: UInt64 = 0, within = 0.0
        repeat {
            let page = try await peers.places(afterID: after, limit: pageSize)
            places += page.places
            (after, within) = (page.next, page.within)
        } while after != 0
        placeBook.replace(places, within: within)
        return places.count
    }

    /// Calls `observer` with the deliveries each pass finished (replacing any earlier one).
    public func observeDeliveries(_ observer: (@Sendable ([AlertsV1.Delivery]) -> Void)?) {
        deliveryObserver.withLock { $0 = observer }
    }

    // MARK: Shared helpers

    /// Names for `ids`; people accounts cannot name (or all, when it does not answer) get their id only.
    func people(_ ids: Set<UInt64>) async -> [UInt64: AlertsV1.Person] {
        var result: [UInt64: AlertsV1.Person] = [:]
        do { result = try await peers.people(ids) } catch {
            logger.warning("names unavailable", metadata: ["error": "\(error)"])
        }
        for id in ids where result[id] == nil { result[id] = AlertsV1.Person(userId: id) }
        return result
    }

    static func name(_ person: AlertsV1.Person?) -> String {
        guard let person else { return "Someone" }
        let full = [person.firstName, person.lastName].filter { !$0.isEmpty }.joined(separator: " ")
        if !full.isEmpty { return person.username.isEmpty ? full : "\(full) (@\(person.username))" }
        return person.username.isEmpty ? "Frienso user \(person.userId)" : "@\(person.username)"
    }

    func checkOperator(_ key: String, _ context: RequestContext, _ what: String) throws {
        guard !config.operatorKey.isEmpty else {
            throw RPCError.permissionDenied("\(what) is disabled: no operator key is configured (alerts.operatorKey)")
        }
        guard OperatorKey.matches(key, config.operatorKey) else {
            context.logger.warning("operator call with a wrong key", metadata: ["what": "\(what)", "client": "\(context.clientAddress)"])
            throw RPCError.permissionDenied("operator_key is wrong")
        }
    }

    // MARK: Publishing (after the transaction that decided it committed)

    func emit(_ event: AlertsV1.AlertEvent, to users: some Sequence<UInt64>) {
        guard let events else { return }
        let payload = event.serializedBytes()
        events.emit(topics: users.map(ViewerTopic.of), method: "alerts.Event", payload: payload)
    }

    func emit(_ grants: [GrantRecord]) {
        guard let events, !grants.isEmpty else { return }
        let at = now(), window = config.helpNowGrantWindow.wholeMilliseconds
        for g in grants {
            let expires = g.expiresMs == GrantRecord.untilResolved ? at + window : g.expiresMs
            let grant = GeoV1.LocationGrant(subjectId: g.subject, viewerId: g.viewer, expiresAtMs: expires, reason: g.reason, version: g.version)
            events.emit(topic: "grants", method: "alerts.Grant", payload: grant.serializedBytes())
        }
    }

    /// Publishes every grant alerts holds, and the revocations geo may have missed.
    public func republishGrants() async throws {
        let keep = max(config.helpNowGrantWindow, config.maxWatch).wholeMilliseconds
        emit(try await store.grantsToPublish(now: now(), keepRevoked: keep))
    }

    /// Deletes deliveries that ended longer than `outboxRetention` ago. - Returns: rows deleted.
    @discardableResult
    public func pruneOutbox() async throws -> Int {
        try await store.pruneOutbox(before: now() - config.outboxRetention.wholeMilliseconds)
    }

    /// One delivery pass. - Returns: when the next delivery is due.
    public func deliverDue() async throws -> Int64? {
        let observer = deliveryObserver.withLock { $0 }
        return try await DeliveryPass(store: store, peers: peers, sms: sms, push: push, policy: config.retry, claim: config.deliveryClaim, logger: logger,
                                      now: now, observer: observer).run()
    }
}

/// Every rpc of the contract has its handler above (or the build fails): see `MethodRouter.register(all:)`.
extension AlertsService: FriensoService, AlertsV1.AlertsService.Handler {
    /// Every rpc of the contract; a helpNow's raise and resolve run before the reply cache reads
    /// the store (item 54): before their write they only read (the circle, the location, names),
    /// and a raise retried under its key finds its alert by that key.
    public func router() -> MethodRouter {
        var router = MethodRouter()
        router.register(all: self)
        router.claimFirst(AlertsV1.AlertsService.raiseHelpNow)
        router.claimFirst(AlertsV1.AlertsService.resolveHelpNow)
        return router
    }
}
