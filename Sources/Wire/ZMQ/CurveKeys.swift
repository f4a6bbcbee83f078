import CZeroMQ

/// CurveZMQ (libzmq with libsodium): encrypted, authenticated TCP. Keys are Z85 text, 40 characters.
public enum CurveKeys {
    public struct KeyPair: Sendable, Hashable {
        public var publicKey: String
        public var secretKey: String
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
        var publicKey = [CChar](repeating: 0, count: 41)
        guard zmq_curve_public(&publicKey, secretKey) == 0 else { throw ZMQError("zmq_curve_public") }
        return string(publicKey)
    }

    static func configureServer(_ socket: ZMQSocket, secretKey: String) throws(ZMQError) {
        try socket.set(ZMQ_CURVE_SERVER, 1)
        try socket.set(ZMQ_CURVE_SECRETKEY, bytes: Array(secretKey.utf8))
    }

    static func configureClient(_ socket: ZMQSocket, serverPublicKey: String) throws(ZMQError) {
        let pair = try generate()
        try socket.set(ZMQ_CURVE_SERVERKEY, bytes: Array(serverPublicKey.utf8))
        try socket.set(ZMQ_CURVE_PUBLICKEY, bytes: Array(pair.publicKey.utf8))
        try socket.set(ZMQ_CURVE_SECRETKEY, bytes: Array(pair.secretKey.utf8))
    }

    private static func string(_ chars: [CChar]) -> String {
        String(decoding: chars.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}
