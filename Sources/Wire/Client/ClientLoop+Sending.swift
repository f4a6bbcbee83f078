import FriensoProto

/// What a `ClientLoop` hands to libzmq: the calls waiting to be sent, and its heartbeats.
extension ClientLoop {
    /// Whether calls go out in batches: the peer said it takes them, and envelopes are encoded
    /// by hand (straight into the frame).
    var batching: Bool { peerTakesBatches && Envelope.encodesByHand }

    func flushUnsent() {
        flushDue = false
        guard let socket, !unsent.isEmpty else { return }
        if batching { return flushInBatches(socket) }
        if !askedForFeatures {
            // The first message on a connection is a heartbeat: its reply, read before any call's,
            // says whether the peer takes batches. Refused (the connection not up yet), the calls
            // wait with it for its 50 ms retry: a call sent just after a heartbeat libzmq refused
            // (the connection coming up in between) was answered before the client asked, and
            // until the next flush or heartbeat it sent one envelope a message.
            sendHeartbeat()
            guard askedForFeatures else { return }
        }
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
                    request.sentInBatch = false
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

    /// `flushUnsent` for a peer that takes batches: the calls ready go out in as few messages as
    /// `WireBatch`'s bounds allow, a lone call or a large one as a plain message, in order. What
    /// libzmq refuses (no peer, queue full) stays unsent with everything after it.
    private func flushInBatches(_ socket: ZMQSocket) {
        let now = Moment.now
        // The calls to send and their sizes, in arrays kept between flushes.
        ready.removeAll(keepingCapacity: true)
        readySizes.removeAll(keepingCapacity: true)
        for id in unsent {
            guard let request = pending[id], !request.sent else { continue } // answered, failed or cancelled
            request.envelope.deadlineMs = UInt32(clamping: max(0, now.nanoseconds(to: request.deadline) / 1_000_000))
            guard request.envelope.deadlineMs > 0 else { continue } // the timers expire it
            ready.append(request)
            readySizes.append(Self.encodedSize(&request.envelope))
        }
        var kept: [UInt64] = []
        var start = 0
        while start < ready.count {
            // One message: ready[start..<end], small calls up to the batch's bound; a large one alone.
            var end = start + 1
            var total = WireBatch.size(ofMembers: CollectionOfOne(readySizes[start]))
            if readySizes[start] <= WireBatch.largestMember {
                while end < ready.count, end - start < WireBatch.members, readySizes[end] <= WireBatch.largestMember {
                    let more = WireWriter.varintSize(UInt64(readySizes[end])) + readySizes[end]
                    guard total + more <= WireBatch.largest else { break }
                    total += more
                    end += 1
                }
            }
            do {
                let sent: Bool
                if end - start == 1 {
                    sent = try Self.send(&ready[start].envelope, on: socket)
                } else {
                    sent = try socket.send(bodySize: total) { buffer in
                        WireBatch.write(into: buffer, sizes: readySizes[start..<end]) { index, slice in
                            Self.encode(&ready[start + index].envelope, into: slice)
                        }
                    }
                }
                guard sent else {
                    // No peer or queue full: keep this and everything after it, in order.
                    for request in ready[start...] { kept.append(request.envelope.requestId) }
                    break
                }
                for request in ready[start..<end] {
                    request.sent = true
                    request.sentInBatch = end - start > 1
                    request.attempts += 1
                }
                lastSent = now
            } catch {
                logger.debug("send failed", metadata: ["error": "\(error)"])
                for request in ready[start..<end] { kept.append(request.envelope.requestId) }
            }
            start = end
        }
        ready.removeAll(keepingCapacity: true) // no call kept alive past the flush
        unsent = kept
    }

    /// The size of a call's envelope, read where the call keeps it (an `inout` access, as
    /// `send`): `request.envelope.encodedSize` copied the whole envelope out of the class and
    /// destroyed the copy, about 360 instructions a request (item 149).
    private static func encodedSize(_ envelope: inout Envelope) -> Int {
        envelope.encodedSize
    }

    /// Encodes a call's envelope where the call keeps it (an `inout` access: no copy, as `send`).
    private static func encode(_ envelope: inout Envelope, into buffer: UnsafeMutableRawBufferPointer) {
        envelope.encode(into: buffer)
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
            askedForFeatures = true
        } else {
            // Refused (no peer connected, or its queue full): try again in 50 ms. Left at its old
            // value, `nextWakeup` stayed in the past and the reactor spun at full CPU for as long
            // as the peer was down; a whole interval later would let a brief refusal cost liveness.
            lastSent = Moment.now.advanced(by: .milliseconds(50) - options.heartbeatInterval)
        }
    }
}
