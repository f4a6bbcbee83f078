import ArgumentParser
import Foundation

/// Where a command gets a password: `--password-stdin` (one line per password asked),
/// the FRIENSO_PASSWORD environment variable (scripts), or a prompt with echo off.
/// Never a flag: flags show in `ps` and shell history.
struct PasswordOptions: ParsableArguments {
    @Flag(help: "Read the password(s) from standard input, one per line.")
    var passwordStdin = false

    func read(_ prompt: String, environment key: String = "FRIENSO_PASSWORD") throws -> String {
        if passwordStdin {
            guard let line = Swift.readLine(strippingNewline: true) else {
                throw CLIError(message: "expected a password on standard input", exitCode: 64)
            }
            return line
        }
        if let value = ProcessInfo.processInfo.environment[key] { return value }
        guard isatty(STDIN_FILENO) == 1, let entered = getpass("\(prompt): ") else {
            throw CLIError(message: "no password: use --password-stdin or \(key)", exitCode: 64)
        }
        return String(cString: entered)
    }
}
