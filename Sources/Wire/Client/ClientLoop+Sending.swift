import FriensoProto

/// What a `ClientLoop` hands to libzmq: the calls waiting to be sent, and its heartbeats.
extension ClientLoop {
    func flushUnsent() {
        guard let socket, !unsent.isEmpty else { return }
        let now = Moment.now
        var kept: [UInt64] = []
        for (index, id) in unsent.enumerated() {
            guard let request = pending[id], !request.sent else { continue } // answered, failed or cancelled
            // In place: a copy of the envelope here was one of a request's whole-struct copies.
            request.envelope.deadlineMs = UInt32(clamping: max(0, now.nanoseconds(to: request.deadline) / 1_000_000))
            guard request.envelope.deadlineMs > 0 else { continue } // the timers expire it
            do {
                if try Self.send(&request.envelope, on: socket) {
                    request.sent = true
                    request.attempts += 1
                    lastSent = now
                } else {
                    // No peer or queue full: keep this and everything after it, in order.
                    kept.append(contentsOf: unsent[index...])
                    break
                }
            } catch {
                logger.debug("send failed", metadata: ["error": "\(error)"])
                kept.append(id)
            }
        }
        unsent = kept
    }

    /// Sends a call's envelope from where the call keeps it. Through an `inout` access the
    /// encoder reads it in place: passed as `request.envelope`, a class's stored property, it was
    /// copied whole for the call and destroyed after, about 800 instructions a request (item 104).
    private static func send(_ envelope: inout Envelope, on socket: ZMQSocket) throws(ZMQError) -> Bool {
        try socket.send([], packing: envelope, dontWait: true)
    }

    func sendHeartbeat() {
        guard let socket else { return }
        let beat = Envelope(version: WireProtocol.version, kind: .heartbeat)
        if (try? socket.send([], packing: beat, dontWait: true)) == true {
            lastSent = .now
        } else {
            // Refused (no peer connected, or its queue full): try again in 50 ms. Left at its old
            // value, `nextWakeup` stayed in the past and the reactor spun at full CPU for as long
            // as the peer was down; a whole interval later would let a brief refusal cost liveness.
            lastSent = Moment.now.advanced(by: .milliseconds(50) - options.heartbeatInterval)
        }
    }
}
