import Foundation
import FriensoProto
public import Logging
public import ServiceLifecycle
public import Wire

/// The alerts service's background work: delivering the outbox, ending watches on time and
/// republishing grants, and taking social's notices. Each loop survives its own errors.
public final class AlertsWorker: Service, Sendable {
    private let service: AlertsService
    private let socialEvents: String?
    private let socialEventsSecurity: ClientSecurity
    private let geoEvents: String?
    private let geoEventsSecurity: ClientSecurity
    private let logger: Logger
    private let context: ZMQContext
    private let reactor: Reactor

    /// - Parameters:
    ///   - socialEvents: social's PUB endpoint, whose "notices" events wake the notice reader
    ///     (nil: poll only).
    ///   - geoEvents: geo's PUB endpoint, whose "placeevents" events wake the same reader for
    ///     place alerts (nil: poll only).
    public init(service: AlertsService, socialEvents: String?, socialEventsSecurity: ClientSecurity = .plaintext,
                geoEvents: String? = nil, geoEventsSecurity: ClientSecurity = .plaintext, logger: Logger,
                context: ZMQContext = .shared, reactor: Reactor = .shared) {
        self.service = service
        self.socialEvents = socialEvents
        self.socialEventsSecurity = socialEventsSecurity
        self.geoEvents = geoEvents
        self.geoEventsSecurity = geoEventsSecurity
        self.logger = logger
        self.context = context
        self.reactor = reactor
    }

    public func run() async throws {
        let service = service, logger = logger, security = socialEventsSecurity
        let subscriber = socialEvents.map {
            Subscriber(endpoint: $0, prefixes: [SocialNotices.stream], logger: logger, security: security, context: context, reactor: reactor)
        }
        let geoSubscriber = geoEvents.map {
            Subscriber(endpoint: $0, prefixes: [GeoPlaceEvents.stream, GeoPlaceEvents.placesStream], logger: logger, security: geoEventsSecurity,
                       context: context, reactor: reactor)
        }
        await cancelWhenGracefulShutdown {
            await withTaskGroup(of: Void.self) { group in
                group.addTask { await Self.deliveryLoop(service, logger) }
                group.addTask { await Self.maintenanceLoop(service, logger) }
                group.addTask { await Self.noticeLoop(service, logger) }
                group.addTask { await Self.circleCopyLoop(service, logger) }
                group.addTask { await Self.placeBookLoop(service, logger) }
                for subscriber in [subscriber, geoSubscriber].compactMap({ $0 }) {
                    group.addTask {
                        for await event in subscriber.events {
                            if event.topic == GeoPlaceEvents.placesStream { service.placesBell.ring() } else { service.noticeBell.ring() }
                        }
                    }
                }
                await group.next()
                group.cancelAll()
            }
        }
        subscriber?.stop()
        geoSubscriber?.stop()
    }

    private static func deliveryLoop(_ service: AlertsService, _ logger: Logger) async {
        while !Task.isCancelled {
            var wait: Duration = .seconds(1)
            do {
                if let next = try await service.deliverDue() {
                    wait = .milliseconds(min(1_000, max(0, next - service.now())))
                }
            } catch {
                logger.error("delivery pass failed", metadata: ["error": "\(error)"])
            }
            if wait > .zero { await service.deliveryBell.wait(timeout: wait) }
        }
    }

    private static func maintenanceLoop(_ service: AlertsService, _ logger: Logger) async {
        var lastRepublish: Int64?, lastPrune: Int64?
        let interval = service.config.grantRepublishInterval.wholeMilliseconds
        while !Task.isCancelled {
            var wait = AlertsService.maintenanceLongestWait
            service.maintenanceWakeAt.store(0, ordering: .sequentiallyConsistent)
            do {
                try await service.expireDueWatches()
                try await service.runDueTimers()
                try await service.escalateDueAlerts()
                let at = service.now()
                if lastRepublish.map({ at - $0 >= interval }) ?? true {
                    try await service.republishGrants()
                    lastRepublish = at
                }
                // Ended deliveries past their retention, once an hour.
                if lastPrune.map({ at - $0 >= 3_600_000 }) ?? true {
                    let pruned = try await service.pruneOutbox()
                    if pruned > 0 { logger.info("old deliveries deleted", metadata: ["rows": "\(pruned)"]) }
                    lastPrune = at
                }
                wait = min(wait, interval - (service.now() - (lastRepublish ?? at)))
                for next in [try await service.nextWatchExpiry(), try await service.nextTimerAt(), try await service.nextEscalationAt()] {
                    if let next { wait = min(wait, next - service.now()) }
                }
            } catch {
                logger.error("alerts maintenance failed", metadata: ["error": "\(error)"])
            }
            service.maintenancePasses.add(1, ordering: .relaxed)
            wait = max(1, wait)
            service.maintenanceWakeAt.store(service.now() + wait, ordering: .sequentiallyConsistent)
            await service.maintenanceBell.wait(timeout: .milliseconds(wait))
        }
    }

    /// Loads the copy of every circle (`CircleCopy`) once the graph replica has loaded, and again
    /// whenever the replica loads afresh (a new generation: every entry is out of date then).
    /// Checked ten times a second until the first load, then once a second; a failed load is
    /// tried again at the next check.
    private static func circleCopyLoop(_ service: AlertsService, _ logger: Logger) async {
        var failing = false
        while !Task.isCancelled {
            if let clock = service.peers.circleClock(of: 0), clock.generation != service.circleCopy.loadedGeneration {
                do {
                    if let owners = try await service.loadCircleCopy() {
                        logger.info("the copy of the core circles is loaded", metadata: ["owners": "\(owners)"])
                    }
                    failing = false
                } catch {
                    if !failing { logger.warning("the copy of the core circles could not be loaded; retrying", metadata: ["error": "\(error)"]) }
                    failing = true
                }
            }
            try? await Task.sleep(for: service.circleCopy.loadedGeneration == nil ? .milliseconds(100) : .seconds(1))
        }
    }

    /// Loads geo's places into the place book at start, again when geo announces an import, and
    /// every minute (an announcement can be missed: a SUB socket joins late); until the first
    /// load, every tenth of a second.
    private static func placeBookLoop(_ service: AlertsService, _ logger: Logger) async {
        var failing = false
        while !Task.isCancelled {
            do {
                let before = service.placeBook.count
                let count = try await service.loadPlaceBook()
                if failing || before != count { logger.info("geo's places are loaded", metadata: ["places": "\(count)"]) }
                failing = false
            } catch {
                if !failing { logger.warning("geo's places could not be loaded; retrying", metadata: ["error": "\(error)"]) }
                failing = true
            }
            await service.placesBell.wait(timeout: service.placeBook.count == nil ? .milliseconds(100) : .seconds(60))
        }
    }

    /// Social's notices and geo's place events, each source on its own: one down does not hold up the other.
    private static func noticeLoop(_ service: AlertsService, _ logger: Logger) async {
        var failing: Set<String> = []
        while !Task.isCancelled {
            for (source, pull) in [("social notices", service.pullNotices), ("geo place events", service.pullPlaceEvents)] {
                do {
                    let taken = try await pull()
                    if taken > 0 { logger.debug("\(source) taken", metadata: ["count": "\(taken)"]) }
                    if failing.remove(source) != nil { logger.info("\(source) reachable again") }
                } catch {
                    if failing.insert(source).inserted { logger.warning("\(source) unavailable; retrying", metadata: ["error": "\(error)"]) }
                }
            }
            await service.noticeBell.wait(timeout: service.config.noticePollInterval)
        }
    }
}

/// Geo's place-event stream name, as alerts subscribes to it (`GeoService.placeEventStream`).
public enum GeoPlaceEvents {
    public static let stream = "placeevents"
    /// Geo's announcement of a place import (`GeoService.placesStream`).
    public static let placesStream = "places"
}

/// Social's notice stream name, as alerts subscribes to it.
public enum SocialNotices {
    public static let stream = "notices"
}
