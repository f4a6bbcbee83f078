import CZeroMQ
import Glibc
import Synchronization

/// A queue that async code posts to and one socket thread drains. Posting writes a byte to a
/// pipe that the socket thread polls next to its sockets, so the thread never spins and never
/// blocks Swift's cooperative pool.
public final class Mailbox<Item: Sendable>: Sendable {
    private let queue = Mutex<[Item]>([])
    private let readEnd: Int32
    private let writeEnd: Int32

    public init() {
        var fds: [Int32] = [-1, -1]
        // Running out of descriptors here means the process cannot do any I/O at all.
        precondition(pipe(&fds) == 0, "pipe failed: errno \(errno)")
        for fd in fds {
            _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
            _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
        }
        readEnd = fds[0]
        writeEnd = fds[1]
    }

    deinit {
        close(readEnd)
        close(writeEnd)
    }

    /// Queues `item` and wakes the draining thread.
    public func post(_ item: Item) {
        let wasEmpty = queue.withLock { items in
            items.append(item)
            return items.count == 1
        }
        if wasEmpty { signal() }
    }

    /// Wakes the draining thread without an item (e.g. to make it look at a flag).
    public func signal() {
        var one: UInt8 = 1
        _ = write(writeEnd, &one, 1) // a full pipe already means "wake up"
    }

    /// Takes everything queued. Called by the draining thread only.
    public func drain() -> [Item] {
        var sink = [UInt8](repeating: 0, count: 256)
        while read(readEnd, &sink, sink.count) == sink.count {}
        return queue.withLock { items in
            defer { items.removeAll(keepingCapacity: true) }
            return items
        }
    }

    /// A poll item that becomes readable when something was posted.
    var pollItem: zmq_pollitem_t {
        zmq_pollitem_t(socket: nil, fd: readEnd, events: Int16(ZMQ_POLLIN), revents: 0)
    }
}
