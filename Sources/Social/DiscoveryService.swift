import Foundation
public import FriensoProto
import Identity
public import Wire

/// Findable setting, recommendations and contact exchange.
extension SocialService {
    /// The most contact identifiers one recommendation call takes.
    static let maxContacts = 5_000

    public func getDiscoverySettings(_ request: SocialV1.GetDiscoverySettingsRequest, _ context: RequestContext) async throws -> SocialV1.GetDiscoverySettingsResponse {
        let caller = try context.requireCaller()
        return SocialV1.GetDiscoverySettingsResponse(settings: SocialV1.DiscoverySettings(findable: try await store.findable(caller)))
    }

    public func setFindable(_ request: SocialV1.SetFindableRequest, _ context: RequestContext) async throws -> SocialV1.SetFindableResponse {
        let caller = try context.requireCaller()
        let now = try await store.setFindable(caller, request.findable, now: self.now())
        return SocialV1.SetFindableResponse(settings: SocialV1.DiscoverySettings(findable: now))
    }

    // MARK: Recommendations

    public func recommendFriends(_ request: SocialV1.RecommendFriendsRequest, _ context: RequestContext) async throws -> SocialV1.RecommendFriendsResponse {
        let caller = try context.requireCaller()
        let total = request.phones.count + request.emails.count + request.contactHashes.count + request.externalIds.count
        guard total > 0 else { throw RPCError.invalidArgument("give at least one phone, email, contact hash or external id") }
        guard total <= Self.maxContacts else { throw RPCError.invalidArgument("at most \(Self.maxContacts) contact identifiers per call") }
        if let bad = request.contactHashes.firstIndex(where: { $0.count != ContactIdentifier.hashLength }) {
            throw RPCError.invalidArgument("contact_hashes[\(bad)]: a SHA-256 hash is 32 bytes, got \(request.contactHashes[bad].count)")
        }
        var externals: [AccountsV1.ExternalId] = []
        for (index, external) in request.externalIds.enumerated() {
            do {
                let (provider, id) = try ContactIdentifier.externalID(provider: external.provider, id: external.externalId)
                externals.append(AccountsV1.ExternalId(provider: provider, externalId: id))
            } catch {
                throw RPCError.invalidArgument("external_ids[\(index)]: \(error.message)")
            }
        }
        // Raw address-book entries are often junk ("Home", "ext. 12"): count them, don't fail.
        var hashes = Set(request.contactHashes)
        var unusable = 0
        for phone in request.phones {
            if let normalized = PhoneNumber.normalize(phone) { hashes.insert(ContactIdentifier.hash(normalized)) } else { unusable += 1 }
        }
        for email in request.emails {
            if let normalized = ContactIdentifier.normalizeEmail(email) { hashes.insert(ContactIdentifier.hash(normalized)) } else { unusable += 1 }
        }
        let matches = try await accounts.call(AccountsAPI.matchContacts,
                                              AccountsV1.MatchContactsRequest(hashes: Array(hashes), externalIds: externals),
                                              options: CallOptions(deadline: context.downstreamBudget, idempotent: true)).matches
        var excluded = try await store.excludedFromDiscovery(for: caller)
        excluded.insert(caller)
        let pending = try await store.pendingRequestPeers(of: caller)
        let recommendations = matches.compactMap { match -> SocialV1.Recommendation? in
            guard let p = match.profile, !excluded.contains(p.userId) else { return nil }
            return SocialV1.Recommendation(
                user: SocialV1.UserRef(userId: p.userId, username: p.username, firstName: p.firstName, lastName: p.lastName,
                                       profilePictureMediaId: p.profilePictureMediaId),
                byPhone: match.byPhone, byEmail: match.byEmail, byExternalId: match.byExternalId,
                requestPending: pending.contains(p.userId))
        }.sorted { ($0.user?.username ?? "") < ($1.user?.username ?? "") }
        return SocialV1.RecommendFriendsResponse(recommendations: recommendations, unusable: UInt32(unusable))
    }

    // MARK: Contact exchange

    public func addExchange(_ request: SocialV1.AddExchangeRequest, _ context: RequestContext) async throws -> SocialV1.AddExchangeResponse {
        let caller = try context.requireCaller()
        var label = request.placeLabel.trimmingCharacters(in: .whitespacesAndNewlines)
        guard label.count <= 80 else { throw RPCError.invalidArgument("place_label: at most 80 characters") }
        var location: ExchangeLocation?
        if request.hasLocation {
            guard request.latitude.isFinite, (-90...90).contains(request.latitude) else {
                throw RPCError.invalidArgument("latitude: a number from -90 to 90")
            }
            guard request.longitude.isFinite, (-180...180).contains(request.longitude) else {
                throw RPCError.invalidArgument("longitude: a number from -180 to 180")
            }
            location = ExchangeLocation(latitude: request.latitude, longitude: request.longitude)
        } else if let geo {
            // Where the caller is now, from geo; an exchange without coordinates if geo cannot say.
            do {
                let latest = try await geo.call(GeoV1.GeoService.latestLocation, GeoV1.LatestLocationRequest(userId: caller),
                                                options: CallOptions(deadline: min(context.downstreamBudget, .seconds(1)), idempotent: true))
                if latest.found, let fix = latest.fix {
                    location = ExchangeLocation(latitude: fix.latitude, longitude: fix.longitude)
                    if label.isEmpty { label = latest.placeName }
                }
            } catch {
                context.logger.warning("no location from geo for the exchange", metadata: ["error": "\(error)"])
            }
        }
        let other = try await resolve(userID: request.userId, username: request.username, context)
        switch try await store.addExchange(from: caller, to: other, location: location, placeLabel: label, now: now()) {
        case .waiting:
            return SocialV1.AddExchangeResponse(state: .waiting)
        case .recorded(let record):
            let users = try await profiles([other], context)
            return SocialV1.AddExchangeResponse(state: .recorded, exchange: Self.view(record, for: caller, users))
        }
    }

    public func listExchanges(_ request: SocialV1.ListExchangesRequest, _ context: RequestContext) async throws -> SocialV1.ListExchangesResponse {
        let caller = try context.requireCaller()
        let size = request.pageSize == 0 ? 20 : Int(request.pageSize)
        guard size <= 100 else { throw RPCError.invalidArgument("page_size: at most 100") }
        var before: UInt64 = 0
        if !request.pageToken.isEmpty {
            guard request.pageToken.hasPrefix("x:"), let id = UInt64(request.pageToken.dropFirst(2)), id > 0 else {
                throw RPCError.invalidArgument("page_token: not a token from a previous page")
            }
            before = id
        }
        let records = try await store.exchanges(of: caller, before: before, limit: size + 1)
        let page = Array(records.prefix(size))
        let users = try await profiles(Set(page.map { $0.other(than: caller) }), context)
        return SocialV1.ListExchangesResponse(exchanges: page.map { Self.view($0, for: caller, users) },
                                              nextPageToken: records.count > size ? "x:\(page.last!.id)" : "")
    }

    static func view(_ record: ExchangeRecord, for caller: UInt64, _ users: [UInt64: SocialV1.UserRef]) -> SocialV1.Exchange {
        let other = record.other(than: caller)
        return SocialV1.Exchange(exchangeId: record.id, user: users[other] ?? SocialV1.UserRef(userId: other),
                                 exchangedAtMs: record.exchangedAtMs, latitude: record.location?.latitude ?? 0,
                                 longitude: record.location?.longitude ?? 0, placeLabel: record.placeLabel,
                                 hasLocation: record.location != nil)
    }
}
