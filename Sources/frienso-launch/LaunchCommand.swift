import ArgumentParser
import Foundation
import Deliveries
import Launcher
import Logging
import ServiceKit
import ServiceLifecycle

@main
struct LaunchCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "frienso-launch",
        abstract: "Start every Frienso service, keep them running, stop them all on Ctrl-C or SIGTERM.",
        subcommands: [Run.self, Status.self, Keys.self, DeliveriesCommand.self, BackupCommand.self, RestoreCommand.self],
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
        let logger = ServiceRunner.bootstrapLogging(level: resolved.logLevel, format: resolved.logFormat)
        let bin = binDir ?? Executables.folder
        let plan = try LaunchPlan(resolved: resolved, options: options, binDirectory: bin,
                                  keyringFolder: KeyringCommands.folder(resolved, runDirectory: runDir))
        if let folder = plan.keyringFolder {
            logger.info("internal plane: CurveZMQ", metadata: ["keyring": "\(folder)"])
        } else {
            logger.critical("INSECURE: --insecure-plaintext: every internal socket of this deployment believes whoever reaches it")
        }
        let rotation = LogRotation(maxBytes: resolved.config.logMaxBytes ?? 64 << 20, keep: resolved.config.logKeep ?? 5)
        let supervisor = Supervisor(children: plan.children, runDirectory: runDir, logger: logger, logRotation: rotation)
        let listen = resolved.environment["FRIENSO_METRICS_LISTEN"] ?? resolved.config.metricsListen ?? Defaults.metricsListen
        let metrics: [any Service] = listen == "off" ? [] : [MetricsServer(listen: listen, supervisor: supervisor, logger: logger)]
        try await ServiceRunner.run([supervisor] + metrics, endpointFile: nil, logger: logger) { "" }
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
        let report = try status.report(json: json, nowMs: Int64(Date().timeIntervalSince1970 * 1_000))
        print(report.text)
        if !report.allReady { throw ExitCode(1) }
    }
}

struct BackupCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "backup",
        abstract: "Copy every service's database and the photo store into a new folder, while the deployment serves.",
        discussion: """
            Each database is a consistent snapshot (SQLite's online backup) taken at its own moment during the backup; \
            everything acknowledged before the backup started is in it. Photos are copied by content hash (hard links on \
            the same file system). manifest.json, written last, lists every file's SHA-256. The keyring is not copied: \
            a restored deployment makes new internal keys. Exit status 0 when the backup is complete.
            """)

    @OptionGroup var options: ServiceOptions
    @Argument(help: "A new (or empty) folder for the backup.") var folder: String

    func run() throws {
        let resolved = try options.resolve(service: "launch")
        let data = resolved.dataRoot
        print(Backup.report(taken: try Backup.take(dataDirectory: data, into: folder), from: data, into: folder))
        for note in Backup.notInBackup(resolved.config) { print(note) }
    }
}

struct RestoreCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "restore",
        abstract: "Bring a stopped deployment's data back from a backup folder.",
        discussion: """
            Checks every file against the manifest first and changes nothing if one differs. A data folder that is not \
            empty is moved aside to <data>.before-restore-<time>, never deleted. Refuses while a launcher or a service runs \
            on --run-dir. Then start the deployment as usual.
            """)

    @OptionGroup var options: ServiceOptions
    @Option(help: "The launcher's run folder, checked for a running deployment (default ./run).") var runDir = "run"
    @Argument(help: "The backup folder (frienso-launch backup).") var folder: String

    func run() throws {
        let data = try options.resolve(service: "launch").dataRoot
        let (manifest, aside) = try Backup.restore(from: folder, dataDirectory: data, runDirectory: runDir)
        print(Backup.report(restored: manifest, into: data, movedAside: aside))
    }
}

struct DeliveriesCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "deliveries",
        abstract: "The SMS, push and email providers the deployment is configured with (alerts.sms, alerts.push, accounts.email).",
        subcommands: [Test.self])

    struct Test: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Send one test message through the configured provider and say what it answered.",
            discussion: """
                A phone number (E.164, +…) goes through alerts.sms; an email address through accounts.email; a device token \
                through alerts.push (--platform ios goes to APNs when it is configured, anything else to FCM). Nothing goes \
                through an outbox and nothing is retried. \
                Exit status: 0 delivered, 1 refused, 2 no provider configured for it.
                """)

        @OptionGroup var options: ServiceOptions
        @Option(help: "An E.164 phone number, an email address, or a device token.") var to: String
        @Option(help: "The device's platform for a token: ios, android or web.") var platform = "android"

        func run() async throws {
            var logger = Logger(label: "frienso-launch")
            logger.logLevel = .warning
            let (outcome, report) = try await DeliveryCheck.run(try options.resolve(service: "alerts"), to: to, platform: platform, logger: logger)
            print(report)
            switch outcome {
            case .delivered: return
            case .refused: throw ExitCode(1)
            case .notConfigured: throw ExitCode(2)
            }
        }
    }
}
