import Foundation
public import FriensoProto
import Identity
import SocialReplica
public import Wire

/// Places (operator imports, closest, on campus), venue attendance and check-ins.
extension GeoService {
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
        state.mutex.withLock { s in
            if request.replace { s.places = [] }
            s.places += stored
        }
        context.logger.info("places imported", metadata: ["count": "\(stored.count)", "skipped": "\(parsed.problems.count)"])
        return GeoV1.ImportPlacesResponse(imported: UInt32(stored.count), problems: parsed.problems)
    }

    /// The caller's point: given in the request, or their latest fix.
    private func point(_ has: Bool, _ lat: Double, _ lon: Double, caller: UInt64) throws -> (lat: Double, lon: Double) {
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

    /// Counted from live locations at the time of the call (never from counters that could
    /// drift): users inside each venue with a fresh fix, and the caller's friends among them.
    public func listVenues(_ request: GeoV1.ListVenuesRequest, _ context: RequestContext) async throws -> GeoV1.ListVenuesResponse {
        let caller = try context.requireCaller()
        let at = now(), freshAfter = at - config.venueFreshness.wholeMilliseconds
        let friends = Set(graph.read { $0.friends(of: caller) })
        var venues = state.mutex.withLock { s in
            s.places.filter { $0.kind == .venue }.map { venue -> GeoV1.VenueAttendance in
                var people = 0, friendsHere = 0
                s.index.forEach(within: venue.reach + 1, ofLat: venue.lat, lon: venue.lon) { user, _ in
                    guard let fix = s.latest[user], fix.receivedMs >= freshAfter, venue.contains(lat: fix.lat, lon: fix.lon) else { return }
                    people += 1
                    if friends.contains(user) { friendsHere += 1 }
                }
                return GeoV1.VenueAttendance(venue: venue.proto, people: UInt32(people), friends: UInt32(friendsHere))
            }
        }
        venues.sort { ($0.people, $0.friends) > ($1.people, $1.friends) }
        return GeoV1.ListVenuesResponse(venues: venues, freshMinutes: UInt32(config.venueFreshness.wholeMilliseconds / 60_000))
    }

    public func checkIn(_ request: GeoV1.CheckInRequest, _ context: RequestContext) async throws -> GeoV1.CheckInResponse {
        let caller = try context.requireCaller()
        let name = request.placeName.trimmingCharacters(in: .whitespacesAndNewlines)
        guard (1...80).contains(name.count) else { throw RPCError.invalidArgument("place_name: 1-80 characters") }
        guard request.mediaId.count <= 64, request.mediaId.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "-" || $0 == "_") }) else {
            throw RPCError.invalidArgument("media_id: an id from the media service")
        }
        let p = try point(request.hasPoint, request.latitude, request.longitude, caller: caller)
        let previousPhoto = state.mutex.withLock { $0.checkIns[caller]?.mediaID ?? "" }
        if !request.mediaId.isEmpty || !previousPhoto.isEmpty {
            // The photo must be the caller's check-in upload; the replaced check-in's photo is released.
            if let photos {
                do {
                    try await photos.attach(user: caller, mediaID: request.mediaId, deadline: context.downstreamBudget)
                } catch let error as RPCError where request.mediaId.isEmpty {
                    // Only a release: the check-in goes ahead; media drops the photo when the next one is attached.
                    context.logger.warning("previous check-in photo not released", metadata: ["error": "\(error)"])
                }
            } else if !request.mediaId.isEmpty {
                throw RPCError.unavailable("photos are not available: check in without one")
            }
        }
        let at = now()
        let record = CheckInRecord(user: caller, placeName: name, lat: p.lat, lon: p.lon, mediaID: request.mediaId,
                                   createdMs: at, expiresMs: at + config.checkInLifetime.wholeMilliseconds)
        let replaced = try await store.saveCheckIn(record, now: at)
        state.mutex.withLock { $0.checkIns[caller] = record }
        return GeoV1.CheckInResponse(checkIn: Self.proto(record, distance: 0), replaced: replaced)
    }

    /// Active check-ins the caller may see near them: those of people whose location they may
    /// see, and those of findable people (check-ins are how strangers nearby meet); never across
    /// a block or from someone in ghost mode unless visible anyway.
    public func listCheckIns(_ request: GeoV1.ListCheckInsRequest, _ context: RequestContext) async throws -> GeoV1.ListCheckInsResponse {
        let caller = try context.requireCaller()
        let maxRadius = request.feed ? config.feedRadius : config.checkInRadius
        let radius = request.radiusM == 0 ? maxRadius : request.radiusM
        guard radius.isFinite, radius > 0, radius <= max(maxRadius, config.feedRadius) else {
            throw RPCError.invalidArgument("radius_m: more than 0, at most \(Int(max(maxRadius, config.feedRadius)))")
        }
        let limit = request.limit == 0 ? 20 : Int(request.limit)
        guard limit <= 100 else { throw RPCError.invalidArgument("limit: at most 100") }
        let me = try point(false, 0, 0, caller: caller)
        let at = now()
        var found = state.mutex.withLock { s in
            graph.read { g in
                s.checkIns.values.compactMap { c -> GeoV1.CheckIn? in
                    guard c.expiresMs > at else { return nil }
                    let d = GeoMath.distance(lat1: me.lat, lon1: me.lon, lat2: c.lat, lon2: c.lon)
                    guard d <= radius else { return nil }
                    return Self.checkInShown(to: caller, of: c.user, s, g, at) ? Self.proto(c, distance: d) : nil
                }
            }
        }
        if request.feed {
            found.sort { ($0.createdAtMs, $0.userId) > ($1.createdAtMs, $1.userId) }
        } else {
            found.sort { ($0.distanceM, $0.userId) < ($1.distanceM, $1.userId) }
        }
        return GeoV1.ListCheckInsResponse(checkIns: Array(found.prefix(limit)))
    }

    /// Who sees a check-in: its owner, those who may see the owner's location, and anyone not
    /// blocked when the owner is findable and not in ghost mode (check-ins are how strangers meet).
    static func checkInShown(to viewer: UInt64, of owner: UInt64, _ s: GeoState, _ g: GraphState, _ at: Int64) -> Bool {
        owner == viewer || s.visible(viewer: viewer, subject: owner, graph: g, now: at)
            || (g.isFindable(owner) && !g.blocked(viewer, owner) && !s.settings(of: owner).ghost)
    }

    /// For media: the rule of `listCheckIns` (without the distance) for one check-in.
    public func checkInAccess(_ request: GeoV1.CheckInAccessRequest, _ context: RequestContext) async throws -> GeoV1.CheckInAccessResponse {
        let at = now()
        return state.mutex.withLock { s in
            graph.read { g in
                guard let c = s.checkIns[request.ownerId], c.expiresMs > at else { return GeoV1.CheckInAccessResponse() }
                return Self.checkInShown(to: request.viewerId, of: request.ownerId, s, g, at)
                    ? GeoV1.CheckInAccessResponse(visible: true, mediaId: c.mediaID) : GeoV1.CheckInAccessResponse()
            }
        }
    }

    public func getPlace(_ request: GeoV1.GetPlaceRequest, _ context: RequestContext) async throws -> GeoV1.GetPlaceResponse {
        state.mutex.withLock { s in
            s.places.first { $0.id == request.placeId }.map { GeoV1.GetPlaceResponse(found: true, place: $0.proto) } ?? GeoV1.GetPlaceResponse()
        }
    }

    static func proto(_ c: CheckInRecord, distance: Double) -> GeoV1.CheckIn {
        GeoV1.CheckIn(userId: c.user, placeName: c.placeName, latitude: c.lat, longitude: c.lon, mediaId: c.mediaID,
                      createdAtMs: c.createdMs, expiresAtMs: c.expiresMs, distanceM: distance)
    }
}
