import Synchronization

/// Commands from any thread to one component on a reactor.
final class CommandQueue<Command: Sendable>: Sendable {
    /// nil once the component closed the queue: nothing will drain it any more.
    private let queue = Mutex<[Command]?>([])
    private let reactor: Reactor

    init(reactor: Reactor) {
        self.reactor = reactor
    }

    /// - Returns: false when the component has closed the queue (the command was not taken).
    @discardableResult
    func post(_ command: consuming Command) -> Bool {
        // Taken into the queue, not copied: a host's reply carries a whole envelope (item 106).
        // The closure cannot consume what it captures; it takes it out of an optional.
        var command = Optional(consume command)
        let taken = queue.withLock { queue in
            guard queue != nil else { return false }
            queue!.append(command.take()!)
            return true
        }
        if taken, !reactor.isCurrent { reactor.wake() }
        return taken
    }

    /// Takes everything queued; on the reactor thread. The queue starts again from an empty
    /// array, so its next posts grow it anew: for a queue drained now and then (a subscriber's
    /// controls); a busy one is drained with `drain(keeping:_:)`.
    func drain() -> [Command] {
        var taken: [Command] = []
        drain(into: &taken)
        return taken
    }

    /// Takes everything queued into `buffer`, which must be empty, and gives the queue `buffer`'s
    /// storage in exchange: a component that empties `buffer` after use (keeping its capacity)
    /// and passes it again has two arrays take turns, and a drain allocates nothing once both
    /// have grown (`removeAll(keepingCapacity:)` on the array it had just handed out made a new
    /// one of that capacity on every drain, a host's replies included: item 148).
    private func drain(into buffer: inout [Command]) {
        precondition(buffer.isEmpty, "drained into an empty buffer")
        queue.withLock { q in
            guard q != nil, !q!.isEmpty else { return }
            swap(&buffer, &q!)
        }
    }

    /// `drain(into:)` with a component's spare array: hands what was queued to `body`, then
    /// empties the array (keeping its capacity) as the spare for the next drain.
    func drain(keeping spare: inout [Command], _ body: (inout [Command]) -> Void) {
        var drained = spare
        spare = []
        drain(into: &drained)
        body(&drained)
        drained.removeAll(keepingCapacity: true)
        spare = drained
    }

    /// Refuses every later `post`. - Returns: what was queued and will never be drained.
    func close() -> [Command] {
        queue.withLock { q in defer { q = nil }; return q ?? [] }
    }
}
