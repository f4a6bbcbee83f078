import Foundation
import FriensoProto
import FriensoTesting
import Launcher
import Synchronization
import Testing
import Wire

/// `frienso-launch backup` while the deployment serves and keeps taking writes, then `restore`
/// into a fresh run and data folder: everything acknowledged before the backup started is there,
/// photos included, and the restored deployment passes the demo's tour. A damaged backup and a
/// running deployment are refused without touching anything.
/// Registrations a writer task made, each once acknowledged, and when.
final class Writes: Sendable {
    let acknowledged = Mutex<[(name: String, atMs: Int64)]>([])
    let stop = Atomic<Bool>(false)
}

@Suite("end to end: backup and restore", .serialized, .timeLimit(.minutes(5)))
struct BackupEndToEndTests {
    @Test func backupUnderLoad_restoredIntoAFreshFolder_holdsEveryAcknowledgedWrite_andPassesTheTour() async throws {
        let operatorKey = ["FRIENSO_OPERATOR_KEY": "backup-operator-key"]
        let procs = try ProcessHarness()
        defer { procs.shutdown() }
        let stack = try await LaunchedStack(procs, curve: true, environment: operatorKey)
        defer { stack.shutdown() }
        let key = try #require(stack.serverKey)
        let sessions = "\(procs.workDirectory)/demo"
        let backup = "\(procs.workDirectory)/backup"
        let writes = Writes()
        let started: Int64
        try await stack.showingLogsOnFailure {
            let seeded = try await ProcessHarness.run("/bin/bash", [Repository.root.appendingPathComponent("deploy/demo").path, "--once"], environment: [
                "FRIENSO_BIN_DIR": Repository.binaries.path, "FRIENSO_GATEWAY": stack.gateway, "FRIENSO_GATEWAY_PUBLIC_KEY": key,
                "FRIENSO_OPERATOR_KEY": "backup-operator-key", "FRIENSO_DEMO_DIR": sessions])
            #expect(seeded.status == 0, "\(seeded.output)")

            // Writers that do not stop for the backup: registrations, each remembered once acknowledged.
            let gateway = stack.gateway, work = procs.workDirectory
            let writer = Task {
                var i = 0
                while !writes.stop.load(ordering: .relaxed) {
                    i += 1
                    let name = "load\(i)"
                    let cli = CLI(gateway: gateway, configDir: "\(work)/load/\(name)", environment: ["FRIENSO_GATEWAY_PUBLIC_KEY": key])
                    let r = try await cli.run(["register", "--username", name, "--email", "\(name)@example.org", "--phone", "+1562555\(String(format: "%04d", i))",
                                               "--first-name", "Load", "--last-name", "\(i)", "--password-stdin"], stdin: "\(name) long password\n")
                    if r.status == 0 { writes.acknowledged.withLock { $0.append((name, WallClock.milliseconds())) } }
                }
            }
            try await eventually("writers are writing", timeout: .seconds(60)) { writes.acknowledged.withLock { $0.count } >= 3 }

            // Restore refuses while the deployment runs.
            let busy = try await ProcessHarness.run("frienso-launch", ["restore", "\(procs.workDirectory)/nothing", "--run-dir", stack.run,
                                                                       "--data-dir", stack.data])
            #expect(busy.status != 0 && busy.output.contains("stop the deployment before restoring"), "\(busy.output)")

            let taken = try await ProcessHarness.run("frienso-launch", ["backup", backup, "--data-dir", stack.data])
            #expect(taken.status == 0 && taken.output.contains("accounts, social, geo, alerts, media"), "\(taken.output)")
            let count = writes.acknowledged.withLock { $0.count }
            try await eventually("more writes after the backup", timeout: .seconds(60)) { writes.acknowledged.withLock { $0.count } >= count + 2 }
            writes.stop.store(true, ordering: .relaxed)
            _ = try? await writer.value
            // A second backup into the same folder is refused: a backup goes into a new one.
            let again = try await ProcessHarness.run("frienso-launch", ["backup", backup, "--data-dir", stack.data])
            #expect(again.status != 0 && again.output.contains("not empty"), "\(again.output)")
        }
        let manifest = try Backup.verify(backup)
        started = manifest.startedAtMs
        #expect(manifest.files.contains { $0.path.hasPrefix("media/blobs/") }, "the demo's photos are in the backup")
        stack.shutdown()

        // A damaged copy is refused, and the data folder it was aimed at is left as it was.
        let damaged = "\(procs.workDirectory)/damaged"
        try FileManager.default.copyItem(atPath: backup, toPath: damaged)
        let handle = try #require(FileHandle(forUpdatingAtPath: "\(damaged)/social/social.sqlite"))
        try handle.seek(toOffset: 200)
        try handle.write(contentsOf: Data([0xFF, 0x00, 0xFF]))
        try handle.close()
        let untouched = "\(procs.workDirectory)/untouched"
        try FileManager.default.createDirectory(atPath: "\(untouched)/social", withIntermediateDirectories: true)
        try Data("keep me".utf8).write(to: URL(fileURLWithPath: "\(untouched)/social/social.sqlite"))
        let refused = try await ProcessHarness.run("frienso-launch", ["restore", damaged, "--data-dir", untouched, "--run-dir", "\(procs.workDirectory)/norun"])
        #expect(refused.status != 0 && refused.output.contains("social/social.sqlite is missing or damaged"), "\(refused.output)")
        #expect(try String(contentsOfFile: "\(untouched)/social/social.sqlite", encoding: .utf8) == "keep me")

        // The restore, into a fresh folder for a fresh deployment (new ports, new keyring).
        let fresh = try ProcessHarness()
        defer { fresh.shutdown() }
        let restored = try await ProcessHarness.run("frienso-launch", ["restore", backup, "--data-dir", "\(fresh.workDirectory)/data",
                                                                       "--run-dir", "\(fresh.workDirectory)/run"])
        #expect(restored.status == 0, "\(restored.output)")
        let second = try await LaunchedStack(fresh, curve: true, environment: operatorKey)
        defer { second.shutdown() }
        let secondKey = try #require(second.serverKey)
        try await second.showingLogsOnFailure {
            // The CLI keeps sessions per gateway address: log in to the new one (the password
            // hashes came back), then the demo's tour.
            func demoUser(_ name: String) async throws -> CLI {
                let cli = CLI(gateway: second.gateway, configDir: "\(sessions)/\(name)", environment: ["FRIENSO_GATEWAY_PUBLIC_KEY": secondKey])
                let login = try await cli.run(["login", name, "--password-stdin"], stdin: "demo-\(name)\n")
                #expect(login.status == 0, "\(name): \(login.output)")
                return cli
            }
            let alice = try await demoUser("alice")
            let circle = try await alice.run(["circle"]).output
            #expect(circle.contains("bob (Bob Builder, id 2)  accepted") && circle.contains("carol (Carol Danvers, id 3)  accepted"), "\(circle)")
            let whereabouts = try await alice.run(["friends", "where"]).output
            for friend in ["bob", "carol", "dave"] { #expect(whereabouts.contains("\(friend) (id"), "\(whereabouts)") }
            let inbox = try await alice.run(["inbox"]).output
            #expect(inbox.contains("from bob") && inbox.contains("walking home from the library"), "\(inbox)")
            let checkIns = try await alice.run(["checkins"]).output
            #expect(checkIns.contains("carol (id 3) at Pyramid Arena") && checkIns.contains("photo "), "\(checkIns)")
            // The check-in's photo itself came back.
            // Step by step, each with its type: as one optional chain inside #require, this line took
            // the type checker 12 s of every clean build.
            let photoLine: Substring? = checkIns.split(separator: "\n").first { $0.contains("photo ") }
            let afterPhoto: String? = photoLine?.components(separatedBy: "photo ").last
            let mediaID: String? = afterPhoto?.split(separator: " ").first.map { String($0) }
            let media = try #require(mediaID)
            let photo = "\(fresh.workDirectory)/photo"
            let got = try await alice.run(["photo", "get", media, "-o", photo])
            #expect(got.status == 0 && ((try? Data(contentsOf: URL(fileURLWithPath: photo)).count) ?? 0) > 0, "\(got.output)")
            let nearby = try await demoUser("erin").run(["nearby"]).output
            #expect(nearby.split(separator: "\n").count == 2, "alice and frank are findable near erin: \(nearby)")

            // Every registration acknowledged before the backup started logs in.
            let before = writes.acknowledged.withLock { $0.filter { $0.atMs < started } }
            #expect(!before.isEmpty)
            for (name, _) in before {
                let cli = CLI(gateway: second.gateway, configDir: "\(fresh.workDirectory)/login/\(name)", environment: ["FRIENSO_GATEWAY_PUBLIC_KEY": secondKey])
                let login = try await cli.run(["login", name, "--password-stdin"], stdin: "\(name) long password\n")
                #expect(login.status == 0, "\(name), acknowledged before the backup started, is missing: \(login.output)")
            }
            // And the restored deployment takes new writes.
            let registration: [String] = ["register", "--username", "newcomer", "--email", "newcomer@example.org", "--phone", "+15625559999",
                                          "--first-name", "New", "--last-name", "Comer", "--password-stdin"]
            let newcomer = try await CLI(gateway: second.gateway, configDir: "\(fresh.workDirectory)/newcomer", environment: ["FRIENSO_GATEWAY_PUBLIC_KEY": secondKey])
                .run(registration, stdin: "newcomer long password\n")
            #expect(newcomer.status == 0, "\(newcomer.output)")
        }
    }
}
