import Foundation
import FriensoTesting
import GRDB
import Launcher
import Testing
import Wire

@Suite("end to end: real processes and the CLI", .serialized, .timeLimit(.minutes(3)))
struct CLIEndToEndTests {
    @Test func register_login_whoami_logout_andTheAccountSurvivesKill9OfAccounts() async throws {
        let procs = try ProcessHarness()
        defer { procs.shutdown() }
        let data = "\(procs.workDirectory)/data"
        let logs = { procs.logs() }

        try procs.start("accounts", executable: "frienso-accounts", arguments: [
            "--data-dir", data, "--endpoint", "tcp://127.0.0.1:*", "--endpoint-file", "\(procs.workDirectory)/accounts.endpoint"])
        let accounts = try await endpoint(in: "\(procs.workDirectory)/accounts.endpoint")
        try procs.start("gateway", executable: "frienso-gateway", arguments: [
            "--endpoint", "tcp://127.0.0.1:*", "--endpoint-file", "\(procs.workDirectory)/gateway.endpoint"],
            environment: ["FRIENSO_ACCOUNTS_ENDPOINT": accounts])
        let gateway = try await endpoint(in: "\(procs.workDirectory)/gateway.endpoint")
        let cli = CLI(gateway: gateway, configDir: "\(procs.workDirectory)/cli")

        let register = try await cli.run(["register", "--username", "dana", "--email", "dana@example.org", "--phone", "+15625557777",
                                    "--first-name", "Dana", "--last-name", "Scully", "--password-stdin"], stdin: "trust no one 1\n")
        #expect(register.status == 0, "\(register.output)\n\(logs())")

        let bad = try await cli.run(["register", "--username", "x", "--email", "x", "--phone", "1", "--first-name", "", "--last-name", "", "--password-stdin"], stdin: "short\n")
        #expect(bad.status == 12, "INVALID_ARGUMENT exits 12: \(bad.output)")
        #expect(bad.output.contains("INVALID_ARGUMENT"))

        let login = try await cli.run(["login", "dana", "--password-stdin"], stdin: "trust no one 1\n")
        #expect(login.status == 0, "\(login.output)\n\(logs())")
        let attributes = try FileManager.default.attributesOfItem(atPath: "\(cli.configDir)/session.json")
        #expect((attributes[.posixPermissions] as? Int) == 0o600, "the session file is private")

        let whoami = try await cli.run(["whoami"])
        #expect(whoami.status == 0, "\(whoami.output)\n\(logs())")
        #expect(whoami.output.contains("dana"))
        let json = try await cli.run(["whoami", "--json"])
        #expect(json.output.contains("\"username\": \"dana\""), "\(json.output)")

        // accounts dies: the CLI gets UNAVAILABLE (exit 19) within its deadline, not a hang.
        procs.kill9("accounts")
        let down = try await cli.run(["whoami", "--timeout", "2"])
        #expect(down.status == 19, "\(down.output)\n\(logs())")
        #expect(down.output.contains("UNAVAILABLE"))

        // A mutation sent while accounts is down is sent again (its idempotency key unchanged)
        // until accounts is back within the CLI's timeout: the person sees it done, not UNAVAILABLE.
        // The CLI starts before accounts does, and accounts takes far longer to listen and be
        // heard by the gateway than the CLI to send: its first tries meet accounts down (without
        // the retry this exits 19, UNAVAILABLE).
        async let edited = cli.run(["profile", "edit", "--first-name", "Danielle", "--timeout", "60"])
        // So is a read (the CLI marks its reads idempotent): without it this exits 19 too.
        async let read = cli.run(["whoami", "--timeout", "60"])
        // It comes back on the same endpoint with the same data: the account and session are there.
        try procs.start("accounts", executable: "frienso-accounts", arguments: ["--data-dir", data, "--endpoint", accounts])
        let retried = try await edited
        #expect(retried.status == 0 && retried.output.contains("Danielle"), "retried until accounts was back: \(retried.output)\n\(logs())")
        let reread = try await read
        #expect(reread.status == 0 && reread.output.contains("dana"), "read again until accounts was back: \(reread.output)\n\(logs())")
        try await eventually("accounts answers through the gateway", timeout: .seconds(30)) {
            try await cli.run(["ping", "accounts", "--timeout", "2"]).status == 0
        }
        let again = try await cli.run(["whoami"])
        #expect(again.status == 0, "\(again.output)\n\(logs())")
        #expect(again.output.contains("dana@example.org"))

        // Profile, email and password through the CLI.
        let edit = try await cli.run(["profile", "edit", "--last-name", "Mulder-Scully"])
        #expect(edit.status == 0 && edit.output.contains("Mulder-Scully"), "\(edit.output)")
        let noFields = try await cli.run(["profile", "edit"])
        #expect(noFields.status == 64, "a usage error: \(noFields.output)")
        let email = try await cli.run(["email", "dana@fbi.example.org", "--password-stdin"], stdin: "trust no one 1\n")
        #expect(email.status == 0 && email.output.contains("dana@fbi.example.org"), "\(email.output)")
        let badEmail = try await cli.run(["email", "not-an-address", "--password-stdin"], stdin: "trust no one 1\n")
        #expect(badEmail.status == 12 && badEmail.output.contains("email:"), "\(badEmail.output)")
        let token = try String(contentsOfFile: "\(cli.configDir)/session.json", encoding: .utf8)
            .split(separator: "\"").first { $0.hasPrefix("fs1_") }.map(String.init) ?? ""
        #expect(!token.isEmpty)
        let password = try await cli.run(["password", "--password-stdin"], stdin: "trust no one 1\nthe truth is out there\n")
        #expect(password.status == 0, "\(password.output)")
        let oldPassword = try await cli.run(["login", "dana", "--password-stdin"], stdin: "trust no one 1\n")
        #expect(oldPassword.status == 13, "the old password no longer works: \(oldPassword.output)")
        let relogin = try await cli.run(["login", "dana@fbi.example.org", "--password-stdin"], stdin: "the truth is out there\n")
        #expect(relogin.status == 0, "\(relogin.output)")
        #expect(!procs.logs().contains(token), "session tokens never reach a log")

        let logout = try await cli.run(["logout"])
        #expect(logout.status == 0, "\(logout.output)")
        let after = try await cli.run(["whoami"])
        #expect(after.status == 13, "UNAUTHENTICATED exits 13: \(after.output)")
        #expect(!FileManager.default.fileExists(atPath: "\(cli.configDir)/session.json"))

        let wrong = try await cli.run(["login", "dana", "--password-stdin"], stdin: "not the password\n")
        #expect(wrong.status == 13, "\(wrong.output)")
        #expect(!procs.logs().contains("trust no one 1"), "passwords never reach a log")
        #expect(!procs.logs().contains("the truth is out there"), "passwords never reach a log")

        // Forgotten: a code by email (read from what the built-in recording provider sent), then
        // a new password with it. The reply for an unknown login reads the same.
        let forgot = try await cli.run(["password", "reset", "dana"])
        #expect(forgot.status == 0 && forgot.output.contains("a code is on its way"), "\(forgot.output)")
        let nobody = try await cli.run(["password", "reset", "nobody-at-all"])
        #expect(nobody.output == forgot.output.replacingOccurrences(of: "dana", with: "nobody-at-all"), "\(nobody.output)")
        var code = ""
        let until = ContinuousClock.now.advanced(by: .seconds(30))
        while code.isEmpty && ContinuousClock.now < until {
            var configuration = Configuration()
            configuration.readonly = true
            var body: String?
            if let queue = try? DatabaseQueue(path: "\(data)/accounts/accounts.sqlite", configuration: configuration) {
                body = (try? await queue.read { db in
                    try String.fetchOne(db, sql: "SELECT body FROM sent_emails WHERE address = 'dana@fbi.example.org'")
                }) ?? nil
            }
            code = body?.split(separator: "\n").first { $0.hasPrefix("Your code: ") }.map { String($0.dropFirst(11)) } ?? ""
            if code.isEmpty { try await Task.sleep(for: .milliseconds(100)) }
        }
        #expect(!code.isEmpty, "no reset email was recorded\n\(logs())")
        let wrongCode = try await cli.run(["password", "reset", "dana", "--code", "AAAA-BBBB-CCCC", "--password-stdin"], stdin: "i want to believe 2\n")
        #expect(wrongCode.status == 14 && wrongCode.output.contains("PERMISSION_DENIED"), "\(wrongCode.output)")
        let reset = try await cli.run(["password", "reset", "dana", "--code", code, "--password-stdin"], stdin: "i want to believe 2\n")
        #expect(reset.status == 0 && reset.output.contains("password reset"), "\(reset.output)")
        let withNew = try await cli.run(["login", "dana", "--password-stdin"], stdin: "i want to believe 2\n")
        #expect(withNew.status == 0, "\(withNew.output)")
        #expect(!procs.logs().contains(code), "reset codes never reach a log")
    }

    @Test func launcher_startsEverything_restartsAKilledService_andStopsAllOnSIGTERM() async throws {
        let procs = try ProcessHarness()
        defer { procs.shutdown() }
        // Hold the deployment's ports until the launcher is about to bind them. The config names
        // every endpoint of the deployment: anything left out would be the default port.
        var reserved = [try DeadPort(), try DeadPort(), try DeadPort()]
        let gateway = reserved[0].endpoint, accounts = reserved[1].endpoint, accountsEvents = reserved[2].endpoint
        let config = "\(procs.workDirectory)/frienso.json"
        try """
            {"endpoints": {"gateway": "\(gateway)", "accounts": "\(accounts)"}, "eventEndpoints": {"accounts": "\(accountsEvents)"},
             "launch": ["accounts", "gateway"], "metricsListen": "127.0.0.1:0"}
            """.write(toFile: config, atomically: true, encoding: .utf8)
        let run = "\(procs.workDirectory)/run"
        reserved.removeAll()
        let launcher = try procs.start("launcher", executable: "frienso-launch", arguments: [
            "--config", config, "--run-dir", run, "--data-dir", "\(procs.workDirectory)/data", "--bin-dir", Repository.binaries.path])
        let cli = CLI(gateway: gateway, configDir: "\(procs.workDirectory)/cli")

        try await eventually("the stack answers", timeout: .seconds(60)) { try await cli.run(["ping", "accounts", "--timeout", "2"]).status == 0 }
        let register = try await cli.run(["register", "--username", "lena", "--email", "lena@example.org", "--phone", "+15625558888",
                                    "--first-name", "Lena", "--last-name", "K", "--password-stdin"], stdin: "launcher pw 1\n")
        #expect(register.status == 0, "\(register.output)\n\(procs.logs())")

        let pidFile = Supervisor.pidFile(run, "accounts")
        let firstPID = try #require(Supervisor.recordedPID(run, "accounts"))
        kill(firstPID, SIGKILL)
        try await eventually("the launcher restarted accounts", timeout: .seconds(60)) {
            let pid = Supervisor.recordedPID(run, "accounts")
            guard let pid, pid != firstPID else { return false }
            return try await cli.run(["ping", "accounts", "--timeout", "2"]).status == 0
        }
        let login = try await cli.run(["login", "lena", "--password-stdin"], stdin: "launcher pw 1\n")
        #expect(login.status == 0, "data survived the kill: \(login.output)\n\(procs.logs())")

        let children = try ["accounts", "gateway"].map { name in
            try #require(Supervisor.recordedPID(run, name))
        }
        let status = await procs.terminate(launcher.name)
        #expect(status == 0, "\(procs.logs())")
        for pid in children {
            #expect(kill(pid, 0) != 0, "child \(pid) was stopped")
        }
        #expect(!FileManager.default.fileExists(atPath: pidFile))
        let launcherLog = try String(contentsOfFile: launcher.logPath, encoding: .utf8)
        #expect(launcherLog.contains("restarted"), "\(launcherLog)")
    }
}
