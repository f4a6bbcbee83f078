import CZeroMQ
import Glibc

/// CurveZMQ (libzmq with libsodium): encrypted, authenticated TCP. Keys are Z85 text, 40 characters.
public enum CurveKeys {
    public struct KeyPair: Sendable, Hashable {
        public var publicKey: String
        public var secretKey: String

        public init(publicKey: String, secretKey: String) {
            self.publicKey = publicKey
            self.secretKey = secretKey
        }
    }

    /// - Throws: `ZMQError` when libzmq was built without CURVE.
    public static func generate() throws(ZMQError) -> KeyPair {
        var publicKey = [CChar](repeating: 0, count: 41)
        var secretKey = [CChar](repeating: 0, count: 41)
        guard zmq_curve_keypair(&publicKey, &secretKey) == 0 else { throw ZMQError("zmq_curve_keypair") }
        return KeyPair(publicKey: string(publicKey), secretKey: string(secretKey))
    }

    /// The public key that belongs to a secret key.
    public static func publicKey(forSecret secretKey: String) throws(ZMQError) -> String {
        guard isKey(secretKey) else { throw ZMQError("zmq_curve_public", errno: EINVAL) }
        var publicKey = [CChar](repeating: 0, count: 41)
        guard zmq_curve_public(&publicKey, secretKey) == 0 else { throw ZMQError("zmq_curve_public") }
        return string(publicKey)
    }

    /// Whether `text` is a Z85-encoded 32-byte key.
    public static func isKey(_ text: String) -> Bool {
        text.utf8.count == 40 && binary(text) != nil
    }

    /// The 32 bytes a Z85 key encodes (as ZAP hands a CURVE client's key over), or nil.
    public static func binary(_ z85: String) -> [UInt8]? {
        guard z85.utf8.count == 40 else { return nil }
        var bytes = [UInt8](repeating: 0, count: 32)
        guard zmq_z85_decode(&bytes, z85) != nil else { return nil }
        return bytes
    }

    /// Libzmq's `ZMQ_ZAP_ENFORCE_DOMAIN` (a draft option in 4.3's header, accepted by its runtime):
    /// with it, a CURVE server whose process has no ZAP handler refuses every peer instead of
    /// admitting all of them.
    static let zapEnforceDomain: Int32 = 93

    static func configureServer(_ socket: ZMQSocket, secretKey: String, zapDomain: String) throws(ZMQError) {
        try socket.set(ZMQ_CURVE_SERVER, 1)
        try socket.set(ZMQ_CURVE_SECRETKEY, bytes: Array(secretKey.utf8))
        try socket.set(ZMQ_ZAP_DOMAIN, bytes: Array(zapDomain.utf8))
        try socket.set(zapEnforceDomain, 1)
    }

    static func configureClient(_ socket: ZMQSocket, serverPublicKey: String, keys: KeyPair? = nil) throws(ZMQError) {
        let pair: KeyPair
        if let keys { pair = keys } else { pair = try generate() }
        try socket.set(ZMQ_CURVE_SERVERKEY, bytes: Array(serverPublicKey.utf8))
        try socket.set(ZMQ_CURVE_PUBLICKEY, bytes: Array(pair.publicKey.utf8))
        try socket.set(ZMQ_CURVE_SECRETKEY, bytes: Array(pair.secretKey.utf8))
    }

    /// Applies `security` to a socket about to connect.
    static func configure(_ socket: ZMQSocket, _ security: ClientSecurity) throws(ZMQError) {
        if case .curve(let server, let keys) = security {
            try configureClient(socket, serverPublicKey: server, keys: keys)
        }
    }

    private static func string(_ chars: [CChar]) -> String {
        String(decoding: chars.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}
