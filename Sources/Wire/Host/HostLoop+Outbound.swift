import CZeroMQ
import FriensoProto
import Logging

/// What a host's loop sends: replies (decoded ones, relayed ones, and the deadlines it answers
/// itself), pushes, and the commands that come from async code.
extension HostLoop {
    func handleCommands() {
        // Each command moved out of the drained array, in the order they were posted (`for
        // command in` copied each out, a reply's envelope with it: item 106), the array kept as
        // the spare the queue takes in exchange next time (item 148).
        commands.drain(keeping: &spareCommands) { drained in
            drained.forEachMovedOut(leaving: { .stop }) { command in
                switch command {
                case .reply(let key, let envelope):
                    answer(key, envelope)
                case .push(let peer, let bytes):
                    sendFrames(peer.frames(bytes))
                case .drain:
                    draining = true
                    requests.finish()
                case .stop:
                    stopping = true
                }
            }
        }
    }

    /// Sends the reply to the request the host knows as `key`, unless its deadline was answered.
    func answer(_ key: UInt64, _ reply: consuming Envelope) {
        guard let request = inFlight.removeValue(forKey: key) else {
            counters.dropped.add(1, ordering: .relaxed) // answered DEADLINE_EXCEEDED already
            return
        }
        var reply = reply
        reply.requestId = request.requestID
        reply.method = request.method
        send(to: request.peer, reply, coalesce: request.coalesce)
        answered(request, status: reply.status)
    }

    /// Sends a relayed reply (`ReactorReply.relay`) to the request the host knows as `key`:
    /// read in place, it is written once into the message that goes out, with this request's id
    /// and method; one the client decoded or made goes out as an envelope.
    func answer(_ key: UInt64, relayed reply: RelayedReply) {
        guard case .wire(let fields) = reply.body else { return answer(key, reply.envelope) }
        guard let request = inFlight.removeValue(forKey: key) else {
            counters.dropped.add(1, ordering: .relaxed) // answered DEADLINE_EXCEEDED already
            return
        }
        var method = request.method
        let sent = method.withUTF8 { method in
            let name = UnsafeRawBufferPointer(method)
            if request.coalesce, let slot = replySlot(to: request.peer, size: fields.replySize(requestID: request.requestID, method: name)) {
                fields.writeReply(into: slot, requestID: request.requestID, method: name)
                return true
            }
            return send(to: request.peer, isReply: true) { socket, peer throws(ZMQError) in
                try socket.send(routingID: peer.routingID, delimited: peer.hasDelimiter,
                                bodySize: fields.replySize(requestID: request.requestID, method: name), dontWait: true) {
                    fields.writeReply(into: $0, requestID: request.requestID, method: name)
                }
            }
        }
        if sent { counters.relayed.add(1, ordering: .relaxed) }
        answered(request, status: StatusCode(rawValue: fields.status))
    }

    /// What follows every reply sent for a request that was in flight.
    private func answered(_ request: InFlight, status: StatusCode) {
        if request.onReactor { takenOnReactor -= 1 }
        let now = Moment.now
        lastReplyAt = now
        counters.replied.add(1, ordering: .relaxed)
        metrics.answered(method: request.method, known: request.knownMethod, status: status, afterNanoseconds: request.arrived.nanoseconds(to: now))
        metrics.inFlight(inFlight.count)
    }

    func expireDeadlines(_ now: Moment) {
        guard let next = nextDeadline, now >= next else { return }
        var earliest: Moment?
        for (key, request) in inFlight {
            if request.deadline <= now {
                inFlight.removeValue(forKey: key)
                if request.onReactor { takenOnReactor -= 1 }
                lastReplyAt = now
                counters.deadlineExceeded.add(1, ordering: .relaxed)
                metrics.answered(method: request.method, known: request.knownMethod, status: .deadlineExceeded, afterNanoseconds: request.arrived.nanoseconds(to: now))
                send(to: request.peer, Envelope(
                    version: WireProtocol.version, kind: .reply, requestId: request.requestID, method: request.method,
                    status: .deadlineExceeded, statusMessage: "\(request.method) did not finish within its deadline"), coalesce: request.coalesce)
            } else if earliest.map({ request.deadline < $0 }) ?? true {
                earliest = request.deadline
            }
        }
        nextDeadline = earliest
    }

    /// Sends `envelope` to `peer`; with `coalesce` (the request came in a batch), a reply goes in
    /// the peer's batch of this turn instead (`coalesced`).
    func send(to peer: PeerIdentity, _ envelope: Envelope, coalesce: Bool = false) {
        if coalesce, envelope.kind == .reply, Envelope.encodesByHand, let slot = replySlot(to: peer, size: envelope.encodedSize) {
            envelope.encode(into: slot)
            return
        }
        send(to: peer, isReply: envelope.kind == .reply) { socket, peer throws(ZMQError) in
            // Encoded straight into the libzmq message that goes out.
            try socket.send(routingID: peer.routingID, delimited: peer.hasDelimiter, packing: envelope, dontWait: true)
        }
    }

    /// Sends one message to `peer` with `write` (the socket's send of its choice), counting
    /// what libzmq refused as dropped.
    /// - Returns: whether libzmq took it.
    @discardableResult
    private func send(to peer: PeerIdentity, isReply: Bool,
                      _ write: (ZMQSocket, PeerIdentity) throws(ZMQError) -> Bool) -> Bool {
        // Once draining, the host's close waits for each peer answered to confirm it read it.
        if draining, isReply { farewells.replied(to: peer) }
        do {
            if try write(socket, peer) { return true }
            counters.dropped.add(1, ordering: .relaxed) // peer's queue full or peer gone
        } catch {
            counters.dropped.add(1, ordering: .relaxed) // EHOSTUNREACH: the peer disconnected
            logger.debug("send failed", metadata: ["error": "\(error)"])
        }
        return false
    }

    func sendFrames(_ frames: [[UInt8]]) {
        do {
            if try !socket.send(frames, dontWait: true) {
                counters.dropped.add(1, ordering: .relaxed) // peer's queue full or peer gone
            }
        } catch {
            // EHOSTUNREACH: the peer disconnected. Nothing to do but count it.
            counters.dropped.add(1, ordering: .relaxed)
            logger.debug("send failed", metadata: ["error": "\(error)"])
        }
    }

    // MARK: Batches of replies

    /// Room for a reply of `size` bytes in `peer`'s batch of this turn, which `flushReplies`
    /// sends; the caller writes the reply into it at once. - Returns: nil when it must go alone
    /// (larger than a batch takes): the caller sends it, after what `peer`'s batch held, so a
    /// peer's replies keep their order.
    func replySlot(to peer: PeerIdentity, size: Int) -> UnsafeMutableRawBufferPointer? {
        let batch = pendingBatch(peer)
        guard size <= WireBatch.largestMember else {
            send(batch)
            return nil
        }
        if !batch.fits(size) { send(batch) }
        // Once draining, the host's close waits for each peer answered to confirm it read it.
        if draining { farewells.replied(to: peer) }
        if batch.count >= WireBatch.members { send(batch) } // the peer starts on these while more are made
        return batch.reserve(size)
    }

    /// `peer`'s batch of this turn, started if it has none yet.
    private func pendingBatch(_ peer: PeerIdentity) -> PendingReplies {
        for index in 0..<repliesPending where pendingReplies[index].routingID == peer.routingID {
            return pendingReplies[index]
        }
        let batch: PendingReplies
        if repliesPending == pendingReplies.count {
            batch = PendingReplies(routingID: peer.routingID, hasDelimiter: peer.hasDelimiter)
            pendingReplies.append(batch)
        } else {
            batch = pendingReplies[repliesPending]
            batch.routingID = peer.routingID
            batch.hasDelimiter = peer.hasDelimiter
        }
        repliesPending += 1
        return batch
    }

    /// Sends every batch of this turn: a lone reply as a plain message, several as a batch frame.
    func flushReplies() {
        guard repliesPending > 0 else { return }
        for index in 0..<repliesPending { send(pendingReplies[index]) }
        repliesPending = 0
        // Storage kept for the peers of the next turns; not without bound.
        if pendingReplies.count > 16 { pendingReplies.removeLast(pendingReplies.count - 16) }
    }

    /// Sends `batch` (nothing when empty) and empties it.
    private func send(_ batch: PendingReplies) {
        let count = batch.count
        guard count > 0 else { return }
        let body = batch.message
        let sent: Bool
        do {
            sent = try socket.send(routingID: batch.routingID, delimited: batch.hasDelimiter, bodySize: body.count) { $0.copyMemory(from: body) }
        } catch {
            logger.debug("send failed", metadata: ["error": "\(error)"]) // EHOSTUNREACH: the peer disconnected
            sent = false
        }
        batch.reset()
        if !sent {
            counters.dropped.add(count, ordering: .relaxed) // peer's queue full or peer gone
        } else if count > 1 {
            counters.batchesSent.add(1, ordering: .relaxed)
            metrics.batchesOut.increment()
        }
    }
}
