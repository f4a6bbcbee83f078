import Foundation
import FriensoProto
import Synchronization
import FriensoTesting
import Launcher
import ServiceKit
import Testing
import Wire

/// A launched deployment with accounts, social, alerts and media on a real PostgreSQL server
/// (Debian's, started by the test harness on a free port): the CLI's account, friend, helpNow and
/// photo flows, kill -9 of accounts, of social, of alerts and of media with 0 acknowledged writes
/// lost and no message sent twice, and the data where it belongs (PostgreSQL's `accounts`,
/// `social`, `alerts` and `media` schemas, photos' bytes included; no SQLite file). A password is in a file, never in the config
/// or a log.
@Suite("end to end: accounts, social, alerts and media on PostgreSQL", .serialized, .timeLimit(.minutes(4)))
struct PostgresEndToEndTests {
    @Test func theDeploymentRunsAccountsAndSocialOnPostgreSQL_andAcknowledgedWritesSurviveKill9() async throws {
        let procs = try ProcessHarness()
        defer { procs.shutdown() }
        let (server, database, storage) = try await PostgresTestServer.deploymentStorage("e2e", in: procs)
        let stack = try await LaunchedStack(procs) { config in
            config.keepOnPostgres(in: storage)
        }
        defer { stack.shutdown() }
        try await stack.showingLogsOnFailure {
            let dana = stack.cli("dana")
            let register = try await dana.run(["register", "--username", "dana", "--email", "dana@example.org", "--phone", "+15625557777",
                                               "--first-name", "Dana", "--last-name", "Scully", "--password-stdin"], stdin: "trust no one 1\n")
            #expect(register.status == 0, "\(register.output)")
            let taken = try await stack.cli("other").run(["register", "--username", "DANA", "--email", "d2@example.org", "--phone", "+15625557778",
                                                          "--first-name", "D", "--last-name", "S", "--password-stdin"], stdin: "trust no one 1\n")
            #expect(taken.status == 16 && taken.output.contains("username"), "ALREADY_EXISTS naming the field: \(taken.output)")
            #expect(try await dana.run(["login", "dana", "--password-stdin"], stdin: "trust no one 1\n").status == 0)
            let edit = try await dana.run(["profile", "edit", "--last-name", "Mulder-Scully"])
            #expect(edit.status == 0 && edit.output.contains("Mulder-Scully"), "\(edit.output)")

            // Registrations from a writer while accounts is killed: every acknowledged one is there after.
            let acknowledged = try await Self.registerWhileKilling(stack)
            #expect(acknowledged.count >= 5, "the writer made progress: \(acknowledged.count)")
            for name in acknowledged {
                let login = try await stack.cli("check-\(name)").run(["login", name, "--password-stdin"], stdin: "a long password 1\n")
                #expect(login.status == 0, "\(name) was acknowledged and must log in: \(login.output)")
            }
            let whoami = try await dana.run(["whoami"])
            #expect(whoami.status == 0 && whoami.output.contains("dana@example.org"), "the session survived: \(whoami.output)")

            // The rows are in PostgreSQL's accounts schema; accounts made no SQLite file.
            let count = try await server.psql(database, "SELECT count(*) FROM accounts.users")
            #expect((Int(count) ?? 0) >= acknowledged.count + 1, "users in PostgreSQL: \(count) (dana and every acknowledged writer)")
            let migrations = try await server.psql(database, "SELECT string_agg(name, ',' ORDER BY name) FROM accounts.schema_migrations")
            #expect(migrations == "accounts_v1,email_retention,event_log_v1,idempotent_replies,login_events_by_key")
            #expect(!FileManager.default.fileExists(atPath: "\(stack.data)/accounts/accounts.sqlite"))
            #expect(!stack.logs().contains(server.password), "the database password never reaches a log")
            #expect(stack.logs().contains("engine=postgres") || stack.logs().contains("\"engine\":\"postgres\""), "accounts says which engine it runs on")

            // Friends through the CLI, social on PostgreSQL.
            #expect(try await dana.run(["friends", "add", acknowledged[0]]).status == 0)
            let other = stack.cli("first-writer")
            #expect(try await other.run(["login", acknowledged[0], "--password-stdin"], stdin: "a long password 1\n").status == 0)
            let accepted = try await other.run(["friends", "add", "dana"])
            #expect(accepted.status == 0, "\(accepted.output)")
            let friends = try await dana.run(["friends", "list"])
            #expect(friends.status == 0 && friends.output.contains(acknowledged[0]), "\(friends.output)")

            // Friend requests from Dana while social is killed: every acknowledged one is pending after.
            let requested = try await Self.requestWhileKilling(stack, from: "dana", password: "trust no one 1", to: Array(acknowledged.dropFirst()))
            #expect(!requested.isEmpty, "the writer made progress")
            let client = stack.client()
            _ = try await client.login("dana", password: "trust no one 1")
            let outgoing = try await client.call(SocialV1.SocialService.listFriendRequests, SocialV1.ListFriendRequestsRequest()).outgoing
            #expect(Set(requested).isSubset(of: Set(outgoing.compactMap { $0.to?.username })),
                    "every acknowledged request survived: \(requested) vs \(outgoing.compactMap { $0.to?.username })")
            await client.close()
            let socialMigrations = try await server.psql(database, "SELECT string_agg(name, ',' ORDER BY name) FROM social.schema_migrations")
            #expect(socialMigrations == "event_log_v1,idempotent_replies,social_v1")
            let friendships = try await server.psql(database, "SELECT count(*) FROM social.friendships")
            #expect(friendships == "1")
            #expect(!FileManager.default.fileExists(atPath: "\(stack.data)/social/social.sqlite"))
            #expect(!FileManager.default.fileExists(atPath: "\(stack.data)/social.sqlite"))

            // helpNow with alerts on PostgreSQL: kill -9 right after the acknowledged raise, and every
            // message is sent once (the built-in providers' record, in PostgreSQL's alerts schema).
            let friend = acknowledged[0]
            #expect(try await dana.run(["circle", "add", friend]).status == 0)
            #expect(try await dana.run(["circle", "add", "+15625550588"]).status == 0)
            let inbox = try await other.run(["inbox"])
            let danaID = try #require(inbox.output.components(separatedBy: "core-friend ").dropFirst().first?.prefix { $0.isNumber }).description
            #expect(try await other.run(["inbox", "accept", "core-friend", danaID]).status == 0, "\(inbox.output)")
            let raised = try await dana.run(["help-now", "--message", "stuck in the lift"])
            #expect(raised.status == 0 && raised.output.contains("helpNow sent to 2 people"), "\(raised.output)")
            try await stack.kill9AndAwaitRestart("alerts")
            // A pass records the provider's send, then the rows' outcome, in two commits: wait
            // for the second (reading right after the first found the rows still pending).
            try await eventually("both helpNow SMS delivered, after the restart", timeout: .seconds(20)) {
                try await server.psql(database, """
                    SELECT count(*) FROM alerts.outbox WHERE source = 'help_now:1' AND channel = 2 AND status = 2
                    """) == "2"
            }
            let sent = try await server.psql(database, "SELECT count(*) FROM alerts.sent_messages WHERE body LIKE '%stuck in the lift%'")
            #expect(sent == "2", "both SMS sent, each once: \(sent)")
            let alertsMigrations = try await server.psql(database, "SELECT string_agg(name, ',' ORDER BY name) FROM alerts.schema_migrations")
            #expect(alertsMigrations == "alerts_grant_versions,alerts_help_by_key,alerts_v1,idempotent_replies")
            #expect(!FileManager.default.fileExists(atPath: "\(stack.data)/alerts/alerts.sqlite"))
            #expect(!FileManager.default.fileExists(atPath: "\(stack.data)/alerts.sqlite"))

            // A profile picture with media on PostgreSQL: stored with its location removed, kill -9 of
            // media right after the acknowledged upload, and a friend reads the same bytes after.
            let picture = "\(procs.workDirectory)/me.jpg"
            try Data(Fixture.jpeg(width: 640, height: 480, gps: true, filler: 3_000_000)).write(to: URL(fileURLWithPath: picture))
            let uploaded = try await dana.run(["profile", "picture", picture])
            #expect(uploaded.status == 0 && uploaded.output.contains("GPS) was removed"), "\(uploaded.output)")
            let pictureID = try #require(uploaded.output.components(separatedBy: "uploaded ").dropFirst().first?.prefix { $0.isHexDigit })
            try await stack.kill9AndAwaitRestart("media")
            let got = try await other.run(["photo", "get", String(pictureID), "-o", "\(procs.workDirectory)/got.jpg"])
            #expect(got.status == 0, "\(got.output)")
            let downloaded = try [UInt8](Data(contentsOf: URL(fileURLWithPath: "\(procs.workDirectory)/got.jpg")))
            #expect(downloaded.count > 3_000_000 && !Fixture.contains(downloaded, Fixture.gpsLatitude))
            let stored = try await server.psql(database, "SELECT sum(length(bytes)) FROM media.chunks WHERE sha256 IS NOT NULL")
            #expect(stored == String(downloaded.count), "the photo's bytes are in PostgreSQL: \(stored)")
            let mediaMigrations = try await server.psql(database, "SELECT string_agg(name, ',' ORDER BY name) FROM media.schema_migrations")
            #expect(mediaMigrations == "idempotent_replies,media_expiry_by_index,media_v1")
            #expect(!FileManager.default.fileExists(atPath: "\(stack.data)/media/media.sqlite"))
            #expect(!FileManager.default.fileExists(atPath: "\(stack.data)/media/blobs"))

            // A backup of the data folder says that accounts', social's, alerts' and media's data is in PostgreSQL, not in it.
            let backup = try await ProcessHarness.run("frienso-launch", ["backup", "\(procs.workDirectory)/backup", "--data-dir", stack.data,
                                                                         "--config", "\(procs.workDirectory)/frienso.json"])
            #expect(backup.status == 0 && backup.output.contains("geo"), "\(backup.output)")
            #expect(backup.output.contains("media keeps its data in PostgreSQL"), "\(backup.output)")
            #expect(backup.output.contains("alerts keeps its data in PostgreSQL"), "\(backup.output)")
            #expect(backup.output.contains("accounts keeps its data in PostgreSQL") && backup.output.contains("pg_dump"), "\(backup.output)")
            #expect(backup.output.contains("social keeps its data in PostgreSQL"), "\(backup.output)")
            #expect(!backup.output.contains(server.password))
        }
    }

    @Test func aPasswordInTheURL_noURL_anUnknownKind_orSeveralInstancesOnSQLite_areRefusedAtStart() async throws {
        let procs = try ProcessHarness()
        defer { procs.shutdown() }
        let one = "tcp://127.0.0.1:*", two = "tcp://127.0.0.1:*,tcp://127.0.0.1:*"
        for (service, storage, endpoints, expected) in [
            ("accounts", StorageSection(kind: "postgres", url: "postgres://frienso:hunter2@127.0.0.1:1/frienso"), one, "carries a password"),
            ("accounts", StorageSection(kind: "postgres"), one, "needs a url"),
            ("accounts", StorageSection(kind: "mysql"), one, "unknown kind"),
            ("geo", StorageSection(kind: "postgres", url: "postgres://frienso:hunter2@127.0.0.1:1/frienso"), one, "carries a password"),
            ("geo", StorageSection(kind: "sqlite"), two, "share their data through PostgreSQL"),
        ] {
            var config = FriensoConfig()
            config.storage = storage
            let path = "\(procs.workDirectory)/\(service)-\(expected.count).json"
            try config.write(to: path)
            let result = try await ProcessHarness.run("frienso-\(service)", ["--config", path, "--data-dir", "\(procs.workDirectory)/data",
                                                                           "--endpoint", endpoints, "--insecure-plaintext"])
            #expect(result.status != 0, "\(service) must not start: \(result.output)")
            #expect(result.output.contains(expected), "\(service): \(result.output)")
            #expect(!result.output.contains("hunter2"), "the password is not echoed")
        }
    }

    /// Registers users one after another from a task while accounts is killed with SIGKILL (the
    /// launcher restarts it); returns the usernames whose registration was acknowledged.
    static func registerWhileKilling(_ stack: LaunchedStack) async throws -> [String] {
        let client = stack.client(deadline: .seconds(3))
        let writer = Writer()
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask {
                var n = 0
                while !writer.stop.load(ordering: .relaxed) {
                    n += 1
                    let name = "pgwriter\(n)"
                    do {
                        _ = try await client.call(AccountsV1.AccountsService.register, AccountsV1.RegisterRequest(
                            username: name, email: "\(name)@example.org", phone: "+1562556\(String(format: "%04d", n))",
                            password: "a long password 1", firstName: "W", lastName: "R"), mutation: true)
                        writer.acknowledged.withLock { $0.append(name) }
                    } catch {
                        // Transient while accounts restarts; not acknowledged, so not expected later.
                    }
                }
            }
            try await eventually("the writer registered a few before the kill", timeout: .seconds(30)) { writer.acknowledged.withLock { $0.count } >= 3 }
            try await stack.kill9AndAwaitRestart("accounts")
            let after = writer.acknowledged.withLock { $0.count }
            try await eventually("the writer registers again after the restart", timeout: .seconds(30)) { writer.acknowledged.withLock { $0.count } >= after + 2 }
            writer.stop.store(true, ordering: .relaxed)
            try await group.waitForAll()
        }
        await client.close()
        return writer.acknowledged.withLock { $0 }
    }

    /// Sends friend requests from `from` to each of `targets` in turn while social is killed
    /// (kill -9, the launcher restarts it); returns those acknowledged.
    static func requestWhileKilling(_ stack: LaunchedStack, from: String, password: String, to targets: [String]) async throws -> [String] {
        let client = stack.client(deadline: .seconds(3))
        _ = try await client.login(from, password: password)
        let writer = Writer()
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask {
                for target in targets where !writer.stop.load(ordering: .relaxed) {
                    do {
                        _ = try await client.call(SocialV1.SocialService.sendFriendRequest, SocialV1.SendFriendRequestRequest(username: target),
                                                  mutation: true)
                        writer.acknowledged.withLock { $0.append(target) }
                    } catch {
                        // Transient while social restarts; not acknowledged, so not expected later.
                    }
                }
            }
            try await eventually("a few requests before the kill", timeout: .seconds(30)) { writer.acknowledged.withLock { $0.count } >= 1 }
            try await stack.kill9AndAwaitRestart("social")
            writer.stop.store(true, ordering: .relaxed)
            try await group.waitForAll()
        }
        await client.close()
        return writer.acknowledged.withLock { $0 }
    }

    final class Writer: Sendable {
        let acknowledged = Mutex<[String]>([])
        let stop = Atomic<Bool>(false)
    }
}
