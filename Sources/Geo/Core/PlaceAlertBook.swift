import FriensoProto

/// The area a place alert watches: a circle (a zone, a campus point place) or an outline.
struct PlaceArea: Sendable, Equatable {
    var lat: Double
    var lon: Double
    var radius: Double
    /// An outline (as `PlaceRecord.ring`); empty for a circle.
    var ring: [(lat: Double, lon: Double)]

    init(lat: Double, lon: Double, radius: Double, ring: [(lat: Double, lon: Double)]) {
        (self.lat, self.lon, self.radius, self.ring) = (lat, lon, radius, ring)
    }

    /// A campus place: its outline, or the circle of its radius.
    init(_ place: PlaceRecord) {
        self.init(lat: place.lat, lon: place.lon, radius: place.ring.count >= 3 ? place.reach : place.radius, ring: place.ring.count >= 3 ? place.ring : [])
    }

    static func == (a: PlaceArea, b: PlaceArea) -> Bool {
        (a.lat, a.lon, a.radius) == (b.lat, b.lon, b.radius) && a.ring.elementsEqual(b.ring) { $0 == $1 }
    }

    /// Metres from (lat, lon) to the area's edge; 0 or less inside.
    func edgeDistance(lat: Double, lon: Double) -> Double {
        if ring.count >= 3 {
            if PlaceRecord.inside(ring, lat: lat, lon: lon) { return 0 }
            return ring.map { GeoMath.distance(lat1: lat, lon1: lon, lat2: $0.lat, lon2: $0.lon) }.min() ?? .infinity
        }
        return GeoMath.distance(lat1: self.lat, lon1: self.lon, lat2: lat, lon2: lon) - radius
    }

    /// How far beyond the edge someone must go to have left (hysteresis): a fix wobbling at the
    /// edge is not a departure. max(30 m, 20% of the radius), at most 200 m.
    var leaveMargin: Double { min(200, max(30, radius * 0.2)) }
}

/// What a place alert watches: one of the subject's zones, or a campus place.
enum PlaceTarget: Hashable, Sendable {
    case zone(UInt64)
    case place(UInt64)
}

/// "Tell `viewer` when `subject` arrives at or leaves `target`."
struct PlaceAlertRecord: Sendable, Equatable {
    var id: UInt64
    var viewer: UInt64
    var subject: UInt64
    var target: PlaceTarget
    var label: String
    var area: PlaceArea
    var onArrive: Bool
    var onLeave: Bool
    var createdMs: Int64

    static let maxPerViewer = 50
    /// Fixes less accurate than this change no alert's state (a coarse fix would flap).
    static let maxAccuracy = 250.0

    var proto: GeoV1.PlaceAlert {
        var p = GeoV1.PlaceAlert(alertId: id, viewerId: viewer, subjectId: subject, label: label, onArrive: onArrive,
                                 onLeave: onLeave, createdAtMs: createdMs)
        switch target {
        case .zone(let id): p.zoneId = id
        case .place(let id): p.placeId = id
        }
        return p
    }
}

/// Every place alert, who allows them, and where each watched subject is: inside or not, per
/// target (shared by all the alerts on the same subject and target). Pure.
struct PlaceAlertBook: Sendable {
    private(set) var alerts: [UInt64: PlaceAlertRecord] = [:]
    /// subject → their alerts' ids (the hot path: one lookup per location update).
    private var bySubject: [UInt64: [UInt64]] = [:]
    /// viewer → the ids of the alerts they set (lists and the per-viewer limit, under the state lock).
    private var byViewer: [UInt64: [UInt64]] = [:]
    /// subject → the friends they allow to set alerts.
    private(set) var allowed: [UInt64: Set<UInt64>] = [:]
    /// subject → the targets they are inside.
    private(set) var inside: [UInt64: Set<PlaceTarget>] = [:]

    init(alerts: [PlaceAlertRecord] = [], allowed: [(subject: UInt64, viewer: UInt64)] = []) {
        for alert in alerts { add(alert) }
        for pair in allowed { self.allowed[pair.subject, default: []].insert(pair.viewer) }
    }

    var isEmpty: Bool { bySubject.isEmpty }
    func isWatched(_ subject: UInt64) -> Bool { bySubject[subject] != nil }
    func isAllowed(viewer: UInt64, subject: UInt64) -> Bool { allowed[subject]?.contains(viewer) == true }

    func alerts(of subject: UInt64) -> [PlaceAlertRecord] { (bySubject[subject] ?? []).compactMap { alerts[$0] } }
    func alerts(setBy viewer: UInt64) -> [PlaceAlertRecord] { (byViewer[viewer] ?? []).compactMap { alerts[$0] }.sorted { $0.id < $1.id } }
    func alert(viewer: UInt64, subject: UInt64, target: PlaceTarget) -> PlaceAlertRecord? {
        alerts(of: subject).first { $0.viewer == viewer && $0.target == target }
    }

    mutating func add(_ alert: PlaceAlertRecord) {
        if alerts[alert.id] == nil {
            bySubject[alert.subject, default: []].append(alert.id)
            byViewer[alert.viewer, default: []].append(alert.id)
        }
        alerts[alert.id] = alert
    }

    mutating func remove(_ id: UInt64) {
        guard let alert = alerts.removeValue(forKey: id) else { return }
        byViewer[alert.viewer]?.removeAll { $0 == id }
        if byViewer[alert.viewer]?.isEmpty == true { byViewer[alert.viewer] = nil }
        bySubject[alert.subject]?.removeAll { $0 == id }
        if bySubject[alert.subject]?.isEmpty == true {
            bySubject[alert.subject] = nil
            inside[alert.subject] = nil
        } else if !alerts(of: alert.subject).contains(where: { $0.target == alert.target }) {
            inside[alert.subject]?.remove(alert.target)
        }
    }

    mutating func setAllowed(viewer: UInt64, subject: UInt64, _ allow: Bool) {
        if allow { allowed[subject, default: []].insert(viewer) } else {
            allowed[subject]?.remove(viewer)
            if allowed[subject]?.isEmpty == true { allowed[subject] = nil }
        }
    }

    /// A zone moved or was relabelled: the alerts on it follow.
    mutating func zoneChanged(_ zone: ZoneRecord) {
        for id in bySubject[zone.user] ?? [] where alerts[id]?.target == .zone(zone.id) {
            alerts[id]?.area = zone.area
            alerts[id]?.label = zone.label
        }
    }

    /// Whether `subject` at (lat, lon) starts out inside `target`'s area (no alert is told: a
    /// new alert, or the state rebuilt at start from the latest fixes).
    mutating func seed(subject: UInt64, target: PlaceTarget, area: PlaceArea, lat: Double, lon: Double) {
        if area.edgeDistance(lat: lat, lon: lon) <= 0 { inside[subject, default: []].insert(target) } else { inside[subject]?.remove(target) }
    }

    /// One alert that fires.
    struct Fired: Sendable, Equatable {
        var alert: PlaceAlertRecord
        var arrived: Bool
        /// The index of the fix that did it.
        var fix: Int
    }

    /// What a committed run of fixes does: the alerts that fire (in order) and the new set of
    /// targets inside for each subject whose set changed. Arriving is being inside the area; leaving is being
    /// more than its `leaveMargin` beyond the edge; fixes less accurate than `maxAccuracy` change
    /// nothing. Not applied: `apply` once the fixes are durable.
    func transitions(_ fixes: [(user: UInt64, lat: Double, lon: Double, accuracy: Double)]) -> (fired: [Fired], inside: [UInt64: Set<PlaceTarget>]) {
        var fired: [Fired] = []
        var changed: [UInt64: Set<PlaceTarget>] = [:]
        for (index, fix) in fixes.enumerated() where fix.accuracy <= PlaceAlertRecord.maxAccuracy {
            guard let ids = bySubject[fix.user] else { continue }
            // Each alert decides from where the subject was before this fix, so alerts on the
            // same target agree (no per-fix dictionary: this runs for every watched update).
            let before = changed[fix.user] ?? inside[fix.user] ?? []
            var after = before
            for id in ids {
                guard let alert = alerts[id] else { continue }
                let was = before.contains(alert.target)
                let d = alert.area.edgeDistance(lat: fix.lat, lon: fix.lon)
                let now = was ? d <= alert.area.leaveMargin : d <= 0
                guard now != was else { continue }
                if now { after.insert(alert.target) } else { after.remove(alert.target) }
                if now ? alert.onArrive : alert.onLeave { fired.append(Fired(alert: alert, arrived: now, fix: index)) }
            }
            if after != before { changed[fix.user] = after }
        }
        return (fired, changed)
    }

    mutating func apply(inside changes: [UInt64: Set<PlaceTarget>]) {
        for (subject, targets) in changes where bySubject[subject] != nil { inside[subject] = targets.isEmpty ? nil : targets }
    }

    /// A deleted account: their alerts either way, their permissions either way.
    mutating func forget(_ user: UInt64) {
        for id in (byViewer[user] ?? []) + (bySubject[user] ?? []) { remove(id) }
        allowed[user] = nil
        for subject in Array(allowed.keys) { setAllowed(viewer: user, subject: subject, false) }
    }
}
