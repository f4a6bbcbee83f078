import Foundation
public import FriensoProto
import GRDB
import Identity
import Storage
public import Wire

/// Share my live location with someone who has no account (see the contract): links with a
/// random token (only its SHA-256 stored), valid for a chosen time, revocable at once; each view
/// answers the owner's live location and counts in their audit.
extension GeoService {
    static let maxShareMinutes: UInt32 = 10_080
    static let maxLabel = 80

    public func createShareLink(_ request: GeoV1.CreateShareLinkRequest, _ context: RequestContext) async throws -> GeoV1.CreateShareLinkResponse {
        let caller = try context.requireCaller()
        let minutes = request.minutes == 0 ? 60 : request.minutes
        guard (5...Self.maxShareMinutes).contains(minutes) else { throw RPCError.invalidArgument("minutes: 5-\(Self.maxShareMinutes) (a week)") }
        guard request.label.count <= Self.maxLabel else { throw RPCError.invalidArgument("label: at most \(Self.maxLabel) characters") }
        let at = now()
        let token = Self.newShareToken()
        var link = try await store.createShareLink(owner: caller, tokenHash: SHA256.digest(token), label: request.label, now: at,
                                                   expires: at + Int64(minutes) * 60_000)
        link.token = token
        context.logger.info("share link created", metadata: ["link": "\(link.linkId)", "minutes": "\(minutes)"])
        return GeoV1.CreateShareLinkResponse(link: link, path: "/s/\(token)")
    }

    public func listShareLinks(_ request: GeoV1.ListShareLinksRequest, _ context: RequestContext) async throws -> GeoV1.ListShareLinksResponse {
        let caller = try context.requireCaller()
        return GeoV1.ListShareLinksResponse(links: try await store.shareLinks(of: caller, now: now()))
    }

    public func revokeShareLink(_ request: GeoV1.RevokeShareLinkRequest, _ context: RequestContext) async throws -> GeoV1.RevokeShareLinkResponse {
        let caller = try context.requireCaller()
        guard let link = try await store.revokeShareLink(request.linkId, owner: caller, now: now()) else {
            throw RPCError.notFound("no share link \(request.linkId) of yours")
        }
        return GeoV1.RevokeShareLinkResponse(link: link)
    }

    public func viewShareLink(_ request: GeoV1.ViewShareLinkRequest, _ context: RequestContext) async throws -> GeoV1.ViewShareLinkResponse {
        let gone = RPCError.notFound("this link has expired or was revoked")
        guard request.token.utf8.count == 43, request.token.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "-" || $0 == "_") }) else {
            throw gone
        }
        let at = now()
        guard let link = try await store.liveShareLink(tokenHash: SHA256.digest(request.token), now: at) else { throw gone }
        audit.record(subjects: [link.owner], viewer: 0, kind: .shareLink, at: at, link: link.id)
        var reply = GeoV1.ViewShareLinkResponse(label: link.label, expiresAtMs: link.expiresMs)
        let around = config.aroundDistance
        state.mutex.withLock { s in
            guard let fix = s.latest[link.owner] else { return }
            reply.ageMs = max(0, at - fix.receivedMs)
            // Inside a private zone, the link shows the zone's label (or nothing), never coordinates.
            if let zone = s.zones.privateZone(of: link.owner, at: fix) {
                reply.around = zone.privacy == .label ? zone.label : ""
                return
            }
            reply.fix = Self.proto(fix)
            reply.around = s.around(lat: fix.lat, lon: fix.lon, within: around)
        }
        return reply
    }

    /// 32 random bytes, base64url without padding (43 characters).
    static func newShareToken() -> String {
        var generator = SystemRandomNumberGenerator()
        let bytes = (0..<32).map { _ in UInt8.random(in: 0...255, using: &generator) }
        return Data(bytes).base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }
}

extension SQLiteGeoStore {
    static func migrateShareLinks(_ migrator: inout DatabaseMigrator) {
        migrator.registerMigration("share_links") { db in
            try db.execute(sql: """
                CREATE TABLE share_links (
                    id INTEGER PRIMARY KEY AUTOINCREMENT, owner INTEGER NOT NULL, token_hash BLOB NOT NULL UNIQUE, label TEXT NOT NULL,
                    created_ms INTEGER NOT NULL, expires_ms INTEGER NOT NULL, revoked_ms INTEGER NOT NULL DEFAULT 0, views INTEGER NOT NULL DEFAULT 0
                );
                CREATE INDEX share_links_owner ON share_links(owner, id);
                """)
        }
    }


    static let linkColumns = "id, label, created_ms, expires_ms, revoked_ms, views"
    static func link(_ row: CurrentRow) throws -> GeoV1.ShareLink {
        try GeoV1.ShareLink(linkId: row[0], label: row[1], createdAtMs: row[2], expiresAtMs: row[3], revokedAtMs: row[4], views: UInt32(clamping: row[5] as Int64))
    }

    func createShareLink(owner: UInt64, tokenHash: [UInt8], label: String, now: Int64, expires: Int64) async throws -> GeoV1.ShareLink {
        try await database.write { db in
            // Links ended more than a week ago are forgotten.
            try db.run(sql: "DELETE FROM share_links WHERE owner = ?1 AND (expires_ms < ?2 OR (revoked_ms != 0 AND revoked_ms < ?2))",
                       arguments: [owner, now - 7 * 86_400_000])
            try db.run(sql: "INSERT INTO share_links (owner, token_hash, label, created_ms, expires_ms) VALUES (?, ?, ?, ?, ?)",
                       arguments: [owner, Data(tokenHash), label, now, expires])
            guard let link = try Row.fetchOne(db, cached: "SELECT \(Self.linkColumns) FROM share_links WHERE id = ?", binding: db.lastInsertedRowID,
                                              as: Self.link) else {
                throw StoreInvariant("the share link just made is missing")
            }
            return link
        }
    }

    func shareLinks(of owner: UInt64, now: Int64) async throws -> [GeoV1.ShareLink] {
        try await database.read { db in
            try Row.fetchAll(db, cached: """
                SELECT \(Self.linkColumns) FROM share_links WHERE owner = ?
                ORDER BY (revoked_ms = 0 AND expires_ms > ?) DESC, id DESC
                """, binding: owner, now, as: Self.link)
        }
    }

    func revokeShareLink(_ id: UInt64, owner: UInt64, now: Int64) async throws -> GeoV1.ShareLink? {
        try await database.write { db in
            try db.run(sql: "UPDATE share_links SET revoked_ms = ? WHERE id = ? AND owner = ? AND revoked_ms = 0", arguments: [now, id, owner])
            return try Row.fetchOne(db, cached: "SELECT \(Self.linkColumns) FROM share_links WHERE id = ? AND owner = ?", binding: id, owner, as: Self.link)
        }
    }

    /// The live link with this token hash, its view counted.
    func liveShareLink(tokenHash: [UInt8], now: Int64) async throws -> LiveLink? {
        try await database.write { db in
            guard let link = try Row.fetchOne(db, cached: """
                SELECT id, owner, label, expires_ms FROM share_links WHERE token_hash = ? AND revoked_ms = 0 AND expires_ms > ?
                """, binding: Data(tokenHash), now, as: { try LiveLink(id: $0[0], owner: $0[1], label: $0[2], expiresMs: $0[3]) }) else { return nil }
            try db.run(sql: "UPDATE share_links SET views = views + 1 WHERE id = ?", arguments: [link.id])
            return link
        }
    }
}
