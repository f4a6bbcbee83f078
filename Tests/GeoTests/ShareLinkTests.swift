@testable import Geo
import Foundation
import FriensoProto
import FriensoTesting
import GRDB
import Testing
import Wire

extension GeoTestGroup {
    @Suite("geo: share links", .timeLimit(.minutes(2)))
    struct ShareLinkTests {
        @Test("a link shows the live location to anyone with the token, until it expires or is revoked; every view is audited", arguments: Engine.allCases)
        func lifecycle(engine: Engine) async throws {
            try await withGeo(engine: engine) { geo async throws in
                let made = try await geo.call(1, API.createShareLink, GeoV1.CreateShareLinkRequest(minutes: 30, label: "on my way home"))
                let link = try #require(made.link)
                #expect(link.token.utf8.count == 43 && made.path == "/s/\(link.token)" && link.expiresAtMs == geo.clock.now + 30 * 60_000)
                // No location yet; then one.
                let empty = try await geo.call(0, API.viewShareLink, GeoV1.ViewShareLinkRequest(token: link.token))
                #expect(empty.fix == nil && empty.label == "on my way home")
                _ = try await geo.locate(1, 33.7812, -118.1134)
                let seen = try await geo.call(0, API.viewShareLink, GeoV1.ViewShareLinkRequest(token: link.token))
                #expect(seen.fix?.latitude == 33.7812 && seen.fix?.longitude == -118.1134)
                // The token is stored hashed: no row holds it.
                let stored = try await geo.rows("SELECT token_hash FROM share_links").map { $0[0] }
                let tokenHex = link.token.utf8.map { String(format: "%02x", $0) }.joined()
                #expect(stored.count == 1 && !stored[0].contains(tokenHex) && !stored[0].contains(link.token))
                // Listing never shows a token; views are counted; the audit names the link.
                let listed = try await geo.call(1, API.listShareLinks, GeoV1.ListShareLinksRequest())
                #expect(listed.links.count == 1 && listed.links[0].token.isEmpty && listed.links[0].views == 2)
                let audit = try await geo.call(1, API.listAudit, GeoV1.ListAuditRequest())
                #expect(audit.entries.contains { $0.kind == .shareLink && $0.viewerId == 0 && $0.linkId == link.linkId && $0.count == 2 })

                // Someone else cannot revoke it; its owner can, at once.
                await expectError(.notFound) { _ = try await geo.call(2, API.revokeShareLink, GeoV1.RevokeShareLinkRequest(linkId: link.linkId)) }
                let revoked = try await geo.call(1, API.revokeShareLink, GeoV1.RevokeShareLinkRequest(linkId: link.linkId))
                #expect(revoked.link?.revokedAtMs == geo.clock.now)
                await expectError(.notFound, containing: "expired or was revoked") {
                    _ = try await geo.call(0, API.viewShareLink, GeoV1.ViewShareLinkRequest(token: link.token))
                }
                // Expiry, a wrong token, a malformed one: the same answer.
                let second = try #require(try await geo.call(1, API.createShareLink, GeoV1.CreateShareLinkRequest(minutes: 5)).link)
                geo.clock.advance(5 * 60_000)
                for token in [second.token, String(repeating: "A", count: 43), "../../etc/passwd", ""] {
                    await expectError(.notFound) { _ = try await geo.call(0, API.viewShareLink, GeoV1.ViewShareLinkRequest(token: token)) }
                }
                for bad in [GeoV1.CreateShareLinkRequest(minutes: 4), GeoV1.CreateShareLinkRequest(minutes: 10_081),
                            GeoV1.CreateShareLinkRequest(label: String(repeating: "x", count: 81))] {
                    await expectError(.invalidArgument) { _ = try await geo.call(1, API.createShareLink, bad) }
                }
                // Deleting the account takes its links.
                _ = try await geo.call(0, API.eraseUser, GeoV1.EraseUserRequest(userId: 1))
                #expect(try await geo.call(1, API.listShareLinks, GeoV1.ListShareLinksRequest()).links.isEmpty)
            }
        }
    }
}
