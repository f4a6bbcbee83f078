@testable import Geo
import Foundation
import FriensoProto
import FriensoTesting
import Testing
import Wire

extension GeoTestGroup {
    @Suite("geo: who saw my location", .timeLimit(.minutes(2)))
    struct AuditTests {
        @Test("friends' locations, navigate and live events are counted per viewer, kind and hour; not your own reads; erased with the account", arguments: Engine.allCases)
        func counts(engine: Engine) async throws {
            try await withGeo(engine: engine) { geo async throws in
                for friend: UInt64 in [2, 3] { geo.befriend(1, friend) }
                _ = try await geo.locate(1, 33.78, -118.11)   // live: to 2 and 3
                _ = try await geo.locate(2, 33.781, -118.11)  // live: to 1
                for _ in 0..<3 { _ = try await geo.call(2, API.friendsLocations, GeoV1.FriendsLocationsRequest()) }
                _ = try await geo.call(2, API.navigate, GeoV1.NavigateRequest(userId: 1))
                _ = try await geo.call(1, API.friendsLocations, GeoV1.FriendsLocationsRequest()) // 1 sees 2: not in 1's audit
                let mine = try await geo.call(1, API.listAudit, GeoV1.ListAuditRequest())
                let by = Dictionary(grouping: mine.entries) { "\($0.viewerId) \($0.kind)" }.mapValues { $0.reduce(0) { $0 + $1.count } }
                #expect(by == ["2 friendsLocations": 3, "2 navigate": 1, "2 live": 1, "3 live": 1], "\(by)")
                #expect(mine.retentionDays == 30)
                await expectError(.invalidArgument) { _ = try await geo.call(1, API.listAudit, GeoV1.ListAuditRequest(limit: 5_001)) }
                await expectError(.unauthenticated) { _ = try await geo.call(0, API.listAudit, GeoV1.ListAuditRequest()) }
                #expect(mine.entries.allSatisfy { $0.hourStartMs % 3_600_000 == 0 && $0.hourStartMs <= geo.clock.now })
                #expect(Set(try await geo.call(2, API.listAudit, GeoV1.ListAuditRequest()).entries.map(\.viewerId)) == [1])

                // The next hour is its own row; the retention drops the old ones.
                geo.clock.advance(3_600_000)
                _ = try await geo.call(2, API.friendsLocations, GeoV1.FriendsLocationsRequest())
                #expect(try await geo.call(1, API.listAudit, GeoV1.ListAuditRequest()).entries.count == 5)
                geo.clock.advance(31 * 86_400_000)
                #expect(try await geo.service.pruneAudit() == 7, "every row is past the 30 days")

                _ = try await geo.call(2, API.friendsLocations, GeoV1.FriendsLocationsRequest())
                _ = try await geo.call(0, API.eraseUser, GeoV1.EraseUserRequest(userId: 2))
                #expect(try await geo.call(1, API.listAudit, GeoV1.ListAuditRequest()).entries.isEmpty, "the deleted viewer's reads go too")
            }
        }

        /// A live location counts as seen only when it is sent: to a viewer whose topic someone
        /// listens to (a gateway or the edge subscribed it for their live connection). Nobody
        /// connected for a friend: no event is published to them and their audit row is not made.
        @Test("a live event counts as seen only by viewers someone is connected to hear", arguments: Engine.allCases)
        func liveOnlyWhenHeard(engine: Engine) async throws {
            try await withGeo(engine: engine) { geo async throws in
                for friend: UInt64 in [2, 3] { geo.befriend(1, friend) }
                geo.recorder.hear(only: [ViewerTopic.of(2)]) // 2 has the app open; 3 does not
                _ = geo.recorder.take()
                _ = try await geo.locate(1, 33.78, -118.11)
                let sent = geo.recorder.take().filter { $0.method == "geo.Location" }.map(\.topic)
                #expect(sent == [ViewerTopic.of(2)], "\(sent)")
                let mine = try await geo.call(1, API.listAudit, GeoV1.ListAuditRequest())
                #expect(mine.entries.map { "\($0.viewerId) \($0.kind)" } == ["2 live"])

                geo.recorder.hear(only: [])
                _ = try await geo.locate(1, 33.781, -118.11)
                #expect(geo.recorder.take().filter { $0.method == "geo.Location" }.isEmpty, "nobody connected: nothing sent")
                let after = try await geo.call(1, API.listAudit, GeoV1.ListAuditRequest())
                #expect(after.entries.map { "\($0.viewerId) \($0.kind) \($0.count)" } == ["2 live 1"], "not counted again")
            }
        }
    }
}
