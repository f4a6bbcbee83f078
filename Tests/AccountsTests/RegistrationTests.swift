@testable import Accounts
import FriensoProto
import FriensoTesting
import Foundation
import Testing
import Wire

@Suite("accounts: registration and validation", .timeLimit(.minutes(2)))
struct RegistrationTests {
    static let invalid: [(String, @Sendable (inout AccountsV1.RegisterRequest) -> Void)] = [
        ("username", { $0.username = "ab" }),
        ("username", { $0.username = String(repeating: "a", count: 31) }),
        ("username", { $0.username = "9lives" }),
        ("username", { $0.username = "bad name" }),
        ("username", { $0.username = "" }),
        ("email", { $0.email = "no-at-sign" }),
        ("email", { $0.email = "a@b" }),
        ("email", { $0.email = "a@@b.org" }),
        ("email", { $0.email = "a b@c.org" }),
        ("email", { $0.email = "" }),
        ("phone", { $0.phone = "5551234" }),
        ("phone", { $0.phone = "+1 555" }),
        ("phone", { $0.phone = "+1555abc1234" }),
        ("phone", { $0.phone = "" }),
        ("password", { $0.password = "short" }),
        ("password", { $0.password = String(repeating: "x", count: 129) }),
        ("password", { $0.password = "has\u{0}nul-byte" }),
        ("first_name", { $0.firstName = "" }),
        ("first_name", { $0.firstName = String(repeating: "é", count: 51) }),
        ("last_name", { $0.lastName = "   " }),
        ("last_name", { $0.lastName = "bell\u{7}" }),
    ]

    static let valid = AccountsV1.RegisterRequest(
        username: "valid_user", email: "valid@example.org", phone: "+15625550000", password: "long enough", firstName: "Val", lastName: "Id")

    @Test("every invalid field is refused with INVALID_ARGUMENT naming the field", arguments: 0..<invalid.count)
    func invalidField(_ index: Int) async throws {
        let (field, mutate) = Self.invalid[index]
        var mutated = Self.valid
        mutate(&mutated)
        let request = mutated
        try await withAccounts { accounts in
            await expectError(.invalidArgument, containing: "\(field):") {
                _ = try await accounts.client.call(API.register, request)
            }
        }
    }

    @Test(arguments: Engine.allCases) func register_normalisesAndReturnsTheAccount(engine: Engine) async throws {
        try await withAccounts(engine) { accounts in
            var request = Self.valid
            request.username = "  Valid_User "
            request.email = "Valid@Example.ORG"
            request.phone = "+1 (562) 555-0000"
            let account = try await accounts.client.call(API.register, request).account
            #expect(account?.profile?.username == "valid_user")
            #expect(account?.email == "valid@example.org")
            #expect(account?.phone == "+15625550000")
            #expect(account?.profile?.userId ?? 0 > 0)
        }
    }

    @Test("duplicate username, email or phone is ALREADY_EXISTS naming the field, whatever the case",
          arguments: Engine.allCases, ["username", "email", "phone"])
    func duplicates(engine: Engine, _ field: String) async throws {
        try await withAccounts(engine) { accounts in
            try await accounts.register("taken", email: "taken@example.org", phone: "+15625551111")
            var request = Self.valid
            switch field {
            case "username": request.username = "TAKEN"
            case "email": request.email = "Taken@Example.org"
            default: request.phone = "+1 562 555 1111"
            }
            await expectError(.alreadyExists, containing: field) { _ = try await accounts.client.call(API.register, request) }
        }
    }

    @Test(arguments: Engine.allCases) func retriedRegister_withSameIdempotencyKey_returnsTheFirstReply_evenAfterRestart(engine: Engine) async throws {
        let store = try await TestStore.fresh(engine)
        let options = CallOptions(idempotencyKey: "register-once")
        let first = try await withAccounts(store: store) { accounts in
            try await accounts.client.call(API.register, Self.valid, options: options)
        }
        let again = try await withAccounts(store: store) { accounts in
            try await accounts.client.call(API.register, Self.valid, options: options)
        }
        #expect(first == again)
        await store.remove()
    }

    @Test(arguments: Engine.allCases) func password_isStoredAsArgon2id_withOWASPParameters_neverInClear(engine: Engine) async throws {
        try await withAccounts(engine, configure: { $0.hasher = .owasp }) { accounts in
            try await accounts.register("secretive", password: "plain text secret 42")
            switch engine {
            case .sqlite:
                let bytes = try Data(contentsOf: URL(fileURLWithPath: "\(accounts.directory)/accounts.sqlite"))
                    + ((try? Data(contentsOf: URL(fileURLWithPath: "\(accounts.directory)/accounts.sqlite-wal"))) ?? Data())
                #expect(bytes.range(of: Data("plain text secret 42".utf8)) == nil)
                #expect(bytes.range(of: Data("$argon2id$v=19$m=19456,t=2,p=1$".utf8)) != nil)
            case .postgres:
                let stored = try await accounts.store!.psql("SELECT password_hash FROM users WHERE username = 'secretive'")
                #expect(stored.hasPrefix("$argon2id$v=19$m=19456,t=2,p=1$"))
                #expect(!stored.contains("plain text secret 42"))
            }
        }
    }

    @Test func validation_normalisesPhoneNumbers() throws {
        #expect(try Validation.phone("0044 20 7946 0958") == "+442079460958")
        #expect(try Validation.phone("+1 (562) 555-1234") == "+15625551234")
        #expect(throws: RPCError.self) { try Validation.phone("+0123456789") }
        #expect(try Validation.login("+1 562 555 1234") == .phone("+15625551234"))
        #expect(try Validation.login("Bob@Example.org") == .email("bob@example.org"))
        #expect(try Validation.login("Bob") == .username("bob"))
    }
}
