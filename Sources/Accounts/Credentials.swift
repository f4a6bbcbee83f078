import CSodium
import Foundation
import Identity
import Synchronization
public import Wire

/// argon2id through libsodium's `crypto_pwhash_str`. Hashing is deliberately slow (tens of ms and
/// 19 MiB), so it runs on its own lanes, never on a reactor or Swift's cooperative pool, and at
/// most `lanes` at once: a burst of logins must not take every core from the threads that serve
/// requests and answer heartbeats (it did, in the test suite: peers were declared dead).
public struct PasswordHasher: Sendable {
    /// OWASP's argon2id recommendation: m = 19 MiB, t = 2, p = 1.
    public static let owasp = PasswordHasher(opsLimit: 2, memLimit: 19 * 1024 * 1024)

    public let opsLimit: UInt64
    public let memLimit: Int
    private let lanes: HashingLanes

    /// - Parameter lanes: hashes run at once; by default one per core but one (at least one).
    public init(opsLimit: UInt64, memLimit: Int, lanes: Int? = nil) {
        Sodium.initialize()
        self.opsLimit = opsLimit
        self.memLimit = memLimit
        self.lanes = HashingLanes(count: lanes ?? max(1, ProcessInfo.processInfo.activeProcessorCount - 1))
    }

    private var queue: DispatchQueue { lanes.next() }

    /// - Returns: the PHC string (`$argon2id$v=19$m=…`), which carries its own salt and parameters.
    public func hash(_ password: String) async throws(RPCError) -> String {
        let (opsLimit, memLimit) = (opsLimit, memLimit)
        let result: String? = await withCheckedContinuation { continuation in
            queue.async {
                var out = [CChar](repeating: 0, count: Int(crypto_pwhash_STRBYTES))
                let rc = password.withCString { chars in
                    crypto_pwhash_str_alg(&out, chars, UInt64(password.utf8.count), opsLimit, memLimit, crypto_pwhash_ALG_ARGON2ID13)
                }
                continuation.resume(returning: rc == 0 ? Sodium.string(out) : nil)
            }
        }
        guard let result else { throw .internal("password hashing failed (out of memory?)") }
        return result
    }

    /// - Parameter stored: the account's hash; nil when the login names no account, in which case
    ///   a decoy hash is checked instead, so both cases take the same time (and always fail).
    public func verify(_ password: String, against stored: String?) async -> Bool {
        await withCheckedContinuation { continuation in
            queue.async {
                let hash = stored ?? Self.decoy
                let ok = password.withCString { chars in
                    crypto_pwhash_str_verify(hash, chars, UInt64(password.utf8.count)) == 0
                }
                continuation.resume(returning: ok && stored != nil)
            }
        }
    }

    /// A hash of a random password, verified against when a login names no account, so that
    /// "no such user" takes as long as "wrong password".
    static let decoy: String = {
        var bytes = [UInt8](repeating: 0, count: 16)
        Sodium.randomBytes(&bytes)
        var out = [CChar](repeating: 0, count: Int(crypto_pwhash_STRBYTES))
        _ = crypto_pwhash_str_alg(&out, bytes.map { CChar(bitPattern: $0 | 0x41) }, 16, 2, 19 * 1024 * 1024, crypto_pwhash_ALG_ARGON2ID13)
        return Sodium.string(out)
    }()
}

/// Serial queues used in turn: at most `count` hashes at once.
final class HashingLanes: Sendable {
    private let queues: [DispatchQueue]
    private let counter = Atomic<Int>(0)

    init(count: Int) {
        queues = (0..<max(1, count)).map { DispatchQueue(label: "frienso.password-hashing.\($0)") }
    }

    func next() -> DispatchQueue {
        queues[counter.add(1, ordering: .relaxed).oldValue % queues.count]
    }
}

/// Session tokens: 256 random bits, shown once to the client as `fs1_` + base64url, stored only
/// as their SHA-256.
public enum SessionToken {
    public static let prefix = "fs1_"

    public static func generate() -> (token: String, hash: [UInt8]) {
        var bytes = [UInt8](repeating: 0, count: 32)
        Sodium.randomBytes(&bytes)
        let token = prefix + Data(bytes).base64EncodedString()
            .replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "=", with: "")
        return (token, hash(token))
    }

    /// - Returns: nil when the string is not shaped like a token (no lookup needed).
    public static func hashIfWellFormed(_ token: String) -> [UInt8]? {
        guard token.hasPrefix(prefix), token.utf8.count == prefix.utf8.count + 43 else { return nil }
        return hash(token)
    }

    static func hash(_ token: String) -> [UInt8] { SHA256.digest(token) }
}

enum Sodium {
    private static let initialized: Bool = sodium_init() >= 0

    static func initialize() {
        precondition(initialized, "libsodium failed to initialise")
    }

    static func string(_ chars: [CChar]) -> String {
        String(decoding: chars.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    static func randomBytes(_ bytes: inout [UInt8]) {
        initialize()
        randombytes_buf(&bytes, bytes.count)
    }
}
