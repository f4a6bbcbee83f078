import CZeroMQ
import FriensoProto

/// What the client hears from its peer (replies, events, heartbeats' answers) and the clock
/// that judges it: deadlines, silent checks, heartbeats and the wake-up they need.
extension ClientLoop {
    // MARK: Inbound

    func receive(_ socket: ZMQSocket) throws(ZMQError) {
        defer {
            if heardInDrain {
                heardInDrain = false
                lastHeard = .now
            }
        }
        for _ in 0..<256 {
            // Decoded in libzmq's memory (the reply's bytes are not copied first) and handled
            // there: nothing is returned through the socket's call to be copied on the way.
            let received = try socket.receive(dontWait: true) { message in
                guard WireBatch.isBatch(message.bytes) else { return handleFrame(message.bytes, on: socket) }
                // Replies the host had ready together, sent only for calls that went in a batch.
                guard WireBatch.forEachRecord(in: message.bytes, { handleFrame($0, on: socket) }) else {
                    noteHeard()
                    logger.debug("dropped a malformed batch frame from the peer")
                    return
                }
            }
            guard received else { return }
        }
    }

    /// One envelope from the peer: a message, or a member of its batch.
    private func handleFrame(_ bytes: UnsafeRawBufferPointer, on socket: ZMQSocket) {
        if relaying, relayed(bytes) { return }
        guard let envelope = try? Envelope.decoded(bytes) else {
            noteHeard()
            logger.debug("dropped an undecodable frame from the peer")
            return
        }
        heard(envelope, on: socket)
    }

    /// A reply read where it lies, for a call that relays it (`WireClient.relayOnReactor`):
    /// nothing decoded, the completion handed the reply's fields in libzmq's memory.
    /// - Returns: false when it is not such a reply, or not one to relay as it is (a stopping
    ///   instance's refusal, which another instance takes): `heard` takes it then.
    private func relayed(_ bytes: UnsafeRawBufferPointer) -> Bool {
        guard let fields = ReplyFields(scanning: bytes), fields.kind == Envelope.replyKind,
              !(fields.notStarted && fields.status == StatusCode.unavailable.rawValue && handOff != nil),
              let index = pending.index(forKey: fields.requestID), pending.value(at: index).relays else { return false }
        noteHeard()
        let request = pending.remove(at: index)
        request.finish(relaying: fields)
        return true
    }

    /// One envelope from the peer, taken (`consuming`): a reply moves on to its caller uncopied.
    private func heard(_ envelope: consuming Envelope, on socket: ZMQSocket) {
        noteHeard()
        switch envelope.kind {
        case .reply:
            if envelope.requestId == 0, envelope.status == .invalidArgument, peerTakesBatches {
                // A host that could not read what it got (an older build behind a batch, after
                // a restart this socket did not see): one envelope a message until told again.
                peerTakesBatches = false
                logger.warning("the peer refused a message as malformed: no batches until its heartbeat reply offers them",
                               metadata: ["endpoint": "\(endpoint)", "detail": "\(envelope.statusMessage)"])
                resendBatched()
            }
            guard let request = pending.removeValue(forKey: envelope.requestId) else { break }
            if envelope.notStarted && envelope.status == .unavailable, let handOff {
                // A stopping instance refused it before any of it ran: another instance takes
                // it, whatever the method, and this one is out of the turn.
                peerSaidStopping()
                request.sent = false
                if handOff(request) { return }
            }
            // A reply that is not such a refusal does not bring it back: a stopping host refuses
            // everything that arrives after its first refusal, so the reply is to a call that
            // reached it before (it finishes those while it drains).
            request.finish(consume envelope)
        case .event:
            events.yield(.event(consume envelope))
        case .goodbye:
            // The host is stopping and asks whether its replies were read: they were, every
            // message before this one came off the socket first.
            let answer = Envelope(version: WireProtocol.version, kind: .goodbye, requestId: envelope.requestId)
            if (try? socket.send([], packing: answer, dontWait: true)) != true {
                logger.debug("could not answer the host's goodbye", metadata: ["endpoint": "\(endpoint)"])
            }
        case .heartbeat:
            // Its answer to a heartbeat says whether the host takes batches.
            peerTakesBatches = envelope.features & WireBatch.feature != 0
        default:
            break
        }
    }

    /// After a host refused a batch: the calls that went in batches and may be sent again go
    /// again, one a message (the refused frame ran none of its calls; a call that may not be sent
    /// twice cannot tell which frame it was in, and waits for its deadline).
    private func resendBatched() {
        for (id, request) in pending where request.sent && request.sentInBatch && canResend(request) {
            request.sent = false
            request.sentInBatch = false
            unsent.append(id)
        }
        flushUnsent()
    }

    /// Anything heard from the peer: it is alive, and answering again if it was not. Called
    /// while `receive` drains the socket, which sets `lastHeard` when it is done.
    private func noteHeard() {
        heardInDrain = true
        if disconnected {
            disconnected = false
            health.answering.store(isAnswering, ordering: .relaxed)
        }
        holding = false
        if peerDown {
            setPeerDown(false)
            deadWindow = options.deadAfter
            logger.info("peer answering again", metadata: ["endpoint": "\(endpoint)"])
            flushUnsent()
        }
    }

    // MARK: Timers

    func timers(_ now: Moment) {
        let silent = lastHeard.nanoseconds(to: now)
        if let due = earliestDeadline, due <= now { expireCalls(now, silent: silent) }
        if lastCheck.nanoseconds(to: now) >= heartbeatNanoseconds {
            silentChecks = lastHeard > lastCheck ? 0 : silentChecks + 1
            lastCheck = now
        }
        if silent >= deadWindow.wholeNanoseconds && silentChecks >= checksToDeath, let socket {
            // Read what already arrived before blaming the peer (the poll that would have seen it
            // may not have run yet on this turn).
            try? receive(socket)
            if lastHeard <= now { peerWentSilent() } // nothing arrived
        }
        if socket != nil, lastSent.nanoseconds(to: now) >= heartbeatNanoseconds {
            sendHeartbeat() // the host answers every heartbeat, which keeps `lastHeard` fresh
        }
        flushUnsent()
    }

    /// Fails the calls whose deadline passed, and finds the next deadline. A completion may make
    /// another call on this loop while it runs (`keep` lowers `earliestDeadline` then).
    private func expireCalls(_ now: Moment, silent: Int64) {
        earliestDeadline = nil
        var earliest: Moment?
        for (id, request) in pending {
            guard request.deadline <= now else {
                if earliest.map({ request.deadline < $0 }) ?? true { earliest = request.deadline }
                continue
            }
            pending[id] = nil
            let error: RPCError = !request.sent || silent >= options.deadAfter.wholeNanoseconds
                ? .unavailable("no answer from \(endpoint) within the deadline")
                : .deadlineExceeded("\(request.envelope.method) did not finish within its deadline")
            request.fail(error)
        }
        if let earliest, earliestDeadline.map({ earliest < $0 }) ?? true { earliestDeadline = earliest }
    }

    /// Silent checks that make the peer dead: `liveness`, times the back-off while it stays dead.
    /// In whole nanoseconds: `Duration / Duration` goes through `Double` in the runtime (about 110
    /// instructions, on every loop turn: issue 16, item 74).
    private var checksToDeath: Int {
        max(1, Int(deadWindow.wholeNanoseconds / max(1, heartbeatNanoseconds)))
    }

    func nextWakeup() -> Moment? {
        guard socket != nil else { return nil }
        if flushDue { return .now } // calls taken after this turn's `tick`: sent on the next, at once
        var next = lastSent.advanced(byNanoseconds: heartbeatNanoseconds)
        next = min(next, lastCheck.advanced(byNanoseconds: heartbeatNanoseconds))
        // Enough silent checks: wake when the silence window is over (in the future by then,
        // else `timers` would have reconnected already).
        // While holding, the calls' deadlines and the heartbeats wake it instead.
        if silentChecks > 0, silentChecks >= checksToDeath, !holding { next = min(next, lastHeard.advanced(by: deadWindow)) }
        if let earliestDeadline, earliestDeadline < next { next = earliestDeadline }
        if !unsent.isEmpty { next = min(next, .now.advanced(byMilliseconds: 10)) }
        return next
    }
}
