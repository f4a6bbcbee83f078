@testable import Accounts
import Foundation
import FriensoProto
import FriensoTesting
import GRDB
import Testing
import Wire

@Suite("accounts: forgotten passwords", .timeLimit(.minutes(2)))
struct PasswordResetTests {
    struct Setup {
        let service: AccountsService
        let harness: AccountsHarness
        let logs: CapturedLogs

        func request(_ login: String, from address: String = "10.0.0.7") async throws -> AccountsV1.RequestPasswordResetResponse {
            try await harness.client.call(API.requestPasswordReset, AccountsV1.RequestPasswordResetRequest(login: login),
                                          options: CallOptions(clientAddress: address))
        }

        func reset(_ login: String, code: String, to password: String = "a brand new one 7") async throws -> AccountsV1.ResetPasswordResponse {
            try await harness.client.call(API.resetPassword, AccountsV1.ResetPasswordRequest(login: login, code: code, newPassword: password))
        }

        /// The outbox's bodies and the stored code hashes, read from the engine itself.
        func storedResets() async throws -> (outbox: [String], hashes: [Data]) {
            if let sqlite = service.store as? SQLiteAccountsStore {
                return try await sqlite.database.read { db in
                    (try String.fetchAll(db, sql: "SELECT body FROM email_outbox"), try Data.fetchAll(db, sql: "SELECT code_hash FROM password_resets"))
                }
            }
            let store = harness.store!
            let outbox = try await store.psql("SELECT coalesce(string_agg(body, '|'), '') FROM email_outbox")
            let hashes = try await store.psql("SELECT encode(code_hash, 'hex') FROM password_resets").split(separator: "\n")
            return (outbox.components(separatedBy: "|"), hashes.map { hex in
                Data(stride(from: 0, to: hex.count, by: 2).map { i in
                    UInt8(hex[hex.index(hex.startIndex, offsetBy: i)..<hex.index(hex.startIndex, offsetBy: i + 2)], radix: 16)!
                })
            })
        }

        /// Delivers what is due, and returns the codes the recording provider sent to `address`.
        func codes(to address: String) async throws -> [String] {
            await service.deliverEmails(logger: logs.logger("worker"))
            let bodies = try await service.store.recordedEmailBodies(to: address)
            return bodies.compactMap { body in
                body.split(separator: "\n").first { $0.hasPrefix("Your code: ") }.map { String($0.dropFirst("Your code: ".count)) }
            }
        }
    }

    func withService(_ engine: Engine, _ body: (Setup) async throws -> Void) async throws {
        let clock = TestClock()
        let logs = CapturedLogs()
        try await withOpenStore(engine, config: testConfig(clock)) { store, service in
            let client = RouterClient(service, name: "accounts", logger: logs.logger("accounts"))
            try await body(Setup(service: service, harness: AccountsHarness(client: client, clock: clock, directory: store.directory, store: store,
                                                                            service: service), logs: logs))
        }
    }

    @Test("the same reply whether or not the account exists; only a real account gets an email, with a code that works once", arguments: Engine.allCases)
    func requestAndReset(engine: Engine) async throws {
        try await withService(engine) { s in
            try await s.harness.register("forgetful", email: "forgetful@example.org", phone: "+15625550300")
            let session = try await s.harness.login("forgetful")
            let known = try await s.request("forgetful")
            let unknown = try await s.request("nobody-here")
            #expect(known == unknown && known.expiresInMinutes == 30)
            let codes = try await s.codes(to: "forgetful@example.org")
            let code = try #require(codes.first)
            #expect(codes.count == 1 && ResetCode.normalize(code) != nil)
            // The outbox kept the email's body only until it was sent; the code is stored hashed.
            let (outbox, stored) = try await s.storedResets()
            #expect(outbox == [""])
            #expect(stored == [Data(ResetCode.hash(ResetCode.normalize(code)!))])
            #expect(!s.logs.contains(code), "a code is never logged")

            // Wrong code, unknown account: the same refusal. Then the code, typed loosely.
            await expectError(.permissionDenied, containing: "wrong or has expired") { _ = try await s.reset("forgetful", code: "0000-0000-0000") }
            await expectError(.permissionDenied, containing: "wrong or has expired") { _ = try await s.reset("nobody-here", code: code) }
            await expectError(.invalidArgument, containing: "new_password") { _ = try await s.reset("forgetful", code: code, to: "short") }
            let loose = " " + code.lowercased().replacingOccurrences(of: "-", with: " ") + " "
            let reply = try await s.reset("forgetful", code: loose)
            #expect(reply.revokedSessions == 1)
            await expectError(.unauthenticated) { _ = try await s.harness.client.call(API.validateSession, AccountsV1.ValidateSessionRequest(sessionToken: session)) }
            await expectError(.unauthenticated) { _ = try await s.harness.login("forgetful") }
            _ = try await s.harness.login("forgetful", password: "a brand new one 7")
            // Once only.
            await expectError(.permissionDenied) { _ = try await s.reset("forgetful", code: code, to: "yet another one 8") }
        }
    }

    @Test("a code expires after 30 minutes; five wrong codes void the account's codes", arguments: Engine.allCases)
    func expiryAndAttempts(engine: Engine) async throws {
        try await withService(engine) { s in
            try await s.harness.register("late", email: "late@example.org", phone: "+15625550301")
            _ = try await s.request("late")
            let first = try #require(try await s.codes(to: "late@example.org").first)
            s.harness.clock.advance(seconds: 31 * 60)
            await expectError(.permissionDenied) { _ = try await s.reset("late", code: first) }

            _ = try await s.request("late@example.org")
            let second = try #require(try await s.codes(to: "late@example.org").last)
            #expect(second != first)
            for guess in 0..<5 {
                await expectError(.permissionDenied) { _ = try await s.reset("late", code: "AAAA-AAAA-AAA\(guess)") }
            }
            await expectError(.permissionDenied, containing: "ask for a new one") { _ = try await s.reset("late", code: second) }
        }
    }

    @Test("three codes an account an hour (the reply does not change); ten requests an address an hour", arguments: Engine.allCases)
    func throttled(engine: Engine) async throws {
        try await withService(engine) { s in
            try await s.harness.register("popular", email: "popular@example.org", phone: "+15625550302")
            for i in 0..<5 { _ = try await s.request("popular", from: "10.1.0.\(i)") }
            #expect(try await s.codes(to: "popular@example.org").count == 3)
            for _ in 0..<10 { _ = try await s.request("someone-else", from: "203.0.113.5") }
            await expectError(.resourceExhausted, containing: "too many password reset requests") { _ = try await s.request("popular", from: "203.0.113.5") }
            s.harness.clock.advance(seconds: 3_601)
            _ = try await s.request("popular", from: "203.0.113.5")
            #expect(try await s.codes(to: "popular@example.org").count == 4)
        }
    }

    @Test func codes_normalize() {
        let code = ResetCode.generate { 0x0123_4567_89AB_CDEF }
        #expect(code.count == 14 && code.split(separator: "-").count == 3)
        #expect(ResetCode.normalize(code.lowercased()) == code.replacingOccurrences(of: "-", with: ""))
        #expect(ResetCode.normalize("oooo-iiii-llll") == "000011111111")
        #expect(ResetCode.normalize("ABCD-EFGH-JKM") == nil)
        #expect(ResetCode.normalize("ABCD-EFGH-JKMU") == nil, "U is not in the alphabet")
    }
}
