import ArgumentParser
import Foundation
import Launcher
import ServiceKit

@main
struct LaunchCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "frienso-launch",
        abstract: "Start every Frienso service, keep them running, stop them all on Ctrl-C or SIGTERM.",
        subcommands: [Run.self, Status.self, Keys.self],
        defaultSubcommand: Run.self)
}

struct Run: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Run the deployment (the default): makes the keyring on first start, then starts every service.")

    @OptionGroup var options: ServiceOptions

    @Option(help: "Folder for logs/, pids/ and, unless configured elsewhere, the keyring keys/ (default ./run).")
    var runDir = "run"

    @Option(help: "Folder holding the frienso-* executables (default: beside this one).")
    var binDir: String?

    func run() async throws {
        let resolved = try options.resolve(service: "launch")
        let logger = ServiceRunner.bootstrapLogging(level: resolved.logLevel)
        let bin = binDir ?? Executables.folder
        let plan = try LaunchPlan(resolved: resolved, options: options, binDirectory: bin,
                                  keyringFolder: KeyringCommands.folder(resolved, runDirectory: runDir))
        if let folder = plan.keyringFolder {
            logger.info("internal plane: CurveZMQ", metadata: ["keyring": "\(folder)"])
        } else {
            logger.critical("INSECURE: --insecure-plaintext: every internal socket of this deployment believes whoever reaches it")
        }
        let supervisor = Supervisor(children: plan.children, runDirectory: runDir, logger: logger)
        try await ServiceRunner.run([supervisor], endpointFile: nil, logger: logger) { "" }
    }
}

struct Keys: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "The deployment keyring: one CurveZMQ key pair per member.",
        subcommands: [List.self, Rotate.self],
        defaultSubcommand: List.self)

    struct Location: ParsableArguments {
        @OptionGroup var options: ServiceOptions

        @Option(help: "The launcher's run folder (the keyring is its keys/ unless configured elsewhere).")
        var runDir = "run"

        func folder() throws -> String {
            KeyringCommands.folder(try options.resolve(service: "launch"), runDirectory: runDir)
        }
    }

    struct List: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Print every member's public key (secrets stay in their files).")

        @OptionGroup var location: Location

        func run() throws {
            print(try KeyringCommands.list(folder: try location.folder()))
        }
    }

    struct Rotate: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Replace key pairs with new ones (every member, or those named), then restart the deployment.",
            discussion: "Old and new keys do not admit each other: stop frienso-launch, rotate, start it again (docs/security.md).")

        @OptionGroup var location: Location

        @Option(name: .customLong("member"), help: "Rotate only this member (repeatable).")
        var members: [String] = []

        func run() throws {
            print(try KeyringCommands.rotate(folder: try location.folder(), members: members))
        }
    }
}

struct Status: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "How the running deployment is: each member's state, PID, restarts, uptime, last probe, how its last run ended and its last error.",
        discussion: """
            Live: the process exists. Ready: it answered the launcher's last probe (every 5 s). Exit status: 0 when the \
            launcher and every member are live and ready, 1 when one is not, 3 when no launcher runs on this folder.
            """)

    @Option(help: "The launcher's run folder (default ./run).") var runDir = "run"
    @Flag(help: "Print JSON (the launcher's status.json, with each member's live and ready).") var json = false

    func run() throws {
        guard let status = try? LaunchStatus.read(runDir), LaunchStatus.alive(status.launcherPID) else {
            print("no frienso-launch runs with --run-dir \(runDir)")
            throw ExitCode(3)
        }
        let now = Int64(Date().timeIntervalSince1970 * 1_000)
        let members = status.members.map { m in (m, live: LaunchStatus.alive(m.pid), ready: m.state == "ready") }
        if json {
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
            struct Report: Encodable {
                var launcherPID: Int32, startedAtMs: Int64, members: [Entry]
                struct Entry: Encodable { var member: LaunchStatus.Member, live: Bool, ready: Bool }
            }
            let report = Report(launcherPID: status.launcherPID, startedAtMs: status.startedAtMs,
                                members: members.map { Report.Entry(member: $0.0, live: $0.live, ready: $0.ready) })
            print(String(decoding: try encoder.encode(report), as: UTF8.self))
        } else {
            print("frienso-launch \(status.launcherPID), up \(Self.span(now - status.startedAtMs))")
            for (m, live, _) in members {
                var line = "\(m.name.padding(toLength: 9, withPad: " ", startingAt: 0)) \(m.state.padding(toLength: 14, withPad: " ", startingAt: 0))"
                line += live ? " pid \(m.pid ?? 0)" : " not running"
                if let started = m.startedAtMs, live { line += ", up \(Self.span(now - started))" }
                line += ", \(m.restarts) restart\(m.restarts == 1 ? "" : "s")"
                if let probe = m.lastProbeAtMs { line += ", probed \(Self.span(now - probe)) ago" }
                if let exit = m.lastExit { line += ", last run ended: \(exit)" }
                if let error = m.lastError { line += "\n          last error: \(error)" }
                print(line)
            }
        }
        if !members.allSatisfy({ $0.live && $0.ready }) { throw ExitCode(1) }
    }

    static func span(_ ms: Int64) -> String {
        let s = max(0, ms / 1_000)
        return s < 120 ? "\(s) s" : s < 7_200 ? "\(s / 60) min" : "\(s / 3_600) h \(s % 3_600 / 60) min"
    }
}
