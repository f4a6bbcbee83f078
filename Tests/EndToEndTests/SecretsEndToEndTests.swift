import Foundation
import FriensoTesting
import Testing

@Suite("end to end: secrets stay out of the logs", .serialized, .timeLimit(.minutes(3)))
struct SecretsEndToEndTests {
    /// Every service at the most verbose level, then the things that carry secrets: registering,
    /// logging in (and failing to), changing a password, the session token in use, operator keys
    /// (right and wrong), a helpNow's deliveries. No password, token or operator key may appear in
    /// any log line, nor a password hash.
    @Test func passwordsTokensAndKeys_neverReachTheLogs() async throws {
        let procs = try ProcessHarness()
        defer { procs.shutdown() }
        let stack = Stack(procs)
        stack.extraEnvironment = ["FRIENSO_LOG_LEVEL": "trace"]
        for service in ["accounts", "social", "geo", "alerts", "media", "gateway"] { try await stack.start(service) }
        let users = try await stack.register([("ana", "+15625550701"), ("ben", "+15625550702")])
        let (ana, ben) = (users["ana"]!, users["ben"]!)
        let secrets = ["password ana", "password ben", "e2e-operator", "wrong-operator-key-1234", "not my password 987", "brand new passphrase 42"]

        #expect(try await ana.run(["login", "ana", "--password-stdin"], stdin: "not my password 987\n").status != 0)
        _ = try await ana.run(["login", "ana", "--password-stdin"], stdin: "password ana\n")
        _ = try await ana.run(["friends", "add", "ben"])
        _ = try await ben.run(["friends", "add", "ana"])
        _ = try await ana.run(["circle", "add", "ben"])
        _ = try await ben.run(["circle", "accept", "ana"])
        _ = try await ana.run(["locate", "33.78", "-118.11"])
        _ = try await ana.run(["help-now", "--message", "testing secrets"])
        _ = try await ana.run(["outbox", "--operator-key", "e2e-operator"])
        #expect(try await ana.run(["outbox", "--operator-key", "wrong-operator-key-1234"]).status != 0)
        let changed = try await ben.run(["password", "--password-stdin"], stdin: "password ben\nbrand new passphrase 42\n")
        #expect(changed.status == 0, "\(changed.output)")
        let session = try String(contentsOfFile: "\(stack.dir)/ana/session.json", encoding: .utf8)
        // Typed steps: as one optional chain inside #require this took the type checker 5 s.
        let afterKey: String? = session.components(separatedBy: "\"token\"").dropFirst().first
        let quoted: [Substring] = afterKey?.split(separator: "\"") ?? []
        let token = try #require(quoted.dropFirst().first.map { String($0) })
        #expect(token.count >= 20, "the session token was read back: \(session)")

        // Every log line of every process, whole.
        let names = try FileManager.default.contentsOfDirectory(atPath: procs.workDirectory).filter { $0.hasSuffix(".log") }
        #expect(names.count >= 6, "\(names)")
        var lines = 0
        for name in names {
            let text = try String(contentsOfFile: "\(procs.workDirectory)/\(name)", encoding: .utf8)
            lines += text.split(separator: "\n").count
            for secret in secrets + [token] {
                #expect(!text.contains(secret), "\(name) logs a secret (\(secret.prefix(6))…)")
            }
            #expect(!text.contains("$argon2id$"), "\(name) logs a password hash")
        }
        #expect(lines > 50, "the services did log at trace level (\(lines) lines)")
    }
}
