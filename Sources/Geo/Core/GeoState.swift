import FriensoProto
import SocialReplica
import Synchronization

/// Everything geo answers from memory. One lock; every read is short.
struct GeoState: Sendable {
    var index: SpatialIndex
    var latest: [UInt64: LatestFix] = [:]
    var sharing: [UInt64: Sharing] = [:]
    var grants = Grants()
    /// The latest version of each grant applied (`LocationGrant.version`), since this process
    /// started: an older one arriving later (another alerts instance's socket, a republish read
    /// before a revocation) is stale. Not kept: after a restart every grant is applied again until
    /// newer ones arrive, and alerts republishes the truth every 30 s.
    var grantVersions: [GrantKey: Int64] = [:]
    /// Pairs (smaller id first) currently within their proximity distance: not told again until
    /// they have moved apart beyond 1.5 × that distance.
    var near: Set<Pair> = []
    var places: [PlaceRecord] = []
    var checkIns: [UInt64: CheckInRecord] = [:]
    var precision = PrecisionSettings()
    var zones = ZoneBook()
    var placeAlerts = PlaceAlertBook()

    /// Which updates of a batch become their user's latest fix, decided in order: an update wins
    /// when its device time is at least the latest one known (stored, or earlier in the batch);
    /// an older one goes to history only (a phone that sends late, or out of order).
    func accept(_ batch: [LocationUpdate]) -> [Bool] {
        Self.accept(batch) { latest[$0]?.deviceMs }
    }

    /// The rule itself, over any record of each user's latest device time (pure: tests give a table).
    static func accept(_ batch: [LocationUpdate], latestDeviceMs: (UInt64) -> Int64?) -> [Bool] {
        // Room for every user of the batch from the start (grown as it filled, the table was
        // rehashed several times a batch), and one lookup a user: the batch's newest time, found
        // or first read from `latestDeviceMs` (`docs/benchmarks.md`, issue 16, item 150).
        var newest: [UInt64: Int64] = Dictionary(minimumCapacity: batch.count)
        return batch.map { update in
            advance(&newest[update.user, default: latestDeviceMs(update.user) ?? .min], to: update.deviceMs)
        }
    }

    /// Whether `deviceMs` is at least `newest`, which it becomes then.
    private static func advance(_ newest: inout Int64, to deviceMs: Int64) -> Bool {
        guard deviceMs >= newest else { return false }
        newest = deviceMs
        return true
    }

    /// The nearest place of `kind` to a point, with its distance (`PlaceRecord`'s rules, which
    /// alerts' copy of the places shares).
    func closestPlace(lat: Double, lon: Double, kind: GeoV1.PlaceKind = .unspecified) -> (PlaceRecord, Double)? {
        places.closest(lat: lat, lon: lon, kind: kind)
    }

    /// The building or venue someone at (lat, lon) is at or near, within `within` metres.
    func placeNear(lat: Double, lon: Double, within: Double) -> PlaceRecord? {
        places.near(lat: lat, lon: lon, within: within)
    }

    /// "Around <place>", or "" when no place is near.
    func around(lat: Double, lon: Double, within: Double) -> String {
        placeNear(lat: lat, lon: lon, within: within).map { "Around \($0.name)" } ?? ""
    }

    struct Pair: Hashable, Sendable {
        var a: UInt64
        var b: UInt64
        init(_ x: UInt64, _ y: UInt64) { (a, b) = x < y ? (x, y) : (y, x) }
    }

    func settings(of user: UInt64) -> Sharing { sharing[user] ?? Sharing() }

    /// Forgets everything held about `user` (a deleted account): fix, index entry, settings,
    /// check-in, grants either way, proximity pairs.
    mutating func forget(_ user: UInt64) {
        latest[user] = nil
        index.remove(user)
        sharing[user] = nil
        checkIns[user] = nil
        grants.removeAll(of: user)
        grantVersions = grantVersions.filter { $0.key.subject != user && $0.key.viewer != user }
        precision.forget(user)
        zones.forget(user)
        placeAlerts.forget(user)
        near = near.filter { $0.a != user && $0.b != user }
    }

    func visible(viewer: UInt64, subject: UInt64, graph: GraphState, now: Int64) -> Bool {
        disclosure(viewer: viewer, subject: subject, graph: graph, now: now) != nil
    }

    /// How precisely `viewer` sees `subject`, or nil when not at all: `Visibility.decide`, then,
    /// for a friend, the precision the subject chose for them (hidden is nil), at most PLACE
    /// while the subject is inside a private zone of theirs (nothing for a HIDDEN zone).
    /// Yourself and a live grant (the subject's own watch or helpNow) are exact.
    func disclosure(viewer: UInt64, subject: UInt64, graph: GraphState, now: Int64) -> Precision? {
        disclosure(viewer: viewer, subject: subject, graph: graph, now: now, zone: zones.privateZone(of: subject, at: latest[subject]))
    }

    /// The same, with the private zone the subject is in already found (once per fix, not per viewer).
    func disclosure(viewer: UInt64, subject: UInt64, graph: GraphState, now: Int64, zone: ZoneRecord?) -> Precision? {
        let (visible, reason) = Visibility.decide(viewer: viewer, subject: subject, Visibility.Facts(
            friends: graph.areFriends(viewer, subject), blocked: graph.blocked(viewer, subject),
            subject: settings(of: subject), grantExpiresAtMs: grants.expiry(subject: subject, viewer: viewer)), nowMs: now)
        guard visible else { return nil }
        guard reason == .friend else { return .exact }
        var chosen = precision.chosen(by: subject, for: viewer)
        if let zone {
            if zone.privacy == .hidden { return nil }
            chosen = max(chosen, .place)
        }
        return chosen == .hidden ? nil : chosen
    }

    /// A fix of `subject`'s as a viewer with `precision` sees it: the fix (exact, or snapped to
    /// its cell) and the label (exact and place only): the private zone's own label while the
    /// subject is inside one, else "Around <place>".
    func shown(_ fix: LatestFix, of subject: UInt64, at precision: Precision, aroundWithin: Double) -> (fix: LatestFix?, around: String) {
        switch precision {
        case .exact: return (fix, around(lat: fix.lat, lon: fix.lon, within: aroundWithin))
        case .approximate: return (fix.approximate, "")
        case .place: return (nil, placeLabel(of: subject, fix: fix, within: aroundWithin))
        case .hidden: return (nil, "")
        }
    }

    /// What a PLACE viewer reads for `subject` at `fix`.
    func placeLabel(of subject: UInt64, fix: LatestFix, within: Double) -> String {
        if let zone = zones.privateZone(of: subject, at: fix) { return zone.privacy == .label ? zone.label : "" }
        return around(lat: fix.lat, lon: fix.lon, within: within)
    }
}

/// Live location grants (watchMe/helpNow), indexed both ways: by subject, for the viewers of
/// each location update (a hot path), and by viewer, for "whose location may I see".
struct Grants: Sendable {
    /// subject → viewer → reason → expiry (ms).
    private var bySubject: [UInt64: [UInt64: [String: Int64]]] = [:]
    /// viewer → subjects who granted them a view.
    private var byViewer: [UInt64: Set<UInt64>] = [:]
    private(set) var count = 0

    init() {}

    init(_ loaded: [GrantKey: Int64]) {
        for (key, expiry) in loaded { set(key, expiresMs: expiry) }
    }

    /// Grants (or extends) `key` until `expiresMs`; nil revokes it.
    mutating func set(_ key: GrantKey, expiresMs: Int64?) {
        var reasons = bySubject[key.subject]?[key.viewer] ?? [:]
        let had = reasons[key.reason] != nil
        reasons[key.reason] = expiresMs
        count += (expiresMs != nil ? 1 : 0) - (had ? 1 : 0)
        if reasons.isEmpty {
            bySubject[key.subject]?[key.viewer] = nil
            if bySubject[key.subject]?.isEmpty == true { bySubject[key.subject] = nil }
            byViewer[key.viewer]?.remove(key.subject)
            if byViewer[key.viewer]?.isEmpty == true { byViewer[key.viewer] = nil }
        } else {
            bySubject[key.subject, default: [:]][key.viewer] = reasons
            byViewer[key.viewer, default: []].insert(key.subject)
        }
    }

    /// Drops every grant `user` gave or holds (a deleted account).
    mutating func removeAll(of user: UInt64) {
        for (viewer, reasons) in bySubject[user] ?? [:] {
            for reason in reasons.keys { set(GrantKey(subject: user, viewer: viewer, reason: reason), expiresMs: nil) }
        }
        for subject in byViewer[user] ?? [] {
            for reason in (bySubject[subject]?[user] ?? [:]).keys { set(GrantKey(subject: subject, viewer: user, reason: reason), expiresMs: nil) }
        }
    }

    /// The live grants `user` gave or holds (what an export shows).
    func live(involving user: UInt64, now: Int64) -> [(key: GrantKey, expiresMs: Int64)] {
        var found: [(key: GrantKey, expiresMs: Int64)] = []
        for (viewer, reasons) in bySubject[user] ?? [:] {
            for (reason, expiry) in reasons where expiry > now { found.append((GrantKey(subject: user, viewer: viewer, reason: reason), expiry)) }
        }
        for subject in byViewer[user] ?? [] where subject != user {
            for (reason, expiry) in bySubject[subject]?[user] ?? [:] where expiry > now {
                found.append((GrantKey(subject: subject, viewer: user, reason: reason), expiry))
            }
        }
        return found.sorted { ($0.key.subject, $0.key.viewer, $0.key.reason) < ($1.key.subject, $1.key.viewer, $1.key.reason) }
    }

    /// The latest expiry of any grant from `subject` to `viewer`.
    func expiry(subject: UInt64, viewer: UInt64) -> Int64? {
        bySubject[subject]?[viewer]?.values.max()
    }

    /// Viewers holding a live grant on `subject`.
    func viewers(of subject: UInt64, now: Int64) -> [UInt64] {
        (bySubject[subject] ?? [:]).compactMap { viewer, reasons in (reasons.values.max() ?? 0) > now ? viewer : nil }
    }

    /// Subjects whose location `viewer` holds a live grant on.
    func subjects(visibleTo viewer: UInt64, now: Int64) -> [UInt64] {
        (byViewer[viewer] ?? []).filter { (expiry(subject: $0, viewer: viewer) ?? 0) > now }
    }
}

/// The state shared by the handlers and the location writer.
final class SharedState: Sendable {
    let mutex: Mutex<GeoState>
    init(_ state: GeoState) { mutex = Mutex(state) }
}

extension GeoState {
    /// An event a committed batch causes, decided under the state lock.
    enum Outgoing: Equatable {
        /// `subject`'s new fix, for the viewers who see it at `precision` (one case per precision;
        /// `hidden`: they just entered a HIDDEN zone, and the event carries no fix and no status).
        case location(viewers: [UInt64], subject: UInt64, fix: LatestFix, precision: Precision)
        /// `friend` came within range of `viewer` (told to both, once, with hysteresis).
        case nearby(viewer: UInt64, friend: UInt64, distance: Double, atMs: Int64)
    }

    /// Applies a committed batch to memory (latest fixes, statuses, the index) and, when
    /// `decideEvents`, returns what it causes: a `location` for the viewers each new fix may
    /// reach, and `nearby` for friends who both asked for proximity alerts and came within the
    /// smaller of their distances (re-armed only beyond 1.5 × it, so a pair hovering at the
    /// boundary is told once). Pure: no publishing, no encoding.
    ///
    /// `listening` says which viewers someone is connected to hear: a fix's viewers are decided
    /// among those only (a live event reaches nobody else, and most friends are offline at any
    /// moment), so a visibility check is not made for each offline friend on every update.
    mutating func applied(_ batch: [LocationUpdate], replaces: [Bool], graph: GraphState?, now at: Int64,
                          listening: (UInt64) -> Bool = { _ in true }) -> [Outgoing] {
        // Who was out of sight before this batch (no fix yet, or inside a HIDDEN zone): only
        // going from seen to a HIDDEN zone is told.
        var hiddenBefore: Set<UInt64> = []
        if graph != nil, !zones.isEmpty {
            for update in batch where latest[update.user] == nil || zones.privateZone(of: update.user, at: latest[update.user])?.privacy == .hidden {
                hiddenBefore.insert(update.user)
            }
        }
        // A decision taken before the batch committed may be stale now: another instance's newer
        // fix may have arrived meanwhile (`GeoService.followOthers`). One process: never.
        let replaces = zip(batch, replaces).map { update, replace in replace && update.deviceMs >= latest[update.user]?.deviceMs ?? .min }
        for (update, replace) in zip(batch, replaces) {
            if replace {
                let status = update.status ?? latest[update.user]?.status ?? ""
                latest[update.user] = LatestFix(lat: update.lat, lon: update.lon, accuracy: update.accuracy,
                                                deviceMs: update.deviceMs, receivedMs: update.receivedMs, status: status)
                index.upsert(update.user, lat: update.lat, lon: update.lon)
            } else if let status = update.status {
                latest[update.user]?.status = status
            }
        }
        guard let graph else { return [] }
        var outgoing: [Outgoing] = []
        for (update, replace) in zip(batch, replaces) where replace {
            guard let fix = latest[update.user] else { continue }
            outgoing += locationEvents(for: update.user, fix: fix, graph, at, wasHidden: hiddenBefore.contains(update.user), listening: listening)
            outgoing += proximityEvents(for: update.user, fix: fix, graph, at)
        }
        return outgoing
    }

    private func locationEvents(for subject: UInt64, fix: LatestFix, _ g: GraphState, _ at: Int64, wasHidden: Bool,
                                listening: (UInt64) -> Bool) -> [Outgoing] {
        var viewers = Set(g.friends(of: subject).lazy.filter(listening))
        viewers.formUnion(grants.viewers(of: subject, now: at).lazy.filter(listening))
        if viewers.isEmpty { return [] }
        // Most people set no precision and no zone: everyone allowed sees them exactly (no grouping, no dictionary per update).
        let zone = zones.privateZone(of: subject, at: fix)
        guard precision.hasSettings(subject) || zone != nil else {
            // A loop, not `filter`: a closure calling `visible` copies the state per viewer (item 81).
            var permitted: [UInt64] = []
            for viewer in viewers where visible(viewer: viewer, subject: subject, graph: g, now: at) { permitted.append(viewer) }
            return permitted.isEmpty ? [] : [.location(viewers: permitted.sorted(), subject: subject, fix: fix, precision: .exact)]
        }
        var byPrecision: [Precision: [UInt64]] = [:]
        for viewer in viewers {
            if let p = disclosure(viewer: viewer, subject: subject, graph: g, now: at, zone: zone) {
                byPrecision[p, default: []].append(viewer)
            } else if zone?.privacy == .hidden, !wasHidden, disclosure(viewer: viewer, subject: subject, graph: g, now: at, zone: nil) != nil {
                // Entering a HIDDEN zone: who saw them until now is told once that they cannot any
                // more (an open map drops the point), with nothing of where; further updates inside say nothing.
                byPrecision[.hidden, default: []].append(viewer)
            }
        }
        return byPrecision.sorted { $0.key < $1.key }.map { .location(viewers: $0.value.sorted(), subject: subject, fix: fix, precision: $0.key) }
    }

    private mutating func proximityEvents(for user: UInt64, fix: LatestFix, _ g: GraphState, _ at: Int64) -> [Outgoing] {
        let mine = settings(of: user)
        guard mine.proximityAlerts else { return [] }
        var out: [Outgoing] = []
        for friend in g.friends(of: user) {
            let theirs = settings(of: friend)
            // A distance tells where someone is: only between friends who see each other exactly.
            guard theirs.proximityAlerts, let other = latest[friend],
                  disclosure(viewer: user, subject: friend, graph: g, now: at) == .exact,
                  disclosure(viewer: friend, subject: user, graph: g, now: at) == .exact else { continue }
            let threshold = min(mine.proximityMetres, theirs.proximityMetres)
            let distance = GeoMath.distance(lat1: fix.lat, lon1: fix.lon, lat2: other.lat, lon2: other.lon)
            let pair = Pair(user, friend)
            if distance <= threshold, !near.contains(pair) {
                near.insert(pair)
                out.append(.nearby(viewer: user, friend: friend, distance: distance, atMs: at))
                out.append(.nearby(viewer: friend, friend: user, distance: distance, atMs: at))
            } else if distance > threshold * 1.5 {
                near.remove(pair)
            }
        }
        return out
    }
}

/// A place alert told: what geo stores (for alerts' push) and publishes to the viewer.
struct PlaceEventRecord: Sendable, Equatable {
    var id: UInt64 = 0
    var viewer: UInt64
    var subject: UInt64
    var alert: UInt64
    var label: String
    var arrived: Bool
    var atMs: Int64

    var proto: GeoV1.PlaceAlertEvent {
        GeoV1.PlaceAlertEvent(eventId: id, alertId: alert, subjectId: subject, label: label, arrived: arrived, atMs: atMs)
    }
}

extension GeoState {
    /// What a batch does besides its history rows, decided before it is written so that it
    /// commits with them: which updates history does not keep, and which place alerts fire.
    struct WritePlan: Sendable {
        /// Per update: kept out of history (inside a private zone that keeps none); nil: all kept.
        var unrecorded: [Bool]?
        /// Alerts whose subject arrived or left (not yet filtered by who may be told); each names
        /// its fix in `fixes`.
        var fired: [PlaceAlertBook.Fired] = []
        var fixes: [(user: UInt64, lat: Double, lon: Double, accuracy: Double)] = []
        /// Those to tell (`told`).
        var told: [PlaceEventRecord] = []
        /// Subjects' new inside sets, applied once the batch has committed.
        var inside: [UInt64: Set<PlaceTarget>] = [:]
    }

    /// Pure: most batches touch nobody with a zone or a place alert, and cost two dictionary lookups each.
    func plan(_ batch: [LocationUpdate], replaces: [Bool]) -> WritePlan {
        var plan = WritePlan()
        if !zones.isEmpty {
            let unrecorded = batch.map(zones.unrecorded)
            if unrecorded.contains(true) { plan.unrecorded = unrecorded }
        }
        guard !placeAlerts.isEmpty else { return plan }
        var fixes: [(user: UInt64, lat: Double, lon: Double, accuracy: Double)] = []
        for (update, replace) in zip(batch, replaces) where replace && placeAlerts.isWatched(update.user) {
            fixes.append((update.user, update.lat, update.lon, update.accuracy))
        }
        guard !fixes.isEmpty else { return plan }
        (plan.fired, plan.inside) = placeAlerts.transitions(fixes)
        plan.fixes = fixes
        return plan
    }

    /// The fired alerts that may be told: the subject still allows the viewer, and the viewer
    /// may see the subject at all where the subject now is (friends, not blocked, no ghost mode,
    /// precision not hidden, not inside a HIDDEN zone).
    func told(_ plan: WritePlan, graph: GraphState, now: Int64) -> [PlaceEventRecord] {
        plan.fired.compactMap { f in
            let alert = f.alert, fix = plan.fixes[f.fix]
            guard placeAlerts.isAllowed(viewer: alert.viewer, subject: alert.subject),
                  disclosure(viewer: alert.viewer, subject: alert.subject, graph: graph, now: now,
                             zone: zones.privateZone(of: alert.subject, lat: fix.lat, lon: fix.lon, accuracy: fix.accuracy)) != nil else { return nil }
            return PlaceEventRecord(viewer: alert.viewer, subject: alert.subject, alert: alert.id, label: alert.label,
                                    arrived: f.arrived, atMs: now)
        }
    }
}
