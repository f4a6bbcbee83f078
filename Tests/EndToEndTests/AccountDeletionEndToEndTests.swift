import Foundation
import FriensoClient
import FriensoProto
import FriensoTesting
import GRDB
import ServiceKit
import Testing
import Wire
import ZIPFoundation

/// Deleting accounts on the launched deployment while each service in turn is killed with
/// SIGKILL: afterwards no database file (WAL and shared memory included) and no photo folder
/// holds anything of the deleted people, and the person who stayed keeps everything of theirs.
@Suite("end to end: deleting an account erases the person everywhere", .serialized, .timeLimit(.minutes(6)))
struct AccountDeletionEndToEndTests {
    /// What a leaver put into the deployment, to look for afterwards.
    struct Leaver: Sendable {
        let actor: Actor
        let number: Int
        let phone: String
        let token: String
        let latitude: Double
        let longitude: Double
        let photo: [UInt8]

        var needles: [Residue.Needle] {
            [.text(actor.name), .text(actor.name.capitalized), .text("\(actor.name)@faults.example"), .text(phone),
             .text(String(phone.dropFirst(2))), .text(token)]
                + Residue.Needle.coordinate(latitude) + Residue.Needle.coordinate(longitude)
                + [.bytes("\(actor.name)'s photo", Array(photo[400..<464]))]
        }
    }

    @Test func deletions_withEachServiceKilledInTurn_leaveNoTraceInAnyDataFile() async throws {
        let procs = try ProcessHarness()
        defer { procs.shutdown() }
        let stack = try await LaunchedStack(procs) { config in
            var accounts = config.accounts ?? FriensoConfig.AccountsSection()
            accounts.erasureRecheckSeconds = 2
            config.accounts = accounts
            var social = config.social ?? FriensoConfig.SocialSection()
            social.circleLimit = 10
            config.social = social
        }
        defer { stack.shutdown() }
        try await stack.showingLogsOnFailure {
            let keeper = try await makeActor(stack, "keeper", number: 900)
            _ = try await keeper.client.call(GeoV1.GeoService.updateLocation, GeoV1.UpdateLocationRequest(
                latitude: 34.05, longitude: -118.25, accuracyM: 5, deviceTimeMs: WallClock.milliseconds()), mutation: true)
            _ = try await keeper.client.call(AlertsV1.AlertsService.registerDevice, AlertsV1.RegisterDeviceRequest(
                token: "keeper-device-0001", platform: .android, appVersion: "e2e"), mutation: true)

            var leavers: [Leaver] = []
            for i in 0..<5 {
                let actor = try await makeActor(stack, "leaver\(i)", number: 200 + i)
                let leaver = Leaver(actor: actor, number: 200 + i, phone: "+1562555\(String(format: "%04d", 1_200 + i))",
                                    token: "push-token-of-leaver\(i)-7f3a", latitude: 33.781_234 + Double(i) * 0.000_117,
                                    longitude: -118.114_321 - Double(i) * 0.000_131,
                                    photo: Fixture.jpeg(width: 320, height: 240, gps: false, filler: 4_000, seed: UInt8(40 + i)))
                try await populate(leaver, keeper: keeper)
                leavers.append(leaver)
            }
            // The keeper's helpNow reaches every leaver (push and SMS to their phones).
            _ = try await keeper.client.call(AlertsV1.AlertsService.raiseHelpNow, AlertsV1.RaiseHelpNowRequest(message: "keeper needs help"),
                                             mutation: true)
            try await eventually("every delivery of the data set went out", timeout: .seconds(30)) {
                let pending = try? stack.database("alerts").read { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM outbox WHERE status = 1") }
                return pending == 0
            }
            // Before: every leaver is in the data files (the search finds what it looks for).
            let before = Residue.find(leavers[0].needles, under: stack.data)
            for label in ["\"leaver0\"", "\"+15625551200\"", "\"push-token-of-leaver0-7f3a\"", "leaver0's photo"] {
                #expect(before.contains { $0.hasSuffix(label) }, "\(label) not found before the deletion: \(before)")
            }
            #expect(before.contains { $0.contains("as a REAL") })

            // One deletion through the CLI, the rest through the gateway, each while a service is
            // killed (accounts itself first).
            let cli = stack.cli("leaver0")
            let login = try await cli.run(["login", "leaver0", "--password-stdin"], stdin: "password leaver0 1\n")
            #expect(login.status == 0, "\(login.output)")
            try await checkExport(cli, leavers[0], keeper: keeper, dir: procs.workDirectory)
            let refused = try await cli.run(["account", "delete", "--password-stdin"], stdin: "password leaver0 1\n")
            #expect(refused.status == 64 && refused.output.contains("--yes"), "\(refused.output)")
            let deleted = try await cli.run(["account", "delete", "--yes", "--password-stdin"], stdin: "password leaver0 1\n")
            #expect(deleted.status == 0 && deleted.output.contains("deleted"), "\(deleted.output)")
            let services = ["accounts", "social", "geo", "alerts", "media"]
            for (i, leaver) in leavers.dropFirst().enumerated() {
                async let deletion: Void = delete(leaver)
                try await stack.kill9AndAwaitRestart(services[i])
                try await deletion
            }
            try await stack.kill9AndAwaitRestart(services[4])

            // Every step finishes (accounts resumes them after its own restart), and then no file
            // of the deployment's data holds anything of any leaver.
            try await eventually("every erasure finished", timeout: .seconds(120)) {
                (try? stack.database("accounts").read { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM erasures") }) == 0
            }
            let residue = leavers.flatMap { Residue.find($0.needles, under: stack.data) }
            #expect(residue.isEmpty, "traces of deleted accounts: \(residue)")

            // Their logins are gone; the keeper keeps their own data and sees none of them.
            await expectError(.unauthenticated) { _ = try await stack.client().login("leaver1", password: "password leaver1 1") }
            let friends = try await keeper.client.call(SocialV1.SocialService.listFriends, SocialV1.ListFriendsRequest())
            #expect(friends.friends.isEmpty)
            let locations = try await keeper.client.call(GeoV1.GeoService.friendsLocations, GeoV1.FriendsLocationsRequest())
            #expect(locations.friends.isEmpty && locations.you?.latitude == 34.05)
            let devices = try await keeper.client.call(AlertsV1.AlertsService.listDevices, AlertsV1.ListDevicesRequest())
            #expect(devices.devices.count == 1)
            #expect(!Residue.find([.text("keeper-device-0001"), .text("keeper needs help")], under: stack.data).isEmpty)
            // The name is free again.
            _ = try await makeActor(stack, "leaver1", number: 201)
        }
    }

    /// `frienso account export`: the archive holds every service's part (checked by what the
    /// leaver put in) and the photo's bytes as uploaded.
    func checkExport(_ cli: CLI, _ leaver: Leaver, keeper: Actor, dir: String) async throws {
        let path = "\(dir)/leaver0-export.zip"
        let exported = try await cli.run(["account", "export", "-o", path])
        #expect(exported.status == 0 && exported.output.contains("1 photos, 2 history entries"), "\(exported.output)")
        let again = try await cli.run(["account", "export", "-o", path])
        #expect(again.status == 64 && again.output.contains("--force"), "an existing file is not replaced: \(again.output)")
        let archive = try Archive(url: URL(fileURLWithPath: path), accessMode: .read)
        func file(_ name: String) throws -> String {
            let entry = try #require(archive[name], "\(name) is missing from the export")
            var data = Data()
            _ = try archive.extract(entry) { data.append($0) }
            return String(decoding: data, as: UTF8.self)
        }
        let accounts = try file("accounts.json"), social = try file("social.json"), geo = try file("geo.json"), alerts = try file("alerts.json")
        #expect(accounts.contains(leaver.phone) && accounts.contains("leaver0@faults.example") && accounts.contains("\"current\": true"), "\(accounts)")
        #expect(!accounts.contains("fs1_"), "no session token in an export")
        #expect(social.contains("\"username\": \"keeper\"") && social.contains("\"findable\": true") && social.contains("pokesSent"), "\(social)")
        #expect(geo.contains("\(leaver.latitude)") && geo.contains("\"history\"") && geo.contains("Library"), "\(geo)")
        #expect(alerts.contains(leaver.token) && alerts.contains("leaver0 needs help") && alerts.contains("keeper needs help"), "\(alerts)")
        let media = try file("media.json")
        let hexID: Substring? = media.split(separator: "\"").first { $0.count == 32 && $0.allSatisfy(\.isHexDigit) }
        let mediaID = try #require(hexID.map { String($0) })
        let entry = try #require(archive["photos/\(mediaID).jpg"])
        var photo = Data()
        _ = try archive.extract(entry) { photo.append($0) }
        #expect(Array(photo) == leaver.photo, "the photo as uploaded (it had no GPS tags to remove)")
        #expect(try file("README.txt").contains("Everything Frienso stores about leaver0"))
    }

    /// Friends with the keeper, in each other's core circle, a device, two fixes, a check-in with
    /// a photo, findable, a poke, and a helpNow of their own raised and resolved.
    func populate(_ leaver: Leaver, keeper: Actor) async throws {
        let me = leaver.actor
        try await befriend(me, keeper)
        try await addToCircle(me, keeper)
        try await addToCircle(keeper, me)
        _ = try await me.client.call(AlertsV1.AlertsService.registerDevice, AlertsV1.RegisterDeviceRequest(
            token: leaver.token, platform: .ios, appVersion: "e2e"), mutation: true)
        let now = WallClock.milliseconds()
        for (k, delta) in [0.0, 0.000_01].enumerated() {
            _ = try await me.client.call(GeoV1.GeoService.updateLocation, GeoV1.UpdateLocationRequest(
                latitude: leaver.latitude + delta, longitude: leaver.longitude, accuracyM: 5, deviceTimeMs: now + Int64(k)), mutation: true)
        }
        let photo = try await me.client.uploadPhoto(leaver.photo, purpose: .checkIn)
        _ = try await me.client.call(GeoV1.GeoService.checkIn, GeoV1.CheckInRequest(
            placeName: "Library", hasPoint: true, latitude: leaver.latitude, longitude: leaver.longitude,
            mediaId: photo.item?.mediaId ?? ""), mutation: true)
        _ = try await me.client.call(SocialV1.SocialService.setFindable, SocialV1.SetFindableRequest(findable: true), mutation: true)
        _ = try await me.client.call(SocialV1.SocialService.poke, SocialV1.PokeRequest(userId: keeper.id), mutation: true)
        let alert = try await me.client.call(AlertsV1.AlertsService.raiseHelpNow, AlertsV1.RaiseHelpNowRequest(message: "\(me.name) needs help"),
                                             mutation: true)
        _ = try await me.client.call(AlertsV1.AlertsService.resolveHelpNow, AlertsV1.ResolveHelpNowRequest(alertId: alert.alert?.alertId ?? 0),
                                     mutation: true)
    }

    /// DeleteAccount, resent with the same key until it is answered. A resend after a lost reply
    /// finds the session gone (UNAUTHENTICATED): the deletion was applied, and logging in shows it.
    func delete(_ leaver: Leaver) async throws {
        let key = UUID().uuidString
        let until = ContinuousClock.now.advanced(by: .seconds(90))
        var attempts = 0
        while true {
            attempts += 1
            let failure: RPCError
            do {
                _ = try await leaver.actor.client.call(AccountsV1.AccountsService.deleteAccount,
                                                       AccountsV1.DeleteAccountRequest(password: "password \(leaver.actor.name) 1"),
                                                       idempotencyKey: key)
                return
            } catch {
                failure = error
            }
            if failure.code == .unauthenticated && attempts > 1 {
                let client = FriensoClient(gateway: leaver.actor.client.gateway, logger: .init(label: "check"))
                await expectError(.unauthenticated) { _ = try await client.login(leaver.actor.name, password: "password \(leaver.actor.name) 1") }
                await client.close()
                return
            }
            guard [.unavailable, .deadlineExceeded].contains(failure.code), ContinuousClock.now < until else { throw failure }
            try await Task.sleep(for: .milliseconds(100))
        }
    }
}
