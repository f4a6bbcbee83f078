import Foundation
public import FriensoProto
import Identity
import SocialReplica
public import Wire

/// Places (operator imports, closest, on campus) and venue attendance. Check-ins: `CheckIns.swift`.
extension GeoService {
    /// The stream an import is announced on (alerts' copy of the places).
    public static let placesStream = "places"

    /// Every place, a page at a time by id, with the distance within which a place names where
    /// someone is (alerts' copy: `PlacesSnapshotRequest`).
    public func placesSnapshot(_ request: GeoV1.PlacesSnapshotRequest, _ context: RequestContext) async throws -> GeoV1.PlacesSnapshotResponse {
        guard request.limit <= 5_000 else { throw RPCError.invalidArgument("limit: at most 5,000 places a page") }
        let limit = request.limit == 0 ? 1_000 : Int(request.limit)
        // Copied under the lock, sorted outside it: a read must not hold up location updates.
        let after = state.mutex.withLock { s in s.places.filter { $0.id > request.afterId } }
        let page = Array(after.sorted { $0.id < $1.id }.prefix(limit))
        return GeoV1.PlacesSnapshotResponse(places: page.map(\.proto), nextAfterId: page.count == limit ? page.last?.id ?? 0 : 0,
                                            withinM: config.aroundDistance)
    }

    public func importPlaces(_ request: GeoV1.ImportPlacesRequest, _ context: RequestContext) async throws -> GeoV1.ImportPlacesResponse {
        guard !config.operatorKey.isEmpty else {
            throw RPCError.permissionDenied("place imports are disabled: no operator key is configured (geo.operatorKey)")
        }
        guard OperatorKey.matches(request.operatorKey, config.operatorKey) else {
            context.logger.warning("place import with a wrong operator key", metadata: ["client": "\(context.clientAddress)"])
            throw RPCError.permissionDenied("operator_key is wrong")
        }
        guard !request.data.isEmpty, request.data.count <= PlaceImport.maxBytes else {
            throw RPCError.invalidArgument("data: 1 byte to 3 MB")
        }
        let parsed: PlaceImport.Parsed
        switch request.format.lowercased() {
        case "geojson", "json": parsed = PlaceImport.geoJSON(request.data)
        case "csv":
            guard let text = String(validating: request.data, as: UTF8.self) else { throw RPCError.invalidArgument("data: CSV must be UTF-8") }
            parsed = PlaceImport.csv(text)
        default: throw RPCError.invalidArgument("format: geojson or csv")
        }
        guard !parsed.places.isEmpty else {
            throw RPCError.invalidArgument("nothing to import: " + parsed.problems.prefix(5).joined(separator: "; "))
        }
        let stored = try await store.importPlaces(parsed.places, replace: request.replace)
        // Place alerts on places a replacing import removed go with them.
        let dropped = request.replace ? try await store.deletePlaceAlerts(onPlacesOtherThan: Set(stored.map(\.id))) : []
        state.mutex.withLock { s in
            if request.replace { s.places = [] }
            s.places += stored
            for id in dropped { s.placeAlerts.remove(id) }
        }
        publisher?.emit(topic: Self.placesStream, method: "geo.PlacesChanged", payload: []) // alerts' copy loads them again
        context.logger.info("places imported", metadata: ["count": "\(stored.count)", "skipped": "\(parsed.problems.count)"])
        return GeoV1.ImportPlacesResponse(imported: UInt32(stored.count), problems: parsed.problems)
    }

    /// The caller's point: given in the request, or their latest fix.
    func point(_ has: Bool, _ lat: Double, _ lon: Double, caller: UInt64) throws -> (lat: Double, lon: Double) {
        if has {
            guard GeoMath.isValid(latitude: lat, longitude: lon) else {
                throw RPCError.invalidArgument("latitude must be -90..90 and longitude -180..180")
            }
            return (lat, lon)
        }
        guard let fix = state.mutex.withLock({ $0.latest[caller] }) else {
            throw RPCError.failedPrecondition("share a location first (frienso locate LAT LON), or give a point")
        }
        return (fix.lat, fix.lon)
    }

    public func closestPlace(_ request: GeoV1.ClosestPlaceRequest, _ context: RequestContext) async throws -> GeoV1.ClosestPlaceResponse {
        let caller = try context.requireCaller()
        let p = try point(request.hasPoint, request.latitude, request.longitude, caller: caller)
        return state.mutex.withLock { s in
            let onCampus = s.places.contains { $0.kind == .campus && $0.contains(lat: p.lat, lon: p.lon) }
            guard let (place, distance) = s.closestPlace(lat: p.lat, lon: p.lon, kind: request.kind) else {
                return GeoV1.ClosestPlaceResponse(found: false, onCampus: onCampus)
            }
            return GeoV1.ClosestPlaceResponse(found: true, place: place.proto, distanceM: distance, onCampus: onCampus)
        }
    }

    /// Places whose point lies within the radius (a campus outline counts when the point is
    /// inside it too), nearest first.
    public func listPlaces(_ request: GeoV1.ListPlacesRequest, _ context: RequestContext) async throws -> GeoV1.ListPlacesResponse {
        let caller = try context.requireCaller()
        let p = try point(request.hasPoint, request.latitude, request.longitude, caller: caller)
        let radius = request.radiusM == 0 ? 3_000 : request.radiusM
        guard radius.isFinite, radius > 0, radius <= 20_000 else { throw RPCError.invalidArgument("radius_m: up to 20,000") }
        let limit = request.limit == 0 ? 200 : Int(request.limit)
        guard limit <= 1_000 else { throw RPCError.invalidArgument("limit: at most 1,000") }
        let found = state.mutex.withLock { s in
            s.places.compactMap { place -> (GeoV1.Place, Double)? in
                let distance = GeoMath.distance(lat1: p.lat, lon1: p.lon, lat2: place.lat, lon2: place.lon)
                guard distance <= radius || place.contains(lat: p.lat, lon: p.lon) else { return nil }
                return (place.proto, distance)
            }
        }
        return GeoV1.ListPlacesResponse(places: found.sorted { $0.1 < $1.1 }.prefix(limit).map(\.0))
    }

    /// Counted from live locations at the time of the call (never from counters that could
    /// drift): users inside each venue with a fresh fix, and the caller's friends among them,
    /// under the rules in the contract (`VenueCount`).
    public func listVenues(_ request: GeoV1.ListVenuesRequest, _ context: RequestContext) async throws -> GeoV1.ListVenuesResponse {
        let caller = try context.requireCaller()
        let at = now(), freshAfter = at - config.venueFreshness.wholeMilliseconds
        let k = config.venueMinimumPeople
        let venues = state.mutex.withLock { s in
            graph.read { g in Self.venues(seenBy: caller, freshAfter: freshAfter, minimum: k, in: s, graph: g, at: at) }
        }.sorted(byKey: { KeyPair($0.people, $0.friends) }, descending: true)
        return GeoV1.ListVenuesResponse(venues: venues, freshMinutes: UInt32(config.venueFreshness.wholeMilliseconds / 60_000),
                                        minPeople: UInt32(k))
    }

    /// Every venue's attendance as `caller` may count it. The state and the graph are borrowed
    /// and read in loops: a closure calling a method on either copies the whole struct on each
    /// call, here per person near a venue (`docs/benchmarks.md`, item 81).
    static func venues(seenBy caller: UInt64, freshAfter: Int64, minimum k: Int, in s: borrowing GeoState,
                       graph g: borrowing GraphState, at: Int64) -> [GeoV1.VenueAttendance] {
        var venues: [GeoV1.VenueAttendance] = []
        var near: [UInt64] = []
        for venue in s.places where venue.kind == .venue {
            near.removeAll(keepingCapacity: true)
            s.index.forEach(within: venue.reach + 1, ofLat: venue.lat, lon: venue.lon) { user, _ in near.append(user) }
            var count = VenueCount()
            for user in near {
                guard let fix = s.latest[user], fix.receivedMs >= freshAfter, venue.contains(lat: fix.lat, lon: fix.lon) else { continue }
                // A friend counts as one where their precision for the caller places them there (exact or place).
                let shown = user != caller && g.areFriends(caller, user) ? s.disclosure(viewer: caller, subject: user, graph: g, now: at) : nil
                // Inside a private zone, friends see the zone, not the venue.
                let placed = (shown == .exact || shown == .place) && s.zones.privateZone(of: user, at: fix) == nil
                count.add(ghost: user != caller && s.settings(of: user).ghost, visibleFriend: placed)
            }
            venues.append(count.attendance(of: venue.proto, minimum: k))
        }
        return venues
    }

    public func getPlace(_ request: GeoV1.GetPlaceRequest, _ context: RequestContext) async throws -> GeoV1.GetPlaceResponse {
        state.mutex.withLock { s in
            s.places.first { $0.id == request.placeId }.map { GeoV1.GetPlaceResponse(found: true, place: $0.proto) } ?? GeoV1.GetPlaceResponse()
        }
    }

}
