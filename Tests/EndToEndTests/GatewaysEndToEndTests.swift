import Foundation
import FriensoClient
import FriensoProto
import FriensoTesting
import Launcher
import Testing
import Wire

/// Gateways side by side (issue 21): a second `frienso-gateway` beside the launched one, on its
/// own port, with the same config and keyring. A session made through one works through the
/// other (sessions are accounts'), and a logout through one is refused at once through the other
/// (both follow accounts' session revocations), so clients can be spread over several gateways.
@Suite("end to end: gateways side by side", .serialized, .timeLimit(.minutes(3)))
struct GatewaysEndToEndTests {
    @Test func aSessionWorksThroughEitherGateway_andALogoutThroughOneEndsItOnBoth() async throws {
        let procs = try ProcessHarness()
        defer { procs.shutdown() }
        // Sessions cached for minutes: only accounts' revocation event can end one in time.
        let stack = try await LaunchedStack(procs) { config in config.gateway?.sessionCacheSeconds = 300 }
        defer { stack.shutdown() }
        try await stack.showingLogsOnFailure {
            let port = try DeadPort()
            let second = port.endpoint
            _ = consume port
            // Every peer named explicitly, as the launcher names them to its members.
            var environment = ["FRIENSO_KEYRING": stack.keyring]
            for (member, endpoint) in stack.endpoints where member != "gateway" { environment["FRIENSO_\(member.uppercased())_ENDPOINT"] = endpoint }
            for (member, endpoint) in stack.events { environment["FRIENSO_\(member.uppercased())_EVENTS"] = endpoint }
            _ = try procs.start("gateway-2", executable: "frienso-gateway", arguments: [
                "--config", "\(procs.workDirectory)/frienso.json", "--endpoint", second], environment: environment)
            let probe = FriensoClient(gateway: second, logger: CapturedLogs().logger("probe"))
            for service in ["gateway", "accounts", "social"] {
                try await eventually("\(service) answers through the second gateway", timeout: .seconds(30)) {
                    (try? await probe.ping(service, deadline: .seconds(2))) != nil
                }
            }
            await probe.close()

            let one = stack.client()
            _ = try await one.call(AccountsV1.AccountsService.register, AccountsV1.RegisterRequest(
                username: "g_ana", email: "g_ana@example.org", phone: "+15625559001", password: "a long password 1",
                firstName: "Ana", lastName: "G"), mutation: true)
            let login = try await one.login("g_ana", password: "a long password 1")
            let two = FriensoClient(gateway: second, token: login.sessionToken, logger: CapturedLogs().logger("two"))
            // The same session through both doors.
            #expect(try await one.call(AccountsV1.AccountsService.whoAmI, AccountsV1.WhoAmIRequest()).account?.profile?.username == "g_ana")
            #expect(try await two.call(AccountsV1.AccountsService.whoAmI, AccountsV1.WhoAmIRequest()).account?.profile?.username == "g_ana")
            // A change through one is read through the other.
            _ = try await two.call(SocialV1.SocialService.setFindable, SocialV1.SetFindableRequest(findable: true), mutation: true)
            #expect(try await one.call(SocialV1.SocialService.getDiscoverySettings, SocialV1.GetDiscoverySettingsRequest()).settings?.findable == true)

            // Logged out through the first: the second refuses the session too (its cache dropped
            // it on accounts' revocation event; bounded wait for the event to arrive).
            _ = try await one.call(AccountsV1.AccountsService.logout, AccountsV1.LogoutRequest(), mutation: true)
            // (Social trusts the caller the gateway stamps: only the gateway's session check stands
            // between an ended session and social.)
            try await eventually("the second gateway refuses the ended session", timeout: .seconds(10)) {
                do {
                    _ = try await two.call(SocialV1.SocialService.getDiscoverySettings, SocialV1.GetDiscoverySettingsRequest())
                    return false
                } catch {
                    return (error as? RPCError)?.code == .unauthenticated
                }
            }
            await one.close()
            await two.close()
        }
    }
}
