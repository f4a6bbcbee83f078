import ArgumentParser
import Foundation
import FriensoClient
import FriensoProto
import Wire

typealias Accounts = AccountsV1.AccountsService

struct Register: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Create an account.")

    @OptionGroup var global: GlobalOptions
    @OptionGroup var password: PasswordOptions
    @Option(help: "3-30 of a-z, 0-9, '.', '_'; starts with a letter.") var username: String
    @Option var email: String
    @Option(help: "International format, e.g. +15625551234.") var phone: String
    @Option var firstName: String
    @Option var lastName: String

    func run() async throws {
        try await performCall(global, requireSession: false) { client in
            let secret = try password.read("Choose a password")
            let request = AccountsV1.RegisterRequest(username: username, email: email, phone: phone, password: secret,
                                                     firstName: firstName, lastName: lastName)
            let response = try await client.call(Accounts.register, request, mutation: true)
            let account = response.account ?? AccountsV1.Account()
            return ("registered \(account.profile?.username ?? username); now run `frienso login \(account.profile?.username ?? username)`",
                    response.jsonValue)
        }
    }
}

struct Login: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Log in and keep the session for later commands.")

    @OptionGroup var global: GlobalOptions
    @OptionGroup var password: PasswordOptions
    @Argument(help: "Username, email or phone number.") var login: String

    func run() async throws {
        try await performCall(global, requireSession: false) { client in
            let secret = try password.read("Password")
            let response = try await client.login(login, password: secret)
            let profile = response.account?.profile ?? AccountsV1.Profile()
            try global.sessionFile.save(.init(gateway: client.gateway, token: response.sessionToken, userId: String(profile.userId),
                                              username: profile.username, expiresAtMs: response.expiresAtMs))
            var json = response
            json.sessionToken = "(stored in \(global.sessionFile.path))"
            return ("logged in as \(profile.username) until \(formatTime(response.expiresAtMs))", json.jsonValue)
        }
    }
}

struct Logout: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "End the stored session.")

    @OptionGroup var global: GlobalOptions

    func run() async throws {
        try await performCall(global) { client in
            do {
                // Safe to send again: a second try after the first ended the session is
                // UNAUTHENTICATED, taken below as done.
                _ = try await client.call(Accounts.logout, AccountsV1.LogoutRequest(), idempotent: true)
            } catch let error as RPCError where error.code == .unauthenticated {
                // Already over on the server: forgetting it here is all that is left.
            }
            global.sessionFile.remove()
            return ("logged out", .object([("loggedOut", .bool(true))]))
        }
    }
}

struct WhoAmI: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "whoami", abstract: "Show the logged-in account.")

    @OptionGroup var global: GlobalOptions

    func run() async throws {
        try await performCall(global) { client in
            let response = try await client.call(Accounts.whoAmI, AccountsV1.WhoAmIRequest())
            let account = response.account ?? AccountsV1.Account()
            return (account.text + "\nsession   until \(formatTime(response.sessionExpiresAtMs))", response.jsonValue)
        }
    }
}

struct PasswordCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "password", abstract: "Change your password (the default), or reset a forgotten one with a code by email.",
        subcommands: [ChangePassword.self, ResetPassword.self], defaultSubcommand: ChangePassword.self)
}

struct ChangePassword: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "change", abstract: "Change the password; other sessions are logged out.")

    @OptionGroup var global: GlobalOptions
    @OptionGroup var password: PasswordOptions

    func run() async throws {
        try await performCall(global) { client in
            let current = try password.read("Current password")
            let new = try password.read("New password", environment: "FRIENSO_NEW_PASSWORD")
            let response = try await client.call(Accounts.changePassword,
                                                 AccountsV1.ChangePasswordRequest(currentPassword: current, newPassword: new), mutation: true)
            return ("password changed; \(response.revokedSessions) other session(s) logged out", response.jsonValue)
        }
    }
}

struct ResetPassword: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "reset", abstract: "Forgot the password? Get a code by email, then set a new password with it.",
        discussion: """
            frienso password reset LOGIN              sends a code to the account's email (if LOGIN names an account)
            frienso password reset LOGIN --code CODE  sets a new password (asked for, or FRIENSO_NEW_PASSWORD, or
                                                      --password-stdin); every session of the account is logged out
            """)

    @OptionGroup var global: GlobalOptions
    @OptionGroup var password: PasswordOptions
    @Argument(help: "Your username or email.") var login: String
    @Option(help: "The code from the email.") var code: String?

    func run() async throws {
        try await performCall(global, requireSession: false) { client in
            guard let code else {
                let reply = try await client.call(Accounts.requestPasswordReset, AccountsV1.RequestPasswordResetRequest(login: login), mutation: true)
                return ("if \(login) names an account, a code is on its way to its email (it works for \(reply.expiresInMinutes) minutes);\n"
                        + "then: frienso password reset \(login) --code CODE", reply.jsonValue)
            }
            let new = try password.read("New password", environment: "FRIENSO_NEW_PASSWORD")
            let reply = try await client.call(Accounts.resetPassword, AccountsV1.ResetPasswordRequest(login: login, code: code, newPassword: new),
                                              mutation: true)
            return ("password reset; \(reply.revokedSessions) session(s) logged out: log in with the new password", reply.jsonValue)
        }
    }
}

struct ChangeEmail: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "email", abstract: "Change the email address (asks for the password).")

    @OptionGroup var global: GlobalOptions
    @OptionGroup var password: PasswordOptions
    @Argument var newEmail: String

    func run() async throws {
        try await performCall(global) { client in
            let secret = try password.read("Password")
            let response = try await client.call(Accounts.changeEmail,
                                                 AccountsV1.ChangeEmailRequest(newEmail: newEmail, password: secret), mutation: true)
            return ("email is now \(response.account?.email ?? newEmail)", response.jsonValue)
        }
    }
}

struct Profile: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Show or edit a profile.", subcommands: [Show.self, Edit.self, Picture.self, Link.self, Unlink.self])

    struct Show: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Show your profile, or another user's by id.")
        @OptionGroup var global: GlobalOptions
        @Option(help: "A user id; yours when left out.") var user: UInt64?

        func run() async throws {
            try await performCall(global) { client in
                let response = try await client.call(Accounts.getProfile, AccountsV1.GetProfileRequest(userId: user ?? 0))
                return ((response.profile ?? AccountsV1.Profile()).text, response.jsonValue)
            }
        }
    }

    struct Edit: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Change your name or profile picture.")
        @OptionGroup var global: GlobalOptions
        @Option var firstName: String?
        @Option var lastName: String?
        @Option(help: "A media id from `frienso photo upload`; \"\" removes the picture.") var picture: String?

        func validate() throws {
            guard firstName != nil || lastName != nil || picture != nil else {
                throw ValidationError("give at least one of --first-name, --last-name, --picture")
            }
        }

        func run() async throws {
            try await performCall(global) { client in
                var request = AccountsV1.EditProfileRequest()
                if let firstName { request.fields.append("first_name"); request.firstName = firstName }
                if let lastName { request.fields.append("last_name"); request.lastName = lastName }
                if let picture { request.fields.append("profile_picture_media_id"); request.profilePictureMediaId = picture }
                let response = try await client.call(Accounts.editProfile, request, mutation: true)
                return ((response.account ?? AccountsV1.Account()).text, response.jsonValue)
            }
        }
    }

    struct Picture: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Upload a photo as your profile picture (friends see it; the old one is deleted).")
        @OptionGroup var global: GlobalOptions
        @Argument(help: "A JPEG, PNG, HEIC or WebP file.") var file: String

        func run() async throws {
            let bytes = try readPhoto(file)
            try await performCall(global) { client in
                let reply = try await client.uploadPhoto(bytes, purpose: .profile)
                var request = AccountsV1.EditProfileRequest()
                request.fields = ["profile_picture_media_id"]
                request.profilePictureMediaId = reply.item?.mediaId ?? ""
                _ = try await client.call(Accounts.editProfile, request, mutation: true)
                return (uploadText(reply), reply.jsonValue)
            }
        }
    }

    struct Link: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Link an account on another service, so friends who know it find you.")
        @OptionGroup var global: GlobalOptions
        @Argument(help: "The service, e.g. instagram or csulb.") var provider: String
        @Argument(help: "Your id there.") var id: String

        func run() async throws {
            try await performCall(global) { client in
                let reply = try await client.call(Accounts.linkExternalId, AccountsV1.LinkExternalIdRequest(
                    externalId: AccountsV1.ExternalId(provider: provider, externalId: id)), mutation: true)
                return (linkedText(reply.linked), reply.jsonValue)
            }
        }
    }

    struct Unlink: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Unlink an account on another service.")
        @OptionGroup var global: GlobalOptions
        @Argument var provider: String
        @Argument var id: String

        func run() async throws {
            try await performCall(global) { client in
                let reply = try await client.call(Accounts.unlinkExternalId, AccountsV1.UnlinkExternalIdRequest(
                    externalId: AccountsV1.ExternalId(provider: provider, externalId: id)), mutation: true)
                return (linkedText(reply.linked), reply.jsonValue)
            }
        }
    }

    static func linkedText(_ links: [AccountsV1.ExternalId]) -> String {
        links.isEmpty ? "no linked accounts" : "linked: " + links.map { "\($0.provider):\($0.externalId)" }.joined(separator: ", ")
    }
}

struct Ping: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Ping the gateway and each service through it.")

    @OptionGroup var global: GlobalOptions
    @Argument(help: "Services to ping (default: the gateway and every service).") var services: [String] = []

    func run() async throws {
        try await performCall(global, requireSession: false) { client in
            let names = services.isEmpty ? ["gateway", "accounts", "social", "geo", "alerts", "media"] : services
            var lines: [String] = [], json: [JSONValue] = [], failures = 0
            for name in names {
                let start = ContinuousClock.now
                do throws(RPCError) {
                    let pong = try await client.ping(name, deadline: .seconds(min(global.timeout, 3)))
                    let ms = Double(start.duration(to: .now).components.attoseconds) / 1e15
                    lines.append("\(name.padding(toLength: 9, withPad: " ", startingAt: 0)) ok    \(String(format: "%.2f", ms)) ms  v\(pong.version)  up \(pong.uptimeMs / 1000) s")
                    json.append(.object([("service", .string(name)), ("ok", .bool(true)), ("pong", pong.jsonValue)]))
                } catch {
                    failures += 1
                    lines.append("\(name.padding(toLength: 9, withPad: " ", startingAt: 0)) \(error.code.name): \(error.message)")
                    json.append(.object([("service", .string(name)), ("ok", .bool(false)), ("code", .string(error.code.name)), ("message", .string(error.message))]))
                }
            }
            if failures == names.count {
                print(global.json ? JSONValue.array(json).rendered(indent: 2) : lines.joined(separator: "\n"))
                throw RPCError.unavailable("nothing answered")
            }
            return (lines.joined(separator: "\n"), .array(json))
        }
    }
}

struct AccountCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "account", abstract: "Your account as a whole: export your data, or delete it.",
        subcommands: [ExportData.self, Delete.self])

    struct Delete: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Delete your account and everything Frienso stores about you (asks for the password).",
            discussion: """
                The account goes at once (you are logged out everywhere; the username, email and phone are free again).
                Then every service erases your friendships, requests, circle, locations and history, check-ins,
                alerts, devices, deliveries and photos; a service that is down does it when it is back.
                This cannot be undone. Without --yes, asks you to type your username.
                """)

        @OptionGroup var global: GlobalOptions
        @OptionGroup var password: PasswordOptions
        @Flag(help: "Do not ask for confirmation.") var yes = false

        func run() async throws {
            try await performCall(global) { client in
                if !yes {
                    let me = try await client.call(Accounts.whoAmI, AccountsV1.WhoAmIRequest())
                    let username = me.account?.profile?.username ?? ""
                    guard isatty(STDIN_FILENO) == 1 else {
                        throw CLIError(message: "refusing to delete without confirmation: pass --yes", exitCode: 64)
                    }
                    print("This deletes \(username) and everything stored about them, for good. Type the username to confirm: ", terminator: "")
                    guard readLine(strippingNewline: true) == username else {
                        throw CLIError(message: "not confirmed: nothing was deleted", exitCode: 64)
                    }
                }
                let secret = try password.read("Password")
                let response = try await client.call(Accounts.deleteAccount, AccountsV1.DeleteAccountRequest(password: secret), mutation: true)
                global.sessionFile.remove()
                let services = response.erasing.isEmpty ? "" : "; \(response.erasing.joined(separator: ", ")) erase your data now"
                return ("account \(response.userId) deleted\(services)", response.jsonValue)
            }
        }
    }
}
