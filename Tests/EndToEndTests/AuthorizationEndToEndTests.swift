import Foundation
import FriensoClient
import FriensoProto
import FriensoTesting
import GRDB
import Logging
import Testing
import Wire

/// Who may do what, through the real gateway: every contract method without a valid session,
/// and what each relation to a user may do with that user's things.
@Suite("end to end: authorization matrix", .serialized, .timeLimit(.minutes(4)))
struct AuthorizationEndToEndTests {
    /// A cell's outcome: "OK", "OK+" / "OK-" (answered; the owner's thing is / is not in it), or the
    /// status code's name.
    static func outcome(_ call: () async throws(RPCError) -> Bool?) async -> String {
        do {
            switch try await call() {
            case nil: return "OK"
            case true?: return "OK+"
            case false?: return "OK-"
            }
        } catch {
            return error.code.name
        }
    }

    @Test func everyRelationToAnOwner_andEveryMethodWithoutAValidSession() async throws {
        let procs = try ProcessHarness()
        defer { procs.shutdown() }
        let stack = try await LaunchedStack(procs)
        defer { stack.shutdown() }
        try await stack.showingLogsOnFailure {
            // ana owns the things; ben is her friend, cyd her friend in her core circle, dan a
            // stranger, eve blocked by her. All stand within a few metres of each other.
            let ana = try await makeActor(stack, "ana", number: 1)
            let ben = try await makeActor(stack, "ben", number: 2)
            let cyd = try await makeActor(stack, "cyd", number: 3)
            let dan = try await makeActor(stack, "dan", number: 4)
            let eve = try await makeActor(stack, "eve", number: 5)
            try await befriend(ana, ben)
            try await befriend(ana, cyd)
            try await addToCircle(ana, cyd)
            try await befriend(ana, eve)
            _ = try await ana.client.call(SocialV1.SocialService.block, SocialV1.BlockRequest(userId: eve.id), mutation: true)
            for (i, actor) in [ana, ben, cyd, dan, eve].enumerated() {
                _ = try await actor.client.call(SocialV1.SocialService.setFindable, SocialV1.SetFindableRequest(findable: true), mutation: true)
                _ = try await actor.client.call(GeoV1.GeoService.updateLocation, GeoV1.UpdateLocationRequest(
                    latitude: 33.7800 + Double(i) * 1e-5, longitude: -118.1100, accuracyM: 5, deviceTimeMs: Int64(Date().timeIntervalSince1970 * 1000)))
            }
            let picture = try await ana.client.uploadPhoto(Fixture.png(width: 32, height: 32), purpose: .profile).item?.mediaId ?? ""
            _ = try await ana.client.call(GeoV1.GeoService.checkIn, GeoV1.CheckInRequest(placeName: "Matrix Cafe"), mutation: true)
            let request = try await ana.client.call(SocialV1.SocialService.sendFriendRequest, SocialV1.SendFriendRequestRequest(userId: dan.id),
                                                    mutation: true).request?.requestId ?? 0
            let alert = try await ana.client.call(AlertsV1.AlertsService.raiseHelpNow, AlertsV1.RaiseHelpNowRequest(message: "matrix"),
                                                  mutation: true).alert?.alertId ?? 0
            try await eventually("geo knows the circle member may see ana (helpNow grant)", timeout: .seconds(20)) {
                try await cyd.client.call(GeoV1.GeoService.navigate, GeoV1.NavigateRequest(userId: ana.id)).distanceM >= 0
            }

            // Reads first, then the owner-only writes (others try first; the owner's own try is last).
            typealias Cell = @Sendable (Actor) async throws(RPCError) -> Bool?
            let rows: [(String, Cell)] = [
                ("accounts.GetProfile(ana)", { a throws(RPCError) in
                    _ = try await a.client.call(AccountsV1.AccountsService.getProfile, AccountsV1.GetProfileRequest(userId: ana.id)); return nil }),
                ("geo.FriendsLocations has ana", { a throws(RPCError) in
                    try await a.client.call(GeoV1.GeoService.friendsLocations, GeoV1.FriendsLocationsRequest()).friends.contains { $0.userId == ana.id } }),
                ("geo.Navigate(ana)", { a throws(RPCError) in
                    _ = try await a.client.call(GeoV1.GeoService.navigate, GeoV1.NavigateRequest(userId: ana.id)); return nil }),
                ("geo.Nearby has ana", { a throws(RPCError) in
                    try await a.client.call(GeoV1.GeoService.nearby, GeoV1.NearbyRequest()).users.contains { $0.userId == ana.id } }),
                ("geo.ListCheckIns has ana's", { a throws(RPCError) in
                    try await a.client.call(GeoV1.GeoService.listCheckIns, GeoV1.ListCheckInsRequest()).checkIns.contains { $0.userId == ana.id } }),
                ("social.Poke(ana)", { a throws(RPCError) in
                    _ = try await a.client.call(SocialV1.SocialService.poke, SocialV1.PokeRequest(userId: ana.id), mutation: true); return nil }),
                ("media.GetPhoto(ana's picture)", { a throws(RPCError) in
                    _ = try await a.client.call(MediaV1.MediaService.getPhoto, MediaV1.GetPhotoRequest(mediaId: picture)); return nil }),
                ("media.ListPhotos(profile of ana)", { a throws(RPCError) in
                    try await a.client.call(MediaV1.MediaService.listPhotos, MediaV1.ListPhotosRequest(profileOf: ana.id)).items.contains { $0.mediaId == picture } }),
                ("alerts.GetHelpNow has ana's", { a throws(RPCError) in
                    let r = try await a.client.call(AlertsV1.AlertsService.getHelpNow, AlertsV1.GetHelpNowRequest())
                    return r.mine?.alertId == alert || r.others.contains { $0.alertId == alert } }),
                ("alerts.ReportEmergencyCall(ana's alert)", { a throws(RPCError) in
                    _ = try await a.client.call(AlertsV1.AlertsService.reportEmergencyCall, AlertsV1.ReportEmergencyCallRequest(alertId: alert, dialed: true),
                                                mutation: true); return nil }),
                ("alerts.ResolveHelpNow(ana's alert)", { a throws(RPCError) in
                    _ = try await a.client.call(AlertsV1.AlertsService.resolveHelpNow, AlertsV1.ResolveHelpNowRequest(alertId: alert), mutation: true); return nil }),
                ("social.CancelFriendRequest(ana → dan)", { a throws(RPCError) in
                    _ = try await a.client.call(SocialV1.SocialService.cancelFriendRequest, SocialV1.CancelFriendRequestRequest(requestId: request),
                                                mutation: true); return nil }),
                ("media.DeletePhoto(ana's picture)", { a throws(RPCError) in
                    _ = try await a.client.call(MediaV1.MediaService.deletePhoto, MediaV1.DeletePhotoRequest(mediaId: picture), mutation: true); return nil }),
            ]
            //                                           owner      friend     circle     stranger   blocked
            let expected: [String: [String]] = [
                // Accounts follows the social graph: a blocked user finds no such user.
                "accounts.GetProfile(ana)":                ["OK", "OK", "OK", "OK", "NOT_FOUND"],
                "geo.FriendsLocations has ana":            ["OK-", "OK+", "OK+", "OK-", "OK-"],
                // Whose location you may not see answers as if it did not exist.
                "geo.Navigate(ana)":                       ["OK", "OK", "OK", "NOT_FOUND", "NOT_FOUND"],
                "geo.Nearby has ana":                      ["OK-", "OK+", "OK+", "OK+", "OK-"],
                // ana is findable, so people nearby see her check-in; never across a block.
                "geo.ListCheckIns has ana's":              ["OK+", "OK+", "OK+", "OK+", "OK-"],
                "social.Poke(ana)":                        ["FAILED_PRECONDITION", "OK", "OK", "FAILED_PRECONDITION", "FAILED_PRECONDITION"],
                "media.GetPhoto(ana's picture)":           ["OK", "OK", "OK", "NOT_FOUND", "NOT_FOUND"],
                "media.ListPhotos(profile of ana)":        ["OK+", "OK+", "OK+", "OK-", "OK-"],
                "alerts.GetHelpNow has ana's":             ["OK+", "OK-", "OK+", "OK-", "OK-"],
                "alerts.ReportEmergencyCall(ana's alert)": ["OK", "PERMISSION_DENIED", "PERMISSION_DENIED", "PERMISSION_DENIED", "PERMISSION_DENIED"],
                "alerts.ResolveHelpNow(ana's alert)":      ["OK", "PERMISSION_DENIED", "PERMISSION_DENIED", "PERMISSION_DENIED", "PERMISSION_DENIED"],
                "social.CancelFriendRequest(ana → dan)":   ["OK", "PERMISSION_DENIED", "PERMISSION_DENIED", "PERMISSION_DENIED", "PERMISSION_DENIED"],
                "media.DeletePhoto(ana's picture)":        ["OK", "NOT_FOUND", "NOT_FOUND", "NOT_FOUND", "NOT_FOUND"],
            ]
            var actual: [String: [String]] = [:]
            for (name, cell) in rows {
                var outcomes: [String] = []
                for actor in [ben, cyd, dan, eve] { outcomes.append(await Self.outcome { () async throws(RPCError) -> Bool? in try await cell(actor) }) }
                outcomes.insert(await Self.outcome { () async throws(RPCError) -> Bool? in try await cell(ana) }, at: 0)
                actual[name] = outcomes
            }
            let table = rows.map { name, _ in "\(name): \(actual[name] ?? [])" }.joined(separator: "\n")
            for (name, _) in rows {
                #expect(actual[name] == expected[name], "\(name): expected \(expected[name] ?? []), got \(actual[name] ?? [])\nwhole matrix (owner, friend, circle, stranger, blocked):\n\(table)")
            }
            try await Self.withoutAValidSession(stack, ana: ana)
        }
    }

    /// Every method of every contract, called through the gateway with no session, an expired
    /// one and a logged-out one: internal methods are refused outright, the others need a session
    /// unless they are public, and nothing answers INTERNAL.
    static func withoutAValidSession(_ stack: LaunchedStack, ana: Actor) async throws {
        let old = try await makeActor(stack, "old", number: 6)
        let gone = try await makeActor(stack, "gone", number: 7)
        _ = try await gone.client.call(AccountsV1.AccountsService.logout, AccountsV1.LogoutRequest())
        // Expire old's session where accounts keeps it (no call has used it since the login).
        var configuration = Configuration()
        configuration.busyMode = .timeout(5)
        try await DatabaseQueue(path: "\(stack.data)/accounts/accounts.sqlite", configuration: configuration).write { db in
            try db.execute(sql: "UPDATE sessions SET expires_at_ms = 1 WHERE user_id = ?", arguments: [old.id])
        }
        var options = ClientOptions()
        options.defaultDeadline = .seconds(5)
        let wire = WireClient(endpoint: stack.gateway, options: options, logger: Logger(label: "matrix"))
        defer { Task { await wire.close() } }
        // Public methods that answer an empty request: reads open to anyone.
        let openReads: Set<String> = ["alerts.ListResources"]
        // Public for the operator (with the operator key); a user resolving needs a session.
        let sessionOrOperatorKey: Set<String> = ["alerts.ResolveHelpNow"]
        var wrong: [String] = []
        for method in ProtoIndex.methods {
            for (principal, token) in [("no session", ""), ("expired", old.client.token), ("logged out", gone.client.token)] {
                let reply = await wire.send(Envelope(method: method.fullName, sessionToken: token, payload: []))
                let code = reply.status
                let fine: Bool
                switch method.access {
                case .internal: fine = code == .permissionDenied
                case .authenticated: fine = code == .unauthenticated
                case .public:
                    fine = code != .internal && (code != .unauthenticated || sessionOrOperatorKey.contains(method.fullName))
                        && (code != .ok || openReads.contains(method.fullName))
                }
                if !fine { wrong.append("\(method.fullName) (\(method.access)) as \(principal): \(code.name)") }
            }
        }
        #expect(wrong.isEmpty, "\(wrong.joined(separator: "\n"))")
        #expect(ProtoIndex.methods.count > 70, "the contracts' methods are all here: \(ProtoIndex.methods.count)")
    }
}
