import ServiceKit
import Accounts
import Deliveries
import Foundation
import FriensoTesting
import Testing

/// Email over SMTP to a real SMTP server (Debian's aiosmtpd, `Tests/Fixtures/smtp_server.py`)
/// that requires STARTTLS and then AUTH, as a relay on port 587 does, with a certificate from a
/// test CA the provider is told to trust.
@Suite("accounts: email over SMTP", .serialized, .timeLimit(.minutes(2)))
struct EmailProviderTests {
    struct Relay {
        let port: Int
        let out: String
        let ca: TestCA

        /// Every message the server accepted, as it recorded it.
        func received() -> [[String: Any]] {
            let text = (try? String(contentsOfFile: out, encoding: .utf8)) ?? ""
            return text.split(separator: "\n").compactMap { (try? JSONSerialization.jsonObject(with: Data($0.utf8))) as? [String: Any] }
        }
    }

    static func withRelay(failFirst: Int = 0, _ body: (Relay, ProcessHarness) async throws -> Void) async throws {
        let procs = try ProcessHarness()
        defer { procs.shutdown() }
        let dir = procs.workDirectory
        let ca = try await TestCA.make(in: "\(dir)/ca")
        var reserved: DeadPort? = try DeadPort()
        let port = try #require(reserved?.endpoint.split(separator: ":").last.flatMap { Int($0) })
        reserved = nil // released just before the server binds it
        let server = try procs.start("smtp", executable: "/usr/bin/python3", arguments: [
            Repository.root.appendingPathComponent("Tests/Fixtures/smtp_server.py").path, "--port", "\(port)", "--cert", ca.certificateFile,
            "--key", ca.keyFile, "--user", "frienso", "--password", "relay-password-1", "--out", "\(dir)/received.jsonl",
            "--fail-first", "\(failFirst)", "--reject", "nobody@example.org"])
        try await eventually("the SMTP server is ready", timeout: .seconds(20)) {
            ((try? String(contentsOfFile: server.logPath, encoding: .utf8)) ?? "").contains("ready on port")
        }
        do { try await body(Relay(port: port, out: "\(dir)/received.jsonl", ca: ca), procs) } catch {
            print("smtp server log:\n\((try? String(contentsOfFile: server.logPath, encoding: .utf8)) ?? "")")
            throw error
        }
    }

    static func smtp(_ relay: Relay, password: String = "relay-password-1", logs: CapturedLogs) throws -> SMTPEmail {
        try SMTPEmail(.init(host: "localhost", port: relay.port, security: .startTLS, username: "frienso", password: password,
                            from: "Frienso <no-reply@frienso.test>", caFile: relay.ca.caFile), logger: logs.logger("smtp"))
    }

    static func email(_ id: UInt64, to: String = "ana@example.org", subject: String = "Your Frienso reset code") -> EmailMessage {
        EmailMessage(deliveryID: id, idempotencyKey: "frienso-email-\(id)", to: to, subject: subject,
                     body: "Your code is 483 920 117.\nIt works for 30 minutes. If you did not ask for it, ignore this email.")
    }

    @Test func aMessage_goesThroughSTARTTLSAndAUTH_withItsHeaders_andAGreylistIsRetried() async throws {
        try await Self.withRelay(failFirst: 1) { relay, _ in
            let logs = CapturedLogs()
            let smtp = try Self.smtp(relay, logs: logs)
            guard case .failed(let greylisted, true) = await smtp.send(Self.email(1)) else { Issue.record("a 451 is tried again"); return }
            #expect(greylisted.contains("451"))
            guard case .delivered(let reference) = await smtp.send(Self.email(1, subject: "Código de restablecimiento")) else {
                Issue.record("delivered on the second attempt"); return
            }
            #expect(reference.contains("queued as FRIENSO0001"))
            let received = relay.received()
            #expect(received.count == 1)
            let message = try #require(received.first)
            #expect(message["tls"] as? Bool == true && message["authenticated"] as? Bool == true, "STARTTLS, then AUTH: \(message)")
            #expect(message["mail_from"] as? String == "no-reply@frienso.test" && message["rcpt_tos"] as? [String] == ["ana@example.org"])
            #expect(message["helo"] as? String == "frienso.test")
            let content = try #require(message["content"] as? String)
            #expect(content.contains("Message-ID: <frienso-email-1@frienso.test>") && content.contains("From: Frienso <no-reply@frienso.test>"))
            #expect(content.contains("Subject: =?UTF-8?B?\(Data("Código de restablecimiento".utf8).base64EncodedString())?="), "\(content)")
            let body = try #require(content.components(separatedBy: "\r\n\r\n").dropFirst().first)
            let decoded = String(decoding: Data(base64Encoded: body.replacingOccurrences(of: "\r\n", with: "")) ?? Data(), as: UTF8.self)
            #expect(decoded.contains("Your code is 483 920 117."), "\(decoded)")
            #expect(!logs.dump().contains("relay-password-1"))
        }
    }

    @Test func anUnknownRecipientIsFinal_wrongCredentialsAreRetriedAndLogged_andNothingGoesInClearText() async throws {
        try await Self.withRelay { relay, _ in
            let logs = CapturedLogs()
            guard case .failed(let unknown, false) = await (try Self.smtp(relay, logs: logs)).send(Self.email(2, to: "nobody@example.org")) else {
                Issue.record("550 is final"); return
            }
            #expect(unknown.contains("550"))
            guard case .failed(let refused, true) = await (try Self.smtp(relay, password: "wrong-password-9", logs: logs)).send(Self.email(3)) else {
                Issue.record("535 is retried: the operator fixes the credentials"); return
            }
            #expect(refused.contains("535"))
            #expect(logs.dump().contains("the SMTP relay refused the credentials"))
            #expect(!logs.dump().contains("wrong-password-9") && !refused.contains("wrong-password-9"))
            #expect(relay.received().isEmpty)
            // Plain text is only for a relay on this machine, and never with a password.
            #expect(throws: ProviderConfigError.self) {
                try SMTPEmail(.init(host: "smtp.example.org", security: .none, from: "no-reply@frienso.test"), logger: logs.logger("x"))
            }
            #expect(throws: ProviderConfigError.self) {
                try SMTPEmail(.init(host: "127.0.0.1", security: .none, username: "u", password: "p", from: "no-reply@frienso.test"), logger: logs.logger("x"))
            }
        }
    }
}
