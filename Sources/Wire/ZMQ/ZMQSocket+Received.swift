import CZeroMQ

extension ZMQSocket {
    /// One message as `receive(dontWait:prefixFrame:lastFrame:)` hands it over: valid during
    /// that call only, like the buffer pointer it holds (its bytes are libzmq's, and the
    /// properties are read from its message); never keep it.
    public struct Received {
        /// The last frame.
        public let bytes: UnsafeRawBufferPointer
        /// How many frames came before it.
        public let prefixCount: Int
        let message: UnsafeMutablePointer<zmq_msg_t>

        init(bytes: UnsafeRawBufferPointer, prefixCount: Int, message: UnsafeMutablePointer<zmq_msg_t>) {
            self.bytes = bytes
            self.prefixCount = prefixCount
            self.message = message
        }

        /// The peer's address (`Peer-Address`), read when asked: a string made per message.
        public var peerAddress: String { property("Peer-Address") }
        /// On a CurveZMQ server, the member name its ZAP handler gave the peer (`User-Id`).
        public var userID: String { property("User-Id") }

        /// The name goes to libzmq as the literal's own NUL-terminated bytes: passed as a `String`,
        /// each call made a C copy of it in a new array (about 200 instructions with its allocation,
        /// item 103).
        private func property(_ name: StaticString) -> String {
            let cName = UnsafeRawPointer(name.utf8Start).assumingMemoryBound(to: CChar.self)
            return zmq_msg_gets(message, cName).map { String(cString: $0) } ?? ""
        }
    }
}
