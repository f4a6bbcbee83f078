import Foundation
public import FriensoProto
import SocialReplica
public import Wire

/// Who sees my location (sharing settings) and the time-bound grants alerts hands out.
extension GeoService {
    // MARK: Sharing

    public func getSharing(_ request: GeoV1.GetSharingRequest, _ context: RequestContext) async throws -> GeoV1.GetSharingResponse {
        let caller = try context.requireCaller()
        return GeoV1.GetSharingResponse(settings: Self.proto(state.mutex.withLock { $0.settings(of: caller) }))
    }

    public func updateSharing(_ request: GeoV1.UpdateSharingRequest, _ context: RequestContext) async throws -> GeoV1.UpdateSharingResponse {
        let caller = try context.requireCaller()
        let known: Set = ["share_with_friends", "ghost", "proximity_alerts", "proximity_m"]
        guard !request.fields.isEmpty else { throw RPCError.invalidArgument("fields: name at least one of \(known.sorted().joined(separator: ", "))") }
        if let unknown = request.fields.first(where: { !known.contains($0) }) { throw RPCError.invalidArgument("fields: unknown field \"\(unknown)\"") }
        let given = request.settings ?? GeoV1.SharingSettings()
        let fields = Set(request.fields)
        if fields.contains("proximity_m") {
            guard given.proximityM.isFinite, (10...10_000).contains(given.proximityM) else {
                throw RPCError.invalidArgument("proximity_m: 10 to 10,000 metres")
            }
        }
        var settings = state.mutex.withLock { $0.settings(of: caller) }
        if fields.contains("share_with_friends") { settings.shareWithFriends = given.shareWithFriends }
        if fields.contains("ghost") { settings.ghost = given.ghost }
        if fields.contains("proximity_alerts") { settings.proximityAlerts = given.proximityAlerts }
        if fields.contains("proximity_m") { settings.proximityMetres = given.proximityM }
        try await store.saveSharing(caller, settings)
        state.mutex.withLock { $0.sharing[caller] = settings }
        return GeoV1.UpdateSharingResponse(settings: Self.proto(settings))
    }

    static func proto(_ s: Sharing) -> GeoV1.SharingSettings {
        GeoV1.SharingSettings(shareWithFriends: s.shareWithFriends, ghost: s.ghost, proximityAlerts: s.proximityAlerts, proximityM: s.proximityMetres)
    }

    static func proto(_ fix: LatestFix) -> GeoV1.Fix {
        GeoV1.Fix(latitude: fix.lat, longitude: fix.lon, accuracyM: fix.accuracy, deviceTimeMs: fix.deviceMs, receivedAtMs: fix.receivedMs)
    }

    // MARK: Grants (from the alerts service)

    /// Applies a grant event: a future expiry grants (or extends), a past one revokes. A grant
    /// older (`version`) than the one last applied for its key is stale and ignored; the same
    /// version again is applied again (a republish heals a save that failed).
    public func apply(_ grant: GeoV1.LocationGrant) async throws {
        guard grant.subjectId != 0, grant.viewerId != 0, ["watch", "help_now"].contains(grant.reason) else {
            logger.warning("ignoring a malformed grant", metadata: ["reason": "\(grant.reason)"])
            return
        }
        let key = GrantKey(subject: grant.subjectId, viewer: grant.viewerId, reason: grant.reason)
        let stale = state.mutex.withLock { s -> Bool in
            guard grant.version != 0 else { return false }
            if let seen = s.grantVersions[key], seen > grant.version { return true }
            s.grantVersions[key] = grant.version
            return false
        }
        if stale {
            logger.debug("ignoring a grant older than one this instance applied", metadata: ["reason": "\(grant.reason)", "version": "\(grant.version)"])
            return
        }
        let at = now()
        guard try await store.saveGrant(key, expiresMs: grant.expiresAtMs, version: grant.version, now: at) else {
            logger.debug("ignoring a grant older than the stored one (another instance stored a newer version first)",
                         metadata: ["reason": "\(grant.reason)", "version": "\(grant.version)"])
            return
        }
        state.mutex.withLock { s in
            s.grants.set(key, expiresMs: grant.expiresAtMs > at ? grant.expiresAtMs : nil)
        }
    }
}
