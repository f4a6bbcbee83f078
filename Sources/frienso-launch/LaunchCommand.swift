import ArgumentParser
import Foundation
import Launcher
import ServiceKit

@main
struct LaunchCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "frienso-launch",
        abstract: "Start every Frienso service, keep them running, stop them all on Ctrl-C or SIGTERM.",
        subcommands: [Run.self, Keys.self],
        defaultSubcommand: Run.self)
}

/// Where the keyring lives: --keyring, FRIENSO_KEYRING, the config file's `keyring`, else `<run-dir>/keys`.
func keyringFolder(_ resolved: ResolvedOptions, runDir: String) -> String {
    resolved.keyring ?? "\(runDir)/keys"
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
                                  keyringFolder: keyringFolder(resolved, runDir: runDir))
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
            keyringFolder(try options.resolve(service: "launch"), runDir: runDir)
        }
    }

    struct List: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Print every member's public key (secrets stay in their files).")

        @OptionGroup var location: Location

        func run() throws {
            let folder = try location.folder()
            for (member, key) in try KeyringFiles.publicKeys(at: folder).sorted(by: { $0.key < $1.key }) {
                print("\(member.padding(toLength: 10, withPad: " ", startingAt: 0)) \(key)")
            }
        }
    }

    struct Rotate: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Replace key pairs with new ones (every member, or those named), then restart the deployment.",
            discussion: """
                Old and new keys do not admit each other: a running deployment keeps the keys it loaded until its \
                services restart, so stop frienso-launch, rotate, and start it again. On several hosts, copy the new \
                public files to every host and each new secret only to the host that runs its member.
                """)

        @OptionGroup var location: Location

        @Option(name: .customLong("member"), help: "Rotate only this member (repeatable).")
        var members: [String] = []

        func run() throws {
            let folder = try location.folder()
            let unknown = members.filter { !KeyringFiles.members.contains($0) }
            guard unknown.isEmpty else {
                throw ValidationError("not a member: \(unknown.joined(separator: ", ")) (members: \(KeyringFiles.members.joined(separator: ", ")))")
            }
            let chosen = members.isEmpty ? KeyringFiles.members : members
            try KeyringFiles.rotate(at: folder, members: chosen)
            print("rotated \(chosen.joined(separator: ", ")) in \(folder); restart the deployment to use the new keys")
        }
    }
}
