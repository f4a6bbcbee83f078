/// The goodbyes of a stopping host (`KIND_GOODBYE`): which peers it answered while draining, and
/// whether each has confirmed reading those replies. A peer confirms by answering a goodbye sent
/// after its last reply (one connection keeps its order, so the answer comes after it read them).
/// A value with no socket and no clock of its own: `HostLoop` sends what `ask` hands it.
struct Farewells {
    /// How often unanswered goodbyes go out again: a peer that left after its goodbye was sent
    /// never answers, and only a send to it (refused with `ZMQ_ROUTER_MANDATORY`) tells so.
    static let retry = Duration.milliseconds(100)

    /// Each peer answered while draining, with the goodbye it has yet to answer (0: none sent
    /// since its last reply).
    private var peers: [PeerIdentity: UInt64] = [:]
    private var lastToken: UInt64 = 0
    /// When the first goodbyes went out, and when all were last sent.
    private var began: Moment?
    private var asked: Moment?

    /// Peers still to confirm.
    var waiting: Int { peers.count }

    /// A reply went to `peer`: it owes a goodbye sent after it.
    mutating func replied(to peer: PeerIdentity) {
        peers.updateValue(0, forKey: peer)
    }

    /// `peer` answered the goodbye `token`; an answer to an older goodbye proves less.
    mutating func answered(_ peer: PeerIdentity, token: UInt64) {
        if let owed = peers[peer], owed != 0, owed == token { peers.removeValue(forKey: peer) }
    }

    /// What a stopping host does on a turn: gives up once `timeout` passed since the first
    /// goodbyes (returning the peers given up), else sends a goodbye through `send` to each peer
    /// answered since its last one, and to every peer still waiting once `retry` passed. A
    /// peer whose goodbye `send` refuses (gone, or its queue full) cannot be asked: it is dropped.
    /// - Returns: whether no peer is left to wait for, and how many were given up.
    mutating func ask(now: Moment, timeout: Duration,
                      send: (PeerIdentity, UInt64) -> Bool) -> (done: Bool, givenUp: Int) {
        if peers.isEmpty { return (true, 0) }
        let first = began ?? now
        began = first
        if first.duration(to: now) >= timeout {
            let count = peers.count
            peers.removeAll()
            return (true, count)
        }
        let again = asked.map { $0.duration(to: now) >= Self.retry } ?? true
        if again { asked = now }
        for (peer, owed) in peers where owed == 0 || again {
            var token = owed
            if token == 0 {
                lastToken &+= 1
                token = lastToken
            }
            if send(peer, token) {
                if owed == 0 { peers.updateValue(token, forKey: peer) }
            } else {
                peers.removeValue(forKey: peer)
            }
        }
        return (peers.isEmpty, 0)
    }

    /// When to ask again (nil: nobody is waited for).
    var nextRetry: Moment? {
        peers.isEmpty ? nil : asked?.advanced(by: Self.retry)
    }
}
