import Foundation
import Glibc
public import Wire

/// The deployment keyring on disk: one CurveZMQ key pair per member, in one folder (mode 0700):
/// `<member>.public` (the Z85 public key, 0644) and `<member>.secret` (the Z85 secret key, 0600).
/// `frienso-launch` creates it on first start and reuses it; each service reads its own secret
/// and every public key. On several hosts, copy the public files everywhere and each secret only
/// to the host that runs that member.
public enum KeyringFiles {
    /// Every member of a deployment: the services, the two front doors (the gateway and the HTTP
    /// edge), and the launcher (its readiness probe).
    public static let members = ["accounts", "social", "geo", "alerts", "media", "gateway", "edge", "launcher"]

    public static func publicPath(_ folder: String, _ member: String) -> String { "\(folder)/\(member).public" }
    public static func secretPath(_ folder: String, _ member: String) -> String { "\(folder)/\(member).secret" }

    /// Creates the folder and a key pair for every member that has neither key. A member with
    /// only its public key here runs on another host (its secret stays there): it is left as it
    /// is; replacing its public key would lock it out of this host's members.
    /// - Returns: the members whose keys were made now.
    @discardableResult
    public static func ensure(at folder: String, members: [String] = members) throws -> [String] {
        try makeFolder(folder)
        var made: [String] = []
        for member in members where !FileManager.default.fileExists(atPath: secretPath(folder, member))
            && !FileManager.default.fileExists(atPath: publicPath(folder, member)) {
            try write(try CurveKeys.generate(), for: member, in: folder)
            made.append(member)
        }
        return made
    }

    /// Replaces the key pairs of `members` with new ones (every member by default). Running
    /// members keep the keys they loaded until they restart: restart the whole deployment after
    /// a rotation (old and new keys do not admit each other).
    public static func rotate(at folder: String, members: [String] = members) throws {
        try makeFolder(folder)
        for member in members {
            try write(try CurveKeys.generate(), for: member, in: folder)
        }
    }

    /// Every member's public key found in the folder, by name.
    public static func publicKeys(at folder: String) throws -> [String: String] {
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: folder) else {
            throw ConfigError("no keyring at \(folder)")
        }
        var keys: [String: String] = [:]
        for name in names where name.hasSuffix(".public") {
            let member = String(name.dropLast(".public".count))
            keys[member] = try read("\(folder)/\(name)", what: "\(member)'s public key")
        }
        return keys
    }

    /// `member`'s keyring: its own key pair and every member's public key.
    /// - Throws: `ConfigError` naming the file when the folder, the secret or a key is missing or
    ///   unreadable, or the secret file can be read by other users.
    public static func load(at folder: String, member: String) throws -> Keyring {
        let secretFile = secretPath(folder, member)
        guard FileManager.default.fileExists(atPath: secretFile) else {
            throw ConfigError("no secret key for \(member) at \(secretFile): frienso-launch creates the keyring in its run folder (run/keys); pass --keyring DIR (env FRIENSO_KEYRING)")
        }
        let attributes = try FileManager.default.attributesOfItem(atPath: secretFile)
        if let mode = attributes[.posixPermissions] as? Int, mode & 0o077 != 0 {
            throw ConfigError("\(secretFile) can be read by other users (mode \(String(mode, radix: 8))): chmod 600 it")
        }
        let secret = try read(secretFile, what: "\(member)'s secret key")
        let keys = CurveKeys.KeyPair(publicKey: (try? CurveKeys.publicKey(forSecret: secret)) ?? "", secretKey: secret)
        do {
            return try Keyring(member: member, keys: keys, members: try publicKeys(at: folder))
        } catch let error as KeyringError {
            throw ConfigError("keyring \(folder): \(error.description)")
        }
    }

    private static func makeFolder(_ folder: String) throws {
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true,
                                                attributes: [.posixPermissions: 0o700])
        try FileManager.default.setAttributes([.posixPermissions: 0o700], ofItemAtPath: folder)
    }

    /// Writes through a temporary file and a rename, secret first, so a reader never sees half a key.
    private static func write(_ pair: CurveKeys.KeyPair, for member: String, in folder: String) throws {
        try atomicWrite(pair.secretKey + "\n", to: secretPath(folder, member), mode: 0o600)
        try atomicWrite(pair.publicKey + "\n", to: publicPath(folder, member), mode: 0o644)
    }

    private static func atomicWrite(_ text: String, to path: String, mode: Int) throws {
        let temporary = path + ".tmp"
        try? FileManager.default.removeItem(atPath: temporary)
        guard FileManager.default.createFile(atPath: temporary, contents: Data(text.utf8), attributes: [.posixPermissions: mode]) else {
            throw ConfigError("cannot write \(temporary)")
        }
        try FileManager.default.setAttributes([.posixPermissions: mode], ofItemAtPath: temporary)
        guard rename(temporary, path) == 0 else { throw ConfigError("cannot move \(temporary) to \(path): errno \(errno)") }
    }

    private static func read(_ path: String, what: String) throws -> String {
        guard let text = try? String(contentsOfFile: path, encoding: .utf8) else { throw ConfigError("cannot read \(what) at \(path)") }
        let key = text.trimmingCharacters(in: .whitespacesAndNewlines)
        guard CurveKeys.isKey(key) else { throw ConfigError("\(path) does not hold a CurveZMQ key (40 Z85 characters)") }
        return key
    }
}
