@testable import Accounts
import FriensoProto
import FriensoTesting
import Testing
import Wire

@Suite("accounts: a person's export", .timeLimit(.minutes(2)))
struct ExportTests {
    /// The identities one linked come out in the order they were linked; linked within one
    /// millisecond (the test clock stands still until told), by provider (kept in lower case)
    /// and id: alike on both engines.
    @Test(arguments: Engine.allCases) func linkedIdentities_inTheOrderLinked_tiesByProviderAndId(engine: Engine) async throws {
        try await withAccounts(engine) { h in
            try await h.register("exporter", email: "exporter@example.org", phone: "+15625550141")
            let caller = try await h.caller(try await h.login("exporter"))
            for (provider, id) in [("Campus", "900-2"), ("Campus", "100-9"), ("Alumni", "77")] {
                _ = try await h.client.call(API.linkExternalId, AccountsV1.LinkExternalIdRequest(
                    externalId: AccountsV1.ExternalId(provider: provider, externalId: id)), options: caller)
            }
            h.clock.advance(seconds: 1)
            _ = try await h.client.call(API.linkExternalId, AccountsV1.LinkExternalIdRequest(
                externalId: AccountsV1.ExternalId(provider: "Aardvark", externalId: "1")), options: caller)
            let export = try await h.client.call(API.exportMyData, AccountsV1.ExportMyDataRequest(), options: caller)
            #expect(export.linked.map { "\($0.provider) \($0.externalId)" } == ["alumni 77", "campus 100-9", "campus 900-2", "aardvark 1"])
        }
    }
}
