import ArgumentParser
import Foundation
import Launcher
import ServiceKit

@main
struct LaunchCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "frienso-launch",
        abstract: "Start every Frienso service, keep them running, stop them all on Ctrl-C or SIGTERM.")

    @OptionGroup var options: ServiceOptions

    @Option(help: "Folder for logs/ and pids/ (default ./run).")
    var runDir = "run"

    @Option(help: "Folder holding the frienso-* executables (default: beside this one).")
    var binDir: String?

    func run() async throws {
        let resolved = try options.resolve(service: "launch")
        let logger = ServiceRunner.bootstrapLogging(level: resolved.logLevel)
        let bin = binDir ?? Executables.folder
        let plan = try LaunchPlan(resolved: resolved, options: options, binDirectory: bin)
        let supervisor = Supervisor(children: plan.children, runDirectory: runDir, logger: logger)
        try await ServiceRunner.run([supervisor], endpointFile: nil, logger: logger) { "" }
    }
}
