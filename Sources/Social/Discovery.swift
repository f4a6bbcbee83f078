import Foundation
public import FriensoProto
import GRDB
import Identity
import Storage
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
                                              options: CallOptions(deadline: context.downstreamBudget)).matches
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
        var label = request.placeLabel.trimmingWhitespace()
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
                                                options: CallOptions(deadline: min(context.downstreamBudget, .seconds(1))))
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

// MARK: - Storage

/// Why a contact exchange is refused (the service maps each to a status).
enum ExchangeRefusal: Error, Equatable {
    case yourself
    case blocked
    case callerNotFindable
    case notFindable(UInt64)
}

/// Where a contact exchange was made: from the request now, from geo's latest fix later.
struct ExchangeLocation: Sendable {
    var latitude: Double
    var longitude: Double
}

/// A recorded contact exchange between `userA < userB`.
struct ExchangeRecord: Sendable {
    var id: UInt64
    var userA: UInt64
    var userB: UInt64
    var exchangedAtMs: Int64
    var location: ExchangeLocation?
    var placeLabel: String

    init(id: UInt64, userA: UInt64, userB: UInt64, exchangedAtMs: Int64, location: ExchangeLocation?, placeLabel: String) {
        self.id = id
        self.userA = userA
        self.userB = userB
        self.exchangedAtMs = exchangedAtMs
        self.location = location
        self.placeLabel = placeLabel
    }

    init(row: CurrentRow) throws {
        id = try row["id"]
        userA = try row["user_a"]
        userB = try row["user_b"]
        exchangedAtMs = try row["exchanged_at_ms"]
        let lat: Double? = try row["latitude"], lon: Double? = try row["longitude"]
        location = lat.flatMap { lat in lon.map { ExchangeLocation(latitude: lat, longitude: $0) } }
        placeLabel = try row["place_label"]
    }

    func other(than user: UInt64) -> UInt64 { user == userA ? userB : userA }
}

enum ExchangeOutcome: Sendable {
    /// Your add is recorded; they have not added you yet.
    case waiting
    /// Both added each other: recorded now, or earlier (a repeated add).
    case recorded(ExchangeRecord)
}

/// The findable setting and contact exchange.
extension SQLiteSocialStore {
    static func migrateDiscovery(_ migrator: inout DatabaseMigrator) {
        migrator.registerMigration("discovery") { db in
            try db.create(table: "discovery") { t in
                t.primaryKey("user_id", .integer)
                t.column("findable", .boolean).notNull()
                t.column("updated_at_ms", .integer).notNull()
            }
            // One side's "add" waiting for the other's.
            try db.create(table: "exchange_intents") { t in
                t.column("from_user", .integer).notNull()
                t.column("to_user", .integer).notNull()
                t.column("latitude", .double)
                t.column("longitude", .double)
                t.column("place_label", .text).notNull()
                t.column("created_at_ms", .integer).notNull()
                t.primaryKey(["from_user", "to_user"])
            }
            try db.create(table: "exchanges") { t in
                t.autoIncrementedPrimaryKey("id")
                t.column("user_a", .integer).notNull()
                t.column("user_b", .integer).notNull().indexed()
                t.column("exchanged_at_ms", .integer).notNull()
                t.column("latitude", .double)
                t.column("longitude", .double)
                t.column("place_label", .text).notNull()
                t.uniqueKey(["user_a", "user_b"])
                t.check(sql: "user_a < user_b")
            }
        }
    }

    static func isFindable(_ db: Database, _ user: UInt64) throws -> Bool {
        try Bool.fetchOne(db, cached: "SELECT findable FROM discovery WHERE user_id = ?", arguments: [user]) ?? false
    }

    func findable(_ user: UInt64) async throws -> Bool {
        try await database.read { db in try Self.isFindable(db, user) }
    }

    /// - Returns: the setting now. Publishes a graph event only when it changed.
    func setFindable(_ user: UInt64, _ on: Bool, now: Int64) async throws -> Bool {
        try await mutate { db, events in
            guard try Self.isFindable(db, user) != on else { return on }
            try db.run(sql: "INSERT OR REPLACE INTO discovery (user_id, findable, updated_at_ms) VALUES (?, ?, ?)",
                           arguments: [user, on, now])
            events.append(Self.event(on ? .findableOn : .findableOff, user, 0))
            return on
        }
    }

    /// `from` adds `to`. The second add of a pair records the exchange, at the place it was made
    /// (or, when it carries no location, where the first add was made). Adding again after that
    /// returns the recorded exchange: an exchange happens once per pair.
    func addExchange(from: UInt64, to: UInt64, location: ExchangeLocation?, placeLabel: String, now: Int64) async throws -> ExchangeOutcome {
        try await mutate { db, events in
            guard from != to else { throw ExchangeRefusal.yourself }
            let (a, b) = from < to ? (from, to) : (to, from)
            if let recorded = try Row.fetchOne(db, cached: "SELECT * FROM exchanges WHERE user_a = ? AND user_b = ?", binding: a, b,
                                               as: ExchangeRecord.init(row:)) {
                return .recorded(recorded)
            }
            guard try !Self.blocked(db, from, to) else { throw ExchangeRefusal.blocked }
            guard try Self.isFindable(db, from) else { throw ExchangeRefusal.callerNotFindable }
            guard try Self.isFindable(db, to) else { throw ExchangeRefusal.notFindable(to) }
            try db.run(sql: """
                INSERT OR REPLACE INTO exchange_intents (from_user, to_user, latitude, longitude, place_label, created_at_ms)
                VALUES (?, ?, ?, ?, ?, ?)
                """, arguments: [from, to, location?.latitude, location?.longitude, placeLabel, now])
            guard let theirs = try Row.fetchOne(db, cached: "SELECT latitude, longitude, place_label FROM exchange_intents WHERE from_user = ? AND to_user = ?",
                                                binding: to, from, as: { try (lat: $0[0] as Double?, lon: $0[1] as Double?, label: $0[2] as String) })
            else { return .waiting }
            let lat = location?.latitude ?? theirs.lat
            let lon = location?.longitude ?? theirs.lon
            let label = placeLabel.isEmpty ? theirs.label : placeLabel
            try db.run(sql: """
                INSERT INTO exchanges (user_a, user_b, exchanged_at_ms, latitude, longitude, place_label) VALUES (?, ?, ?, ?, ?, ?)
                """, arguments: [a, b, now, lat, lon, label])
            let id = db.lastInsertedRowID
            try db.run(sql: "DELETE FROM exchange_intents WHERE (from_user = ?1 AND to_user = ?2) OR (from_user = ?2 AND to_user = ?1)",
                           arguments: [from, to])
            events.append(Self.event(.exchangeAdded, a, b))
            guard let recorded = try Row.fetchOne(db, cached: "SELECT * FROM exchanges WHERE id = ?", binding: id, as: ExchangeRecord.init(row:)) else {
                throw StoreInvariant("the exchange just written is missing")
            }
            return .recorded(recorded)
        }
    }

    /// `user`'s exchanges, newest first, older than exchange `before` (0: from the newest).
    func exchanges(of user: UInt64, before: UInt64, limit: Int) async throws -> [ExchangeRecord] {
        try await database.read { db in
            try Row.fetchAll(db, cached: """
                SELECT * FROM exchanges WHERE (user_a = ?1 OR user_b = ?1) AND (?2 = 0 OR id < ?2)
                ORDER BY id DESC LIMIT ?3
                """, binding: user, before, limit, as: ExchangeRecord.init(row:))
        }
    }

    /// Pending friend requests between `user` and anyone, either direction: the other users' ids.
    func pendingRequestPeers(of user: UInt64) async throws -> Set<UInt64> {
        try await database.read { db in
            Set(try UInt64.fetchAll(db, cached: """
                SELECT to_user FROM friend_requests WHERE from_user = ?1 AND state = 1
                UNION SELECT from_user FROM friend_requests WHERE to_user = ?1 AND state = 1
                """, arguments: [user]))
        }
    }
}
