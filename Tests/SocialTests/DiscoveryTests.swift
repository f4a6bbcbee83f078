import Foundation
import FriensoProto
import FriensoTesting
import ServiceKit
import Identity
import Testing
import Wire

@Suite("social: recommendations", .serialized, .timeLimit(.minutes(2)))
struct RecommendationTests {
    @Test(arguments: Engine.allCases) func contacts_matchByPhoneEmailHashAndLinkedAccount_minusMeFriendsAndBlocked(engine: Engine) async throws {
        try await withSocial(engine) { stack in
            let (me, _) = try await stack.user("rc_me", phone: "+15625550100")
            _ = try await stack.user("rc_phone", phone: "+15625550101")
            _ = try await stack.user("rc_email", phone: "+15625550102")
            _ = try await stack.user("rc_hash", phone: "+15625550103")
            let (linked, _) = try await stack.user("rc_linked", phone: "+15625550104")
            let (friend, _) = try await stack.user("rc_friend", phone: "+15625550105")
            _ = try await stack.user("rc_blocked", phone: "+15625550106")
            _ = try await stack.user("rc_pending", phone: "+15625550107")
            _ = try await stack.user("rc_stranger", phone: "+15625550108")
            _ = try await linked.call(AccountsV1.AccountsService.linkExternalId, AccountsV1.LinkExternalIdRequest(
                externalId: AccountsV1.ExternalId(provider: "Campus", externalId: "014-555")))
            _ = try await me.call(API.sendFriendRequest, SocialV1.SendFriendRequestRequest(username: "rc_friend"))
            _ = try await friend.call(API.sendFriendRequest, SocialV1.SendFriendRequestRequest(username: "rc_me"))
            _ = try await me.call(API.block, SocialV1.BlockRequest(username: "rc_blocked"))
            _ = try await me.call(API.sendFriendRequest, SocialV1.SendFriendRequestRequest(username: "rc_pending"))

            let reply = try await me.call(API.recommendFriends, SocialV1.RecommendFriendsRequest(
                phones: ["(562) 555-0100", "+1 562 555 0101", "+1-562-555-0105", "+15625550106", "+15625550107", "Home", "+15629999999"],
                emails: ["  RC_Email@Example.org ", "rc_me@example.org", "not an email"],
                contactHashes: [ContactIdentifier.hash("+15625550103")],
                externalIds: [SocialV1.ExternalId(provider: "campus", externalId: " 014-555 ")]))
            #expect(reply.recommendations.map { $0.user?.username ?? "" } == ["rc_email", "rc_hash", "rc_linked", "rc_pending", "rc_phone"])
            let by = Dictionary(uniqueKeysWithValues: reply.recommendations.map { ($0.user?.username ?? "", $0) })
            #expect(by["rc_phone"]?.byPhone == true && by["rc_phone"]?.byEmail == false)
            #expect(by["rc_email"]?.byEmail == true)
            #expect(by["rc_hash"]?.byPhone == true, "a hash of a phone number matches the phone")
            #expect(by["rc_linked"]?.byExternalId == true)
            #expect(by["rc_pending"]?.requestPending == true)
            #expect(reply.unusable == 3, "'(562) 555-0100' (no country code), 'Home' and 'not an email'")
        }
    }

    @Test(arguments: Engine.allCases) func malformedContacts_areInvalidArgument(engine: Engine) async throws {
        try await withSocial(engine) { stack in
            let (me, _) = try await stack.user("rcbad_me")
            for bad in [
                SocialV1.RecommendFriendsRequest(),
                SocialV1.RecommendFriendsRequest(contactHashes: [[UInt8](repeating: 1, count: 31)]),
                SocialV1.RecommendFriendsRequest(contactHashes: [[]]),
                SocialV1.RecommendFriendsRequest(externalIds: [SocialV1.ExternalId(provider: "bad provider!", externalId: "x")]),
                SocialV1.RecommendFriendsRequest(externalIds: [SocialV1.ExternalId(provider: "ok", externalId: "")]),
                SocialV1.RecommendFriendsRequest(phones: Array(repeating: "+15625550100", count: 5_001)),
            ] {
                await expectError(.invalidArgument) { _ = try await me.call(API.recommendFriends, bad) }
            }
        }
    }

    @Test(arguments: Engine.allCases) func linkedAccounts_belongToOneUser_andUnlinkForgetsThem(engine: Engine) async throws {
        try await withSocial(engine) { stack in
            let (ann, _) = try await stack.user("lk_ann")
            let (bob, _) = try await stack.user("lk_bob")
            let accounts = AccountsV1.AccountsService.self
            let id = AccountsV1.ExternalId(provider: "insta", externalId: "ann.k")
            let linked = try await ann.call(accounts.linkExternalId, AccountsV1.LinkExternalIdRequest(externalId: id))
            #expect(linked.linked.map(\.externalId) == ["ann.k"])
            _ = try await ann.call(accounts.linkExternalId, AccountsV1.LinkExternalIdRequest(externalId: id)) // again: fine
            await expectError(.alreadyExists) { _ = try await bob.call(accounts.linkExternalId, AccountsV1.LinkExternalIdRequest(externalId: id)) }
            await expectError(.notFound) { _ = try await bob.call(accounts.unlinkExternalId, AccountsV1.UnlinkExternalIdRequest(externalId: id)) }
            let query = SocialV1.RecommendFriendsRequest(externalIds: [SocialV1.ExternalId(provider: "insta", externalId: "ann.k")])
            #expect(try await bob.call(API.recommendFriends, query).recommendations.map { $0.user?.username ?? "" } == ["lk_ann"])
            #expect(try await ann.call(accounts.unlinkExternalId, AccountsV1.UnlinkExternalIdRequest(externalId: id)).linked.isEmpty)
            #expect(try await bob.call(API.recommendFriends, query).recommendations.isEmpty)
            await expectError(.invalidArgument) { _ = try await ann.call(accounts.linkExternalId, AccountsV1.LinkExternalIdRequest()) }
        }
    }

    @Test(arguments: Engine.allCases) func changedEmail_matchesTheNewAddressOnly(engine: Engine) async throws {
        try await withSocial(engine) { stack in
            let (ann, _) = try await stack.user("ce_ann")
            let (bob, _) = try await stack.user("ce_bob")
            _ = try await ann.call(AccountsV1.AccountsService.changeEmail,
                                   AccountsV1.ChangeEmailRequest(newEmail: "ann.new@example.org", password: "password ce_ann"))
            let old = try await bob.call(API.recommendFriends, SocialV1.RecommendFriendsRequest(emails: ["ce_ann@example.org"]))
            let new = try await bob.call(API.recommendFriends, SocialV1.RecommendFriendsRequest(emails: ["ann.new@example.org"]))
            #expect(old.recommendations.isEmpty)
            #expect(new.recommendations.map { $0.user?.username ?? "" } == ["ce_ann"])
        }
    }
}

@Suite("social: contact exchange", .serialized, .timeLimit(.minutes(2)))
struct ExchangeTests {
    @Test(arguments: Engine.allCases) func exchange_isRecordedOnce_whateverTheOrder(engine: Engine) async throws {
        try await withSocial(engine) { stack in
            let (ann, annID) = try await stack.user("ex_ann")
            let (bob, bobID) = try await stack.user("ex_bob")
            let (cal, _) = try await stack.user("ex_cal")
            for user in [ann, bob, cal] { _ = try await user.call(API.setFindable, SocialV1.SetFindableRequest(findable: true)) }

            // Ann first, then Bob.
            let first = try await ann.call(API.addExchange, SocialV1.AddExchangeRequest(
                username: "ex_bob", hasLocation: true, latitude: 33.7838, longitude: -118.1141, placeLabel: "Library steps"))
            #expect(first.state == .waiting && first.exchange == nil)
            let second = try await bob.call(API.addExchange, SocialV1.AddExchangeRequest(userId: annID))
            #expect(second.state == .recorded)
            let exchange = try #require(second.exchange)
            #expect(exchange.user?.userId == annID)
            #expect(exchange.hasLocation && exchange.latitude == 33.7838 && exchange.placeLabel == "Library steps",
                    "the second add had no location: the first one's is kept")
            // Adding again returns the same exchange: one per pair.
            let again = try await ann.call(API.addExchange, SocialV1.AddExchangeRequest(username: "ex_bob"))
            #expect(again.state == .recorded && again.exchange?.exchangeId == exchange.exchangeId && again.exchange?.user?.userId == bobID)

            // Cal first this time (the other order), then Ann, with her own location.
            #expect(try await cal.call(API.addExchange, SocialV1.AddExchangeRequest(username: "ex_ann")).state == .waiting)
            let third = try await ann.call(API.addExchange, SocialV1.AddExchangeRequest(
                username: "ex_cal", hasLocation: true, latitude: 33.78, longitude: -118.11, placeLabel: "USU"))
            #expect(third.state == .recorded && third.exchange?.placeLabel == "USU")

            let history = try await ann.call(API.listExchanges, SocialV1.ListExchangesRequest())
            #expect(history.exchanges.map { $0.user?.username ?? "" } == ["ex_cal", "ex_bob"], "newest first")
            let page = try await ann.call(API.listExchanges, SocialV1.ListExchangesRequest(pageSize: 1))
            #expect(page.exchanges.count == 1 && !page.nextPageToken.isEmpty)
            let rest = try await ann.call(API.listExchanges, SocialV1.ListExchangesRequest(pageSize: 1, pageToken: page.nextPageToken))
            #expect(rest.exchanges.map { $0.user?.username ?? "" } == ["ex_bob"])
            #expect(try await bob.call(API.listExchanges, SocialV1.ListExchangesRequest()).exchanges.map { $0.user?.username ?? "" } == ["ex_ann"])
        }
    }

    @Test(arguments: Engine.allCases) func exchange_withoutCoordinates_takesTheCallersLatestFixFromGeo(engine: Engine) async throws {
        // A stand-in for geo's internal LatestLocation: everyone is at the library steps.
        var router = MethodRouter()
        router.register(GeoV1.GeoService.latestLocation) { _, _ in
            GeoV1.LatestLocationResponse(found: true, fix: GeoV1.Fix(latitude: 33.7774, longitude: -118.1145), placeName: "University Library")
        }
        let geo = RouterClient(name: "geo", router: router, replyCache: nil, logger: CapturedLogs().logger("geo"))
        try await withSocial(engine, geo: geo) { stack in
            let (ann, _) = try await stack.user("exg_ann")
            let (bob, _) = try await stack.user("exg_bob")
            for user in [ann, bob] { _ = try await user.call(API.setFindable, SocialV1.SetFindableRequest(findable: true)) }
            _ = try await ann.call(API.addExchange, SocialV1.AddExchangeRequest(username: "exg_bob"))
            let done = try await bob.call(API.addExchange, SocialV1.AddExchangeRequest(username: "exg_ann"))
            #expect(done.exchange?.hasLocation == true && done.exchange?.latitude == 33.7774)
            #expect(done.exchange?.placeLabel == "University Library")
        }
    }

    @Test(arguments: Engine.allCases) func exchange_needsBothFindable_andNoBlock(engine: Engine) async throws {
        try await withSocial(engine) { stack in
            let (ann, _) = try await stack.user("exf_ann")
            let (bob, _) = try await stack.user("exf_bob")
            #expect(try await ann.call(API.getDiscoverySettings, SocialV1.GetDiscoverySettingsRequest()).settings?.findable == false, "off by default")
            await expectError(.failedPrecondition, containing: "findable") {
                _ = try await ann.call(API.addExchange, SocialV1.AddExchangeRequest(username: "exf_bob"))
            }
            _ = try await ann.call(API.setFindable, SocialV1.SetFindableRequest(findable: true))
            await expectError(.failedPrecondition, containing: "not findable") {
                _ = try await ann.call(API.addExchange, SocialV1.AddExchangeRequest(username: "exf_bob"))
            }
            _ = try await bob.call(API.setFindable, SocialV1.SetFindableRequest(findable: true))
            #expect(try await ann.call(API.addExchange, SocialV1.AddExchangeRequest(username: "exf_bob")).state == .waiting)
            // A block drops the waiting side and refuses new adds.
            _ = try await bob.call(API.block, SocialV1.BlockRequest(username: "exf_ann"))
            await expectError(.failedPrecondition) { _ = try await bob.call(API.addExchange, SocialV1.AddExchangeRequest(username: "exf_ann")) }
            _ = try await bob.call(API.unblock, SocialV1.UnblockRequest(username: "exf_ann"))
            #expect(try await bob.call(API.addExchange, SocialV1.AddExchangeRequest(username: "exf_ann")).state == .waiting,
                    "Ann's add before the block was dropped")
            await expectError(.failedPrecondition) { _ = try await ann.call(API.addExchange, SocialV1.AddExchangeRequest(username: "exf_ann")) }
        }
    }

    @Test(arguments: Engine.allCases) func exchange_badInputs(engine: Engine) async throws {
        try await withSocial(engine) { stack in
            let (ann, _) = try await stack.user("exb_ann")
            _ = try await ann.call(API.setFindable, SocialV1.SetFindableRequest(findable: true))
            for bad in [
                SocialV1.AddExchangeRequest(),
                SocialV1.AddExchangeRequest(username: "exb_ann", hasLocation: true, latitude: 91, longitude: 0),
                SocialV1.AddExchangeRequest(username: "exb_ann", hasLocation: true, latitude: 0, longitude: -180.5),
                SocialV1.AddExchangeRequest(username: "exb_ann", hasLocation: true, latitude: .nan, longitude: 0),
                SocialV1.AddExchangeRequest(username: "exb_ann", placeLabel: String(repeating: "x", count: 81)),
            ] {
                await expectError(.invalidArgument) { _ = try await ann.call(API.addExchange, bad) }
            }
            await expectError(.notFound) { _ = try await ann.call(API.addExchange, SocialV1.AddExchangeRequest(username: "nobody_here")) }
            for bad in [SocialV1.ListExchangesRequest(pageSize: 101), SocialV1.ListExchangesRequest(pageToken: "x:zz")] {
                await expectError(.invalidArgument) { _ = try await ann.call(API.listExchanges, bad) }
            }
        }
    }
}
