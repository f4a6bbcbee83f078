import Foundation
public import ServiceKit

/// What `frienso-launch keys …` does, so the executable only parses and prints.
public enum KeyringCommands {
    /// Where the keyring lives: `--keyring`, `FRIENSO_KEYRING`, the config file's `keyring`, else `<run-dir>/keys`.
    public static func folder(_ resolved: ResolvedOptions, runDirectory: String) -> String {
        resolved.keyring ?? "\(runDirectory)/keys"
    }

    /// Every member's public key, a line each (secrets stay in their files).
    public static func list(folder: String) throws -> String {
        try KeyringFiles.publicKeys(at: folder).sorted { $0.key < $1.key }
            .map { "\($0.key.padding(toLength: 10, withPad: " ", startingAt: 0)) \($0.value)" }
            .joined(separator: "\n")
    }

    /// Replaces the key pairs of `members` (every member when empty). - Returns: what was done.
    /// - Throws: `ConfigError` naming a member that does not exist.
    public static func rotate(folder: String, members: [String]) throws -> String {
        let unknown = members.filter { !KeyringFiles.members.contains($0) }
        guard unknown.isEmpty else {
            throw ConfigError("not a member: \(unknown.joined(separator: ", ")) (members: \(KeyringFiles.members.joined(separator: ", ")))")
        }
        let chosen = members.isEmpty ? KeyringFiles.members : members
        try KeyringFiles.rotate(at: folder, members: chosen)
        return "rotated \(chosen.joined(separator: ", ")) in \(folder); restart the deployment to use the new keys"
    }
}
