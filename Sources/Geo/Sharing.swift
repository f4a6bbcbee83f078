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
        try await apply([grant])
    }

    /// Applies grant events in order, as `apply(_:)` applies each, stored in one transaction: a
    /// burst of helpNows and watches costs one commit, not one each (`docs/benchmarks.md`, issue
    /// 16, item 46). A failed save fails them all (none is in memory; alerts republishes).
    public func apply(_ grants: [GeoV1.LocationGrant]) async throws {
        var writes: [GrantWrite] = []
        for grant in grants {
            guard grant.subjectId != 0, grant.viewerId != 0, ["watch", "help_now"].contains(grant.reason) else {
                logger.warning("ignoring a malformed grant", metadata: ["reason": "\(grant.reason)"])
                continue
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
                continue
            }
            writes.append(GrantWrite(key: key, expiresMs: grant.expiresAtMs, version: grant.version))
        }
        guard !writes.isEmpty else { return }
        let at = now()
        let applied = try await store.saveGrants(writes, now: at)
        state.mutex.withLock { s in
            for (write, stored) in zip(writes, applied) where stored {
                s.grants.set(write.key, expiresMs: write.expiresMs > at ? write.expiresMs : nil)
            }
        }
        for (write, stored) in zip(writes, applied) where !stored {
            logger.debug("ignoring a grant older than the stored one (another instance stored a newer version first)",
                         metadata: ["reason": "\(write.key.reason)", "version": "\(write.version)"])
        }
    }
}
