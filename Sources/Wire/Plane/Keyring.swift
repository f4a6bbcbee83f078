/// The internal plane's keys as one member of a deployment holds them: its own CurveZMQ key pair
/// and every member's public key. Members are named (`accounts`, `gateway`, `launcher`, …); the
/// name is what a server learns of a peer once its key is admitted, and what the policy decides on.
public struct Keyring: Sendable, Hashable {
    /// This process's member name.
    public let member: String
    public let keys: CurveKeys.KeyPair
    /// Public key (Z85) of every member, this one included, by name.
    public let members: [String: String]

    /// - Throws: `KeyringError` when `keys` is not a pair, or the member's public key in `members`
    ///   is another one (a stale or mixed-up keyring).
    public init(member: String, keys: CurveKeys.KeyPair, members: [String: String]) throws(KeyringError) {
        guard let derived = try? CurveKeys.publicKey(forSecret: keys.secretKey), derived == keys.publicKey else {
            throw KeyringError("\(member)'s secret key does not belong to its public key")
        }
        guard members[member] == nil || members[member] == keys.publicKey else {
            throw KeyringError("\(member)'s secret key does not match the public key the keyring lists for it")
        }
        for (name, key) in members where !CurveKeys.isKey(key) {
            throw KeyringError("\(name)'s public key is not a 40-character Z85 CurveZMQ key")
        }
        var all = members
        all[member] = keys.publicKey
        var owners: [String: String] = [:]
        for (name, key) in all.sorted(by: { $0.key < $1.key }) {
            if let other = owners.updateValue(name, forKey: key) {
                throw KeyringError("\(other) and \(name) have the same public key: every member needs a key pair of its own (frienso-launch keys rotate)")
            }
        }
        self.member = member
        self.keys = keys
        self.members = all
    }

    /// The public key a client must trust to reach `member`'s sockets.
    public func publicKey(of member: String) throws(KeyringError) -> String {
        guard let key = members[member] else {
            throw KeyringError("the keyring has no key for \(member): every member of the deployment needs one (frienso-launch creates them)")
        }
        return key
    }

    /// How this member connects to `server`: CurveZMQ with this member's own key pair.
    public func client(of server: String) throws(KeyringError) -> ClientSecurity {
        .curve(serverPublicKey: try publicKey(of: server), keys: keys)
    }

    /// How this member binds a socket that only `admitted` members may reach (all members when nil).
    public func server(admitting admitted: Set<String>? = nil) -> ServerSecurity {
        let names = admitted.map { Set(members.keys).intersection($0) } ?? Set(members.keys)
        return .curve(secretKey: keys.secretKey,
                      admission: .members(Dictionary(uniqueKeysWithValues: names.map { (members[$0]!, $0) })))
    }
}

public struct KeyringError: Error, CustomStringConvertible, Sendable {
    public var description: String
    public init(_ description: String) { self.description = description }
}

/// How a bound socket (a service's ROUTER, a PUB) admits peers.
public enum ServerSecurity: Sendable, Hashable {
    /// No authentication: whoever reaches the port is believed. Only behind an explicit flag.
    case plaintext
    /// CurveZMQ: encrypted, and every connection authenticated by the process's ZAP handler.
    case curve(secretKey: String, admission: Admission)

    /// Who a CurveZMQ server lets in.
    public enum Admission: Sendable, Hashable {
        /// Any client that knows the server's public key (the gateway's client socket).
        case anyClient
        /// Only these public keys (Z85), each known by a member name.
        case members([String: String])
    }

    public var isPlaintext: Bool { self == .plaintext }
}

/// How a connecting socket (a DEALER to a service, a SUB) authenticates to its server.
public enum ClientSecurity: Sendable, Hashable {
    case plaintext
    /// CurveZMQ to a server with this public key, as the member with `keys` (nil: a fresh
    /// anonymous pair, as clients of the gateway use).
    case curve(serverPublicKey: String, keys: CurveKeys.KeyPair?)
}
