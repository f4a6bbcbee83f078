import Foundation
public import Logging

/// Credentials come from files the configuration names, never from the configuration itself (so
/// the config can be shared, printed and committed) and never into a log line: errors about a
/// secret name its file, not its content.
public enum SecretFile {
    /// The file's text, trimmed. Throws when it is missing, unreadable or empty. Warns when
    /// other users may read it.
    public static func read(_ path: String, what: String, logger: Logger) throws -> String {
        guard let data = FileManager.default.contents(atPath: path) else {
            throw ProviderConfigError("\(what): cannot read \(path)")
        }
        let text = String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        guard !text.isEmpty else { throw ProviderConfigError("\(what): \(path) is empty") }
        if let mode = (try? FileManager.default.attributesOfItem(atPath: path))?[.posixPermissions] as? Int, mode & 0o077 != 0 {
            logger.warning("a credentials file is readable by other users: chmod 600 it", metadata: ["file": "\(path)", "for": "\(what)"])
        }
        return text
    }
}

/// A configuration that cannot work (a provider's or the storage's), said before the service starts.
public struct ProviderConfigError: Error, CustomStringConvertible {
    public let description: String
    public init(_ description: String) { self.description = description }
}
