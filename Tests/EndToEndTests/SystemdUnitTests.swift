import Foundation
import FriensoTesting
import Launcher
import ServiceKit
import Testing

/// `deploy/systemd`: a unit for every member a host may run (the keyring's members but the
/// launcher), checked by systemd itself (`systemd-analyze verify`: every key known, every
/// ExecStart an executable) against the binaries this build made, and each unit's flags accepted
/// by its executable.
@Suite("deployment files: systemd units", .timeLimit(.minutes(2)))
struct SystemdUnitTests {
    static let folder = Repository.root.appendingPathComponent("deploy/systemd")
    static let members = KeyringFiles.members.filter { $0 != "launcher" }

    @Test func aUnitPerMember_verifiedBySystemd_runningTheBuiltExecutableWithFlagsItTakes() async throws {
        let files = try FileManager.default.contentsOfDirectory(atPath: Self.folder.path).sorted()
        #expect(Set(files) == Set(Self.members.map { "frienso-\($0).service" } + ["frienso.target"]))

        // As installed, with /opt/frienso/bin standing for this build's folder.
        let temp = try TemporaryDirectory("frienso-systemd")
        defer { temp.remove() }
        var units: [String: String] = [:]
        for file in files {
            let text = try String(contentsOf: Self.folder.appendingPathComponent(file), encoding: .utf8)
            units[file] = text
            try text.replacingOccurrences(of: "/opt/frienso/bin", with: Repository.binaries.path)
                .write(toFile: "\(temp.path)/\(file)", atomically: true, encoding: .utf8)
        }
        let analyze = try #require(Repository.which("systemd-analyze"), "systemd-analyze (Debian's systemd package; deploy/install-deps --for-tests)")
        let verify = try await ProcessHarness.run(analyze, ["verify"] + files.map { "\(temp.path)/\($0)" })
        #expect(verify.status == 0, "\(verify.output)")
        #expect(!verify.output.contains("Unknown") && !verify.output.contains("not executable"), "\(verify.output)")

        for member in Self.members {
            let unit = try #require(units["frienso-\(member).service"])
            let exec = try #require(unit.split(separator: "\n").first { $0.hasPrefix("ExecStart=") }).dropFirst("ExecStart=".count)
            let words = exec.split(separator: " ").map(String.init)
            #expect(words.first == "/opt/frienso/bin/frienso-\(member)")
            let help = try await ProcessHarness.run("frienso-\(member)", ["--help"])
            for flag in words.dropFirst() where flag.hasPrefix("--") {
                #expect(help.output.contains(flag), "frienso-\(member) takes \(flag)")
            }
            #expect(unit.contains("WantedBy=frienso.target") && unit.contains("PartOf=frienso.target"))
            #expect(unit.contains("NoNewPrivileges=true") && unit.contains("ProtectSystem=strict") && unit.contains("User=frienso"))
            // A member that keeps data writes only in its own folder; the doors write nowhere.
            if Backup.services.contains(member) {
                #expect(unit.contains("ReadWritePaths=/var/lib/frienso/\(member)\n") && unit.contains("StateDirectory=frienso/\(member)\n"))
            } else {
                #expect(!unit.contains("ReadWritePaths") && !unit.contains("StateDirectory"))
            }
        }
    }
}
