import CLinuxShims
import CZeroMQ
import Foundation
import Glibc
public import Synchronization

/// Something that lives on a reactor thread: it owns sockets (created on that thread, never
/// leaving it), reacts when they are readable, and does timed work in `tick`.
protocol ReactorComponent: AnyObject {
    /// Sockets to poll for input, in a fixed order; `readable(_:)` gets the index.
    func pollSockets() -> [ZMQSocket]
    func readable(_ index: Int)
    /// Called on every loop turn: drain commands, expire timers, flush queues.
    func tick(now: Moment)
    /// When the component next needs a `tick` even without input (nil: only on input).
    func nextWakeup() -> Moment?
    /// Done: the reactor calls `close()` and forgets it.
    var isFinished: Bool { get }
    func close()
}

/// One thread that owns sockets and runs Swift tasks: an event loop, in the manner of NIO's.
///
/// Hosts run their request dispatch and handlers on it (as a `TaskExecutor` preference), and
/// clients made on the same reactor send and resume on it, so a request crosses no thread
/// inside Frienso code: libzmq's own I/O thread is the only hop. Work posted from another
/// thread wakes the loop through a pipe; work posted from the loop itself needs no wake.
public final class Reactor: TaskExecutor, @unchecked Sendable {
    /// The process's reactor, used unless another one is named.
    public static let shared = Reactor(name: "frienso-reactor")

    public let name: String
    private let readEnd: Int32
    private let writeEnd: Int32
    private let jobs = Mutex<[UnownedJob]>([])
    private let actions = Mutex<[@Sendable () -> Void]>([])
    private let threadID = Atomic<UInt>(0)
    private let stopped = Atomic<Bool>(false)
    /// A wake-up byte is in the pipe and the loop has not started its next turn: later posts
    /// need not write another (one syscall per burst of posts, not one per post).
    private let wakePending = Atomic<Bool>(false)
    /// Loop turns that spent longer than `slowTurn` running jobs and timers: each one delayed
    /// every socket on this reactor. A handler that blocks shows here first.
    public let slowTurns = Atomic<Int>(0)
    /// Loop turns so far: an idle reactor turns a few times a second (heartbeats); thousands
    /// a second with nothing to do means a component asks to be woken in the past.
    public let turns = Atomic<Int>(0)
    public static let slowTurn = Duration.milliseconds(20)
    private static let slowTurnNanoseconds = slowTurn.wholeNanoseconds
    /// Questions put to libzmq about a socket's pending input (`ZMQ_EVENTS`), each a `poll(2)`
    /// and a `getpid(2)` inside libzmq when the socket is idle: a reactor with many idle sockets
    /// must not ask about all of them every turn.
    public let socketQuestions = Atomic<Int>(0)
    // Touched on the reactor thread only.
    private var components: [any ReactorComponent] = []

    public init(name: String) {
        self.name = name
        var fds: [Int32] = [-1, -1]
        // Running out of descriptors here means the process cannot do any I/O at all.
        precondition(pipe(&fds) == 0, "pipe failed: errno \(errno)")
        for fd in fds {
            _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
            _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
        }
        readEnd = fds[0]
        writeEnd = fds[1]
        let thread = Thread { [self] in loop() }
        thread.name = name
        thread.stackSize = 4 << 20
        thread.start()
    }

    /// Whether the caller runs on this reactor's thread.
    public var isCurrent: Bool { threadID.load(ordering: .acquiring) == UInt(bitPattern: Int(bitPattern: pthread_self())) }

    /// Stops the loop once its components are closed (for reactors made by tests and benchmarks).
    public func stop() {
        stopped.store(true, ordering: .releasing)
        wake()
    }

    // MARK: TaskExecutor

    public func enqueue(_ job: consuming ExecutorJob) {
        let unowned = UnownedJob(job)
        jobs.withLock { $0.append(unowned) }
        if !isCurrent { wake() }
    }

    // MARK: Scheduling from other threads

    /// Runs `action` on the reactor thread.
    func execute(_ action: @escaping @Sendable () -> Void) {
        actions.withLock { $0.append(action) }
        if !isCurrent { wake() }
    }

    /// Makes the loop look at its queues and components soon.
    func wake() {
        if wakePending.exchange(true, ordering: .acquiringAndReleasing) { return }
        var one: UInt8 = 1
        _ = write(writeEnd, &one, 1) // a full pipe already means "wake up"
    }

    /// Adds a component; call on the reactor thread only.
    func register(_ component: any ReactorComponent) {
        precondition(isCurrent, "components are registered on their reactor's thread")
        components.append(component)
    }

    // MARK: The loop

    private func loop() {
        threadID.store(UInt(bitPattern: Int(bitPattern: pthread_self())), ordering: .releasing)
        // The OS name (15 characters at most) is what `top -H`, `perf` and debuggers show.
        _ = frienso_set_thread_name(String(name.prefix(15)))
        while true {
            turns.add(1, ordering: .relaxed)
            // Before the queues are read: a post after this point writes the pipe again, so the
            // poll below cannot sleep through it; a post before it is drained this turn.
            _ = wakePending.exchange(false, ordering: .acquiringAndReleasing) // reads the posters' writes: their queued work is visible below
            let started = Moment.now
            runActions()
            runJobs()
            let now = Moment.now
            for component in components { component.tick(now: now) }
            if started.nanoseconds(to: .now) > Self.slowTurnNanoseconds { slowTurns.add(1, ordering: .relaxed) }
            if components.contains(where: \.isFinished) {
                // One answer per component decides both: the ones closed are the ones forgotten.
                var kept: [any ReactorComponent] = []
                for component in components {
                    if component.isFinished { component.close() } else { kept.append(component) }
                }
                components = kept
            }
            if stopped.load(ordering: .acquiring) && components.isEmpty { break }
            poll(timeout: pollTimeout(now))
        }
        if epollFD >= 0 { close(epollFD) }
        close(readEnd)
        close(writeEnd)
    }

    // The queues' spare arrays (reactor thread only): a turn swaps a queue's array with its
    // spare, runs what it took, and empties it, keeping its capacity, as the next spare. Taking
    // the queue's array and emptying it with `removeAll(keepingCapacity:)` while the taken copy
    // still shared its storage made a new array of that capacity on every look, empty or not:
    // mallocs on every turn of every reactor (issue 16, item 148).
    @exclusivity(unchecked) private var spareJobs: [UnownedJob] = []
    @exclusivity(unchecked) private var spareActions: [@Sendable () -> Void] = []

    /// Runs what other threads posted with `execute`.
    private func runActions() {
        var taken = spareActions
        spareActions = []
        actions.withLock { queued in if !queued.isEmpty { swap(&taken, &queued) } }
        for action in taken { action() }
        taken.removeAll(keepingCapacity: true)
        spareActions = taken
    }

    /// Runs queued jobs; jobs they enqueue run in the same turn, up to a bound so I/O is not starved.
    private func runJobs() {
        var batch = spareJobs
        spareJobs = []
        var budget = 4_096
        while budget > 0 {
            jobs.withLock { queued in if !queued.isEmpty { swap(&batch, &queued) } }
            if batch.isEmpty { break }
            for job in batch { job.runSynchronously(on: asUnownedTaskExecutor()) }
            budget -= batch.count
            batch.removeAll(keepingCapacity: true)
        }
        spareJobs = batch
    }

    private func pollTimeout(_ now: Moment) -> Int {
        if !jobs.withLock({ $0.isEmpty }) || !actions.withLock({ $0.isEmpty }) { return 0 }
        var next = now.advanced(byMilliseconds: 1_000)
        for component in components {
            if let wakeup = component.nextWakeup(), wakeup < next { next = wakeup }
        }
        return max(0, Int(now.nanoseconds(to: next) / 1_000_000) + 1)
    }

    /// How the loop waits for input (`FRIENSO_POLL`, for A/B runs).
    enum WaitMode {
        /// One `epoll` instance per reactor, its sockets registered once (item 137): a turn costs
        /// what is ready, not what is registered. The default.
        case epoll
        /// One `poll(2)` on every socket's `ZMQ_FD` each turn (`FRIENSO_POLL=poll`; item 24).
        case poll
        /// `zmq_poll`, as before item 24 (`FRIENSO_POLL=zmq`).
        case zmq
    }

    static let waitMode: WaitMode = switch ProcessInfo.processInfo.environment["FRIENSO_POLL"] {
    case "zmq": .zmq
    case "poll": .poll
    default: .epoll
    }

    // The wait's lists, kept between turns (reactor thread only): no allocation per turn.
    // Unchecked exclusivity: only `poll` touches them, on this thread, without re-entry.
    @exclusivity(unchecked) private var sockets: [ZMQSocket] = []
    @exclusivity(unchecked) private var owners: [(component: any ReactorComponent, index: Int)] = []
    @exclusivity(unchecked) private var fds: [pollfd] = []
    @exclusivity(unchecked) private var readyBuffer: [Int] = []

    private func poll(timeout: Int) {
        sockets.removeAll(keepingCapacity: true)
        owners.removeAll(keepingCapacity: true)
        for component in components {
            for (index, socket) in component.pollSockets().enumerated() {
                sockets.append(socket)
                owners.append((component, index))
            }
        }
        defer {
            // Not kept alive past the turn: a closed component's socket must close now.
            sockets.removeAll(keepingCapacity: true)
            owners.removeAll(keepingCapacity: true)
        }
        let ready = switch Self.waitMode {
        case .epoll: waitWithEpoll(sockets, timeout: timeout) ?? waitDirectly(sockets, timeout: timeout)
        case .poll: waitDirectly(sockets, timeout: timeout)
        case .zmq: waitWithZMQPoll(sockets, timeout: timeout)
        }
        for slot in ready {
            owners[slot].component.readable(owners[slot].index)
            // Asked again next turn, whatever `readable` did: a component that stops short of
            // draining its socket (a host yields after 256 messages) must not be left waiting
            // for a wake-up its descriptor already gave.
            sockets[slot].mayHaveInput = true
        }
    }

    // The epoll wait's state (reactor thread only): its instance (made on the first wait), the
    // serials of the sockets registered in it, in their slots (tag = slot + 1; 0 is the wake-up
    // pipe), and the buffer its tags are read into.
    private var epollFD: Int32 = -1
    @exclusivity(unchecked) private var registered: [UInt64] = []
    @exclusivity(unchecked) private var readyTags: [UInt64] = Array(repeating: 0, count: 256)
    /// Set when epoll failed (no descriptor left, a descriptor it refused): this reactor waits
    /// with `poll(2)` from then on, which needs nothing registered.
    private var epollFailed = false
    /// Descriptors registered in this reactor's epoll instance so far: once per socket, and all
    /// of them again when a socket left the list (tests read it).
    public let registrations = Atomic<Int>(0)

    /// `waitDirectly`'s questions, with the waiting done by epoll: the wake-up pipe and every
    /// socket's `ZMQ_FD` are registered once (level-triggered: ready exactly when `poll(2)` would
    /// say so), so a turn costs the descriptors that fired, not all of them. With 120 clients on
    /// one reactor (the load generator) `poll(2)` looked at 121 descriptors a turn.
    ///
    /// The registrations follow the list: the same sockets in the same slots (the usual turn) need
    /// nothing; sockets added at the end are added; any other change (a socket gone, replaced,
    /// moved) makes a new instance with the list as it is. A socket is told by its `serial`, as
    /// its descriptor's number may be reused by the next socket once libzmq's reaper closed it.
    /// - Returns: the indices of the sockets with a message waiting, or nil when epoll failed
    ///   (the caller waits with `poll(2)`).
    private func waitWithEpoll(_ sockets: [ZMQSocket], timeout: Int) -> [Int]? {
        guard !epollFailed, register(sockets) else { return nil }
        var questions = askSocketsUsedSinceAsked(sockets)
        defer { socketQuestions.add(questions, ordering: .relaxed) }
        let askedFirst = readyBuffer.count
        let count = readyTags.withUnsafeMutableBufferPointer { tags in
            frienso_epoll_wait_tags(epollFD, tags.baseAddress, Int32(tags.count), readyBuffer.isEmpty ? Int32(clamping: timeout) : 0)
        }
        if count < 0, errno != EINTR { _ = failEpoll() } // the next turns wait with `poll(2)`
        guard count > 0 else { return readyBuffer } // a timeout, or EINTR: the next turn waits again
        for index in 0..<Int(count) {
            let tag = readyTags[index]
            if tag == 0 { drainPipe(); continue }
            let slot = Int(tag - 1)
            guard slot < sockets.count, !readyBuffer[..<askedFirst].contains(slot) else { continue }
            questions += 1
            if sockets[slot].hasInput() { readyBuffer.append(slot) }
        }
        return readyBuffer
    }

    /// Brings the epoll instance's registrations to `sockets` (see `waitWithEpoll`).
    /// - Returns: false when epoll failed; it is not used again on this reactor.
    private func register(_ sockets: [ZMQSocket]) -> Bool {
        var kept = 0
        while kept < registered.count, kept < sockets.count, registered[kept] == sockets[kept].serial { kept += 1 }
        if kept == sockets.count, kept == registered.count, epollFD >= 0 { return true }
        if kept < registered.count || epollFD < 0 {
            // A socket left or moved: a new instance (closing the old one drops what it held).
            if epollFD >= 0 { close(epollFD) }
            registered.removeAll(keepingCapacity: true)
            kept = 0
            epollFD = frienso_epoll_create()
            guard epollFD >= 0, frienso_epoll_add(epollFD, readEnd, 0) == 0 else { return failEpoll() }
            registrations.add(1, ordering: .relaxed)
        }
        for slot in kept..<sockets.count {
            guard frienso_epoll_add(epollFD, sockets[slot].signalFD, UInt64(slot + 1)) == 0 else { return failEpoll() }
            registered.append(sockets[slot].serial)
        }
        registrations.add(sockets.count - kept, ordering: .relaxed)
        return true
    }

    private func failEpoll() -> Bool {
        if epollFD >= 0 { close(epollFD) }
        epollFD = -1
        registered = []
        epollFailed = true
        return false
    }

    /// Waits with one `poll(2)` on the wake-up pipe and each socket's `ZMQ_FD`, asking libzmq
    /// (`ZMQ_EVENTS`) only about sockets that may have input: those whose descriptor fired, and
    /// those used since they were last asked (a send or receive may consume the wake-up that
    /// announced a message, so their descriptor cannot be trusted). `zmq_poll` asks every socket
    /// twice per call, and each question about an idle socket is a `poll(2)` and a `getpid(2)`
    /// inside libzmq: in the benchmark's load generator (120 clients on one reactor) that was a
    /// quarter of its CPU (docs/benchmarks.md, issue 16, item 24).
    /// - Returns: the indices of the sockets with a message waiting.
    private func waitDirectly(_ sockets: [ZMQSocket], timeout: Int) -> [Int] {
        var questions = askSocketsUsedSinceAsked(sockets)
        defer { socketQuestions.add(questions, ordering: .relaxed) }
        fds.removeAll(keepingCapacity: true)
        fds.append(pollfd(fd: readEnd, events: Int16(POLLIN), revents: 0))
        for socket in sockets { fds.append(pollfd(fd: socket.signalFD, events: Int16(POLLIN), revents: 0)) }
        let count = Glibc.poll(&fds, nfds_t(fds.count), readyBuffer.isEmpty ? Int32(clamping: timeout) : 0)
        guard count > 0 else { return readyBuffer }
        if fds[0].revents & Int16(POLLIN) != 0 { drainPipe() }
        for slot in sockets.indices where fds[slot + 1].revents != 0 && !readyBuffer.contains(slot) {
            questions += 1
            if sockets[slot].hasInput() { readyBuffer.append(slot) }
        }
        return readyBuffer
    }

    /// A wait's first step, before it waits: asks libzmq about the sockets used since they were
    /// last asked (`ZMQSocket.mayHaveInput`) and lists those with a message in `readyBuffer`,
    /// which is kept between turns (reactor thread only: no allocation per turn with input; the
    /// list returned is the caller's until the next turn, when it is unique again).
    /// - Returns: how many sockets it asked.
    private func askSocketsUsedSinceAsked(_ sockets: [ZMQSocket]) -> Int {
        readyBuffer.removeAll(keepingCapacity: true)
        var questions = 0
        for (slot, socket) in sockets.enumerated() where socket.mayHaveInput {
            questions += 1
            if socket.hasInput() { readyBuffer.append(slot) }
        }
        return questions
    }

    private func waitWithZMQPoll(_ sockets: [ZMQSocket], timeout: Int) -> [Int] {
        // `zmq_poll` asks every socket once with a zero timeout, and again after waiting.
        socketQuestions.add(sockets.count * (timeout == 0 ? 1 : 2), ordering: .relaxed)
        var items = [zmq_pollitem_t(socket: nil, fd: readEnd, events: Int16(ZMQ_POLLIN), revents: 0)] + sockets.map { $0.pollItem() }
        guard (try? ZMQPoller.poll(&items, timeoutMilliseconds: timeout)) ?? 0 > 0 else { return [] }
        if items[0].revents & Int16(ZMQ_POLLIN) != 0 { drainPipe() }
        return items.indices.dropFirst().filter { items[$0].revents & Int16(ZMQ_POLLIN) != 0 }.map { $0 - 1 }
    }

    /// Woken from another thread: empty the pipe (what was posted is picked up next turn).
    private func drainPipe() {
        var sink = [UInt8](repeating: 0, count: 512)
        while read(readEnd, &sink, sink.count) > 0 {}
    }
}
